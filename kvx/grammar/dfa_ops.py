"""Operations on whole DFAs: intersection/difference (product) and fast bounded repetition."""
from __future__ import annotations

from typing import Optional

import numpy as np

from kvx.grammar.determinize import DEFAULT_MAX_STATES, intern, minimise, to_dfa, trim
from kvx.grammar.dfa import DFA
from kvx.grammar.nfa import TooLarge


def class_view(*dfas: DFA):
    """Byte classes shared by several DFAs: (representative byte per class, class_of_byte)."""
    both = np.concatenate([d.trans for d in dfas], axis=0).T  # [256, sum S]
    _, first, inverse = np.unique(both, axis=0, return_index=True, return_inverse=True)
    return first, inverse.reshape(-1)


def product(a: DFA, b: DFA, mode: str = "and", max_states: int = DEFAULT_MAX_STATES) -> DFA | None:
    """Intersection ("and") or difference ("minus": a and not b) of two DFAs."""
    reps, class_of_byte = class_view(a, b)
    ta, tb = a.trans[:, reps].tolist(), b.trans[:, reps].tolist()
    k = len(reps)
    start = (a.start, b.start)
    index = {start: 0}
    order = [start]
    rows = []
    i = 0
    while i < len(order):
        sa, sb = order[i]
        ra_, rb_ = ta[sa], tb[sb] if sb >= 0 else None
        row = [-1] * k
        for c in range(k):
            na = ra_[c]
            if na < 0:
                continue
            nb = rb_[c] if rb_ is not None else -1
            if nb < 0 and mode == "and":
                continue
            row[c] = intern(index, order, (na, nb), max_states)
        rows.append(row)
        i += 1
    trans = np.array(rows, dtype=np.int32).reshape(len(rows), k)
    if mode == "and":
        accepting = np.array([bool(a.accepting[x]) and bool(b.accepting[y]) for x, y in order])
    else:
        accepting = np.array([bool(a.accepting[x]) and not (y >= 0 and bool(b.accepting[y]))
                              for x, y in order])
    trimmed = trim(trans, accepting)
    if trimmed is None:
        return None
    trans, acc, start = minimise(*trimmed)
    return to_dfa(trans, acc, class_of_byte, start)


def is_prefix_code(d: DFA) -> bool:
    """No accepted word is a proper prefix of another: accepting states have no way out."""
    return not (d.trans[d.accepting] >= 0).any()


def repeat(x: DFA, lo: int, hi: Optional[int], max_states: int = DEFAULT_MAX_STATES) -> DFA:
    """x{lo,hi} for a prefix-code DFA x with one accepting state and no empty word, built
    directly as counter copies (the NFA route is quadratic in the count for such bounds)."""
    (final,) = np.flatnonzero(x.accepting)
    inner = [q for q in range(x.num_states) if q != final]
    pos = {q: i for i, q in enumerate(inner)}
    m = len(inner)
    copies = (hi if hi is not None else lo) + 1  # copy i = i characters done
    if copies * m > max_states:
        raise TooLarge(f"more than {max_states} DFA states")
    base = np.full((m, 256), -1, dtype=np.int64)  # local target within a copy
    done = np.zeros((m, 256), dtype=bool)  # byte completes a character
    for q in inner:
        row = x.trans[q]
        for b in np.flatnonzero(row >= 0):
            t = int(row[b])
            if t == final:
                done[pos[q], b] = True
            else:
                base[pos[q], b] = pos[t]
    trans = np.full((copies * m, 256), -1, dtype=np.int64)
    for i in range(copies):
        blk = trans[i * m:(i + 1) * m]
        blk[base >= 0] = base[base >= 0] + i * m
        if i + 1 < copies:
            blk[done] = (i + 1) * m + pos[x.start]
        elif hi is None:  # stay in the last copy: lo or more characters
            blk[done] = i * m + pos[x.start]
    accepting = np.zeros(copies * m, dtype=bool)
    for i in range(lo, copies):
        accepting[i * m + pos[x.start]] = True
    start = pos[x.start]
    if hi is not None:  # the last copy's inner states (other than its start) lead nowhere
        trans[(copies - 1) * m:, :] = -1
    trimmed = trim(trans.astype(np.int32), accepting, start)
    if trimmed is None:
        return None
    t, a, s = trimmed
    return DFA(trans=t, accepting=a, start=s)
