"""Word boundaries (`\\b`, `\\B`) in a pattern, by marking where they sit and projecting the marks out.

A boundary is a condition on the characters around a position: a word character on exactly one
side (`\\b`; the string's ends count as non-word), or on neither or both sides (`\\B`). The
pattern is compiled with a marker byte where each one sits (0xFF, 0xFE: bytes no UTF-8 text
holds), intersected with the strings whose every marker stands where its condition holds (a
six-state automaton over the JSON spellings of word and other characters), and the markers are
then read as empty moves, determinised again (automata/empty_moves_kernel.py; without numba, the
automaton's edges as a graph for the composer).
"""
from __future__ import annotations

import numpy as np

from kvx.grammar.automata import deadline, graph_kernels
from kvx.grammar.automata import regex_ast as ra
from kvx.grammar.automata.cdfa import CDFA, column_classes
from kvx.grammar.automata.compose import fast_compile
from kvx.grammar.automata.dfa import DFA
from kvx.grammar.automata.dfa_ops import product, trimmed_minimal
from kvx.grammar.automata.table_kernels import csr

BOUNDARY, NOT_BOUNDARY = 0xFF, 0xFE
NONE, PENDING_BOUNDARY, PENDING_NOT = 0, 1, 2  # markers read since the last character
LOOK_EVERY = 1 << 16  # units of the empty-move kernel's work (a member or a class read) between looks at the deadline


def marker(boundary: bool) -> ra.Bytes:
    return ra.Bytes(1 << (BOUNDARY if boundary else NOT_BOUNDARY))


def resolve(marked: DFA | None, word: ra.Node, other: ra.Node, max_states: int) -> DFA | None:
    """The strings of `marked` whose markers all stand where their condition holds, markers removed.
    `word` / `other`: one word / non-word character in every spelling."""
    if marked is None:
        return None
    checked = product(marked, fast_compile(_conditions(word, other), max_states), "and", max_states)
    if checked is None:
        return None
    compiled = graph_kernels.kernels()
    if compiled is None:
        return fast_compile(_without_markers(checked.expand()), max_states)
    return _markers_as_empty_moves(compiled.empty_moves, checked, max_states)


def _markers_as_empty_moves(kernel, c: CDFA, max_states: int) -> DFA | None:
    """The marked automaton with its markers read as empty moves, determinised in one compiled call
    (the same language as _without_markers' graph composed; trimmed, and minimised when small)."""
    marks = np.unique(c.cob[[BOUNDARY, NOT_BOUNDARY]])
    table = np.ascontiguousarray(c.trans, dtype=np.int32).copy()
    # a marker's class holds no other byte that moves: the rest of 0xF5-0xFF is in no UTF-8 text
    src, col = np.nonzero(table[:, marks] >= 0)
    dst = table[src, marks[col]]
    table[:, marks] = -1
    ptr, targets = csr(len(table), src.astype(np.int64), dst.astype(np.int64))
    status, rows, acc = kernel(table, np.asarray(c.accepting, dtype=bool), int(c.start), ptr, targets, max_states,
                               LOOK_EVERY)
    deadline.raise_for_stop(status, max_states)
    reps, of_class = column_classes(rows)  # the markers' columns are dead now, as others may be
    result = trimmed_minimal(np.ascontiguousarray(rows[:, reps]), acc, 0, of_class[c.cob])
    return None if result is None else result.expand()


def _conditions(word: ra.Node, other: ra.Node) -> ra.Graph:
    """States (last character a word one?, markers pending); the start counts as after a non-word
    character and so does the end: a pending `\\b` ends after a word character, a `\\B` after another."""
    def state(last_word: bool, pending: int) -> int:
        return int(last_word) * 3 + pending

    edges = []
    for last_word in (False, True):
        for pending in (NONE, PENDING_BOUNDARY, PENDING_NOT):
            here = state(last_word, pending)
            for is_word, label in ((True, word), (False, other)):
                if pending == NONE or (pending == PENDING_BOUNDARY) == (last_word != is_word):
                    edges.append((here, state(is_word, NONE), label))
            if pending != PENDING_NOT:
                edges.append((here, state(last_word, PENDING_BOUNDARY), marker(True)))
            if pending != PENDING_BOUNDARY:
                edges.append((here, state(last_word, PENDING_NOT), marker(False)))
    finals = (state(False, NONE), state(True, NONE), state(True, PENDING_BOUNDARY), state(False, PENDING_NOT))
    return ra.Graph(6, tuple(edges), finals)


def _without_markers(dfa: DFA) -> ra.Graph:
    """The automaton as a graph (node 0 leads to its start), its marker moves made empty. A loop over
    the [states, 256] table: 0.5 s for the 24,507 states a `\\b` URL pattern's marked automaton
    holds under the cap, so it looks at the deadline as it goes (that pattern was refused 0.3 s past
    it)."""
    markers = {BOUNDARY, NOT_BOUNDARY}
    edges = [(0, int(dfa.start) + 1, None)]
    for s, row in enumerate(dfa.trans.tolist()):
        if s % 1024 == 1023:
            deadline.check()
        by_target: dict[int, int] = {}
        for byte, t in enumerate(row):
            if t < 0:
                continue
            if byte in markers:
                edges.append((s + 1, t + 1, None))
            else:
                by_target[t] = by_target.get(t, 0) | (1 << byte)
        edges.extend((s + 1, t + 1, ra.Bytes(mask)) for t, mask in by_target.items())
    finals = tuple(int(s) + 1 for s in np.flatnonzero(dfa.accepting))
    return ra.Graph(dfa.num_states + 1, tuple(edges), finals)
