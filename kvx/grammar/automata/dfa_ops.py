"""Operations on whole DFAs: intersection/difference (product) and fast bounded repetition."""
from __future__ import annotations

from typing import Optional

import numpy as np

from kvx.grammar.automata import deadline
from kvx.grammar.automata.determinize import DEFAULT_MAX_STATES, intern, minimise, to_dfa, trim
from kvx.grammar.automata.dfa import DFA
from kvx.grammar.errors import TooLarge


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
        if i % 256 == 0:
            deadline.check()
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
    from kvx.grammar.automata.cdfa import compact, repeat_char

    c = repeat_char(compact(x), lo, hi, max_states)
    return None if c is None else c.expand()
