"""Operations on whole DFAs: intersection/difference (product) and fast bounded repetition."""
from __future__ import annotations

from typing import Optional

import numpy as np

from kvx.grammar.automata import deadline, graph_kernels
from kvx.grammar.automata.cdfa import CDFA, column_classes, compact, repeat_char
from kvx.grammar.automata.cdfa import trim as trim_classes
from kvx.grammar.automata.determinize import DEFAULT_MAX_STATES, minimise
from kvx.grammar.automata.dfa import DFA
from kvx.grammar.automata.product_kernel import LOOK_EVERY
from kvx.grammar.errors import TooLarge


MINIMISE_UP_TO = 4096  # states


def product(a: DFA | CDFA, b: DFA | CDFA, mode: str = "and", max_states: int = DEFAULT_MAX_STATES) -> CDFA | None:
    """Intersection ("and") or difference ("minus": a and not b) of two automata, over their joint
    byte classes. Breadth-first over state pairs, a whole frontier of pairs at a time, new pairs
    numbered in key order per level: compiled (product_kernel.product_rows), or numpy per level."""
    a, b = compact(a), compact(b)
    reps, cob = column_classes(np.stack([a.cob, b.cob]))  # the joint byte classes
    nb = b.num_states
    ta = a.trans[:, a.cob[reps]].astype(np.int64)
    tb = np.concatenate([b.trans[:, b.cob[reps]], np.full((1, len(reps)), -1)]).astype(np.int64)
    tb = np.where(tb >= 0, tb, nb)  # b's dead state is row nb (it stays dead)
    start = int(a.start) * (nb + 1) + int(b.start)
    compiled = graph_kernels.kernels()
    if compiled is not None:
        c_order = np.ascontiguousarray  # the gathers above may come out column-major
        status, trans, key_arr = compiled.product(c_order(ta), c_order(tb), nb, start, mode == "minus", max_states,
                                                    LOOK_EVERY)
        deadline.raise_for_stop(status, max_states)
        return _product_result(a, b, mode, trans, key_arr, cob)
    index = {start: 0}
    keys = [start]
    rows = []
    frontier = np.array(keys, dtype=np.int64)
    while len(frontier):
        deadline.check()
        na, nb_ = ta[frontier // (nb + 1)], tb[frontier % (nb + 1)]
        live = (na >= 0) if mode == "minus" else (na >= 0) & (nb_ < nb)
        nxt = np.where(live, na * (nb + 1) + nb_, -1)
        uniq = np.unique(nxt[live])
        fresh = []
        for key in uniq.tolist():
            if key not in index:
                index[key] = len(keys)
                keys.append(key)
                fresh.append(key)
        if len(keys) > max_states:
            raise TooLarge(f"more than {max_states} DFA states")
        ids = np.full(nxt.shape, -1, dtype=np.int64)
        ids[live] = np.array([index[k] for k in uniq.tolist()], dtype=np.int64)[np.searchsorted(uniq, nxt[live])]
        rows.append(ids)
        frontier = np.array(fresh, dtype=np.int64)
    return _product_result(a, b, mode, np.concatenate(rows).astype(np.int32), np.array(keys, dtype=np.int64), cob)


def _product_result(a: CDFA, b: CDFA, mode: str, trans: np.ndarray, keys: np.ndarray, cob: np.ndarray) -> CDFA | None:
    """The product's pairs (keys a * (nb + 1) + b, numbered as `trans`) accept where a does and b
    does ("and") or does not ("minus"); trimmed and minimised."""
    nb = b.num_states
    xa, xb = keys // (nb + 1), keys % (nb + 1)
    b_acc = np.append(b.accepting.astype(bool), False)
    accepting = a.accepting[xa] & (b_acc[xb] if mode == "and" else ~b_acc[xb])
    return trimmed_minimal(trans, accepting, 0, cob.astype(np.int64))


def trimmed_minimal(trans: np.ndarray, accepting: np.ndarray, start: int, cob: np.ndarray) -> CDFA | None:
    """Trimmed, and minimised when small (Moore rounds grow with the longest string), so equal
    languages give identical tables; None if the language is empty."""
    c = trim_classes(trans, accepting, start, cob)
    return None if c is None else minimal(c.trans, c.accepting, c.start, c.cob)


def minimal(trans: np.ndarray, accepting: np.ndarray, start: int, cob: np.ndarray) -> CDFA:
    """A DFA already trimmed, minimised when small (see trimmed_minimal)."""
    if trans.shape[0] <= MINIMISE_UP_TO:
        trans, accepting, start = minimise(trans, accepting, start)
    return CDFA(trans, accepting, start, cob)


def repeat(x: DFA, lo: int, hi: Optional[int], max_states: int = DEFAULT_MAX_STATES) -> CDFA:
    """x{lo,hi} for a prefix-code DFA x with one accepting state and no empty word, built
    directly as counter copies (the NFA route is quadratic in the count for such bounds)."""
    return repeat_char(compact(x), lo, hi, max_states)
