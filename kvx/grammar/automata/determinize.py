"""NFA -> DFA: subset construction over byte classes, trimming, Moore minimisation (numpy).

The alphabet is first split into byte classes (bytes no edge mask tells apart), so the subset
construction and the minimisation work on a few dozen symbols instead of 256.
"""
from __future__ import annotations

import numpy as np

from kvx.grammar.automata import deadline, graph_kernels
from kvx.grammar.automata import regex_ast as ra
from kvx.grammar.automata.dfa import DFA
from kvx.grammar.automata.nfa import NFA, build_nfa
from kvx.grammar.errors import TooLarge

DEFAULT_MAX_STATES = 50_000


def byte_classes(masks) -> list[int]:
    """Coarsest partition of 0..255 such that every mask is a union of classes."""
    classes = [ra.ALL_BYTES]
    for m in masks:
        nxt = []
        for c in classes:
            a, b = c & m, c & ~m
            nxt.extend(x for x in (a, b) if x)
        classes = nxt
    return classes


def _closures(nfa: NFA) -> list[int]:
    """Epsilon closure of every NFA state, as an int bitset."""
    out = [0] * len(nfa.eps)
    for s in range(len(nfa.eps)):
        if not nfa.eps[s]:
            out[s] = 1 << s
            continue
        seen = {s}
        stack = [s]
        while stack:
            for t in nfa.eps[stack.pop()]:
                if t not in seen:
                    seen.add(t)
                    stack.append(t)
        bits = 0
        for t in seen:
            bits |= 1 << t
        out[s] = bits
    return out


def _members(bits: int) -> list[int]:
    out = []
    while bits:
        low = bits & -bits
        out.append(low.bit_length() - 1)
        bits ^= low
    return out


def intern(index: dict, order: list, key, max_states: int) -> int:
    """Id of the DFA state `key`, numbering new ones in discovery order (capped)."""
    j = index.get(key)
    if j is None:
        j = index[key] = len(order)
        order.append(key)
        if len(order) > max_states:
            raise TooLarge(f"more than {max_states} DFA states")
    return j


def subset_construction(nfa: NFA, max_states: int = DEFAULT_MAX_STATES):
    """Returns (trans [S, K] int32 with -1 dead, accepting [S] bool, class_of_byte [256])."""
    masks = {m for edges in nfa.edges for m, _ in edges}
    classes = byte_classes(masks)
    class_of_byte = np.zeros(256, dtype=np.int64)
    for k, c in enumerate(classes):
        for b in range(256):
            if c >> b & 1:
                class_of_byte[b] = k
    classes_of_mask = {m: [k for k, c in enumerate(classes) if c & m] for m in masks}
    closure = _closures(nfa)
    moves: list = [None] * len(nfa.eps)
    for s, edges in enumerate(nfa.edges):
        if edges:
            mv: dict[int, int] = {}
            for m, t in edges:
                for k in classes_of_mask[m]:
                    mv[k] = mv.get(k, 0) | closure[t]
            moves[s] = list(mv.items())
    start = closure[nfa.start]
    index = {start: 0}
    order = [start]
    rows = []
    accept_bit = 1 << nfa.accept
    num_classes = len(classes)
    i = 0
    while i < len(order):
        if i % 256 == 0:
            deadline.check()
        acc: dict[int, int] = {}
        for s in _members(order[i]):
            mv = moves[s]
            if mv:
                for k, tgt in mv:
                    acc[k] = acc.get(k, 0) | tgt
        row = [-1] * num_classes
        for k, key in acc.items():
            row[k] = intern(index, order, key, max_states)
        rows.append(row)
        i += 1
    trans = np.array(rows, dtype=np.int32).reshape(len(rows), num_classes)
    accepting = np.array([bool(st & accept_bit) for st in order], dtype=bool)
    return trans, accepting, class_of_byte


def _reach(n: int, src: np.ndarray, dst: np.ndarray, seeds) -> np.ndarray:
    """States reachable from `seeds` along the (deduplicated) edges src -> dst."""
    order = np.argsort(src, kind="stable")
    src, dst = src[order], dst[order]
    starts = np.searchsorted(src, np.arange(n + 1))
    seen = np.zeros(n, dtype=bool)
    seen[list(seeds)] = True
    stack = list(seeds)
    dst_l, starts_l = dst.tolist(), starts.tolist()
    while stack:
        s = stack.pop()
        for t in dst_l[starts_l[s]:starts_l[s + 1]]:
            if not seen[t]:
                seen[t] = True
                stack.append(t)
    return seen


def trim(trans: np.ndarray, accepting: np.ndarray, start: int = 0):
    """Drop states that are unreachable or cannot reach acceptance; renumbers; returns
    (trans, accepting, start) or None if the language is empty."""
    n = trans.shape[0]
    rows, cols = np.nonzero(trans >= 0)
    pairs = np.unique(rows.astype(np.int64) * n + trans[rows, cols])
    src, dst = pairs // n, pairs % n
    live = _reach(n, dst, src, np.flatnonzero(accepting).tolist())
    if not live[start]:
        return None
    ok = live[src] & live[dst]
    seen = _reach(n, src[ok], dst[ok], [start])
    keep = np.flatnonzero(seen)
    remap = np.full(n + 1, -1, dtype=np.int32)
    remap[keep] = np.arange(len(keep), dtype=np.int32)
    new = remap[trans[keep]]  # -1 stays -1 through remap[n]
    return new.astype(np.int32), accepting[keep], int(remap[start])


def _row_ids(rows: np.ndarray) -> np.ndarray:
    """Dense ids of equal rows (exact: columns are folded in one at a time)."""
    ids = np.zeros(rows.shape[0], dtype=np.int64)
    for col in rows.T:
        _, ids = np.unique(ids * (rows.shape[0] + 2) + (col + 1), return_inverse=True)
        ids = ids.reshape(-1)
    return ids


_MULT = np.random.default_rng(12345).integers(1, 2**62, size=4096, dtype=np.int64) | 1


def _hashed_ids(rows: np.ndarray) -> np.ndarray:
    """Dense ids of rows by a 64-bit hash; collisions are caught by the congruence check."""
    h = (rows.astype(np.int64) + 2) * _MULT[: rows.shape[1]]
    _, ids = np.unique(h.sum(axis=1), return_inverse=True)
    return ids.reshape(-1)


def _refine(trans: np.ndarray, accepting: np.ndarray, row_ids) -> np.ndarray:
    n = trans.shape[0]
    block = accepting.astype(np.int64)
    count = len(np.unique(block))
    live = trans >= 0
    safe = np.where(live, trans, 0)
    while True:
        deadline.check()
        tb = np.where(live, block[safe], -1)
        block = row_ids(np.column_stack([block, tb]))
        new_count = int(block.max()) + 1 if n else 0
        if new_count == count:
            return block
        count = new_count


def _is_congruence(trans: np.ndarray, accepting: np.ndarray, block: np.ndarray) -> bool:
    count = int(block.max()) + 1
    rep = np.zeros(count, dtype=np.int64)
    rep[block] = np.arange(len(block))
    live = trans >= 0
    tb = np.where(live, block[np.where(live, trans, 0)], -1)
    return bool((tb == tb[rep[block]]).all() and (accepting == accepting[rep[block]]).all())


def minimise(trans: np.ndarray, accepting: np.ndarray, start: int = 0):
    """The minimal DFA of a trimmed one: compiled Hopcroft (minimise_kernel.py) up to
    MINIMISE_COMPILED_UP_TO states, else Moore's rounds in numpy (which look at the deadline between
    rounds); either way (trans, accepting, start) renumbered breadth-first from the start (start = 0)."""
    compiled = graph_kernels.kernels() if trans.shape[0] <= graph_kernels.MINIMISE_COMPILED_UP_TO else None
    if compiled is not None:
        out, acc = compiled.minimise(np.ascontiguousarray(trans, dtype=np.int32), np.asarray(accepting, dtype=bool),
                                     int(start))
        return out, acc, 0
    n = trans.shape[0]
    block = _refine(trans, accepting, _hashed_ids)
    if not _is_congruence(trans, accepting, block):  # a hash collision: redo exactly
        block = _refine(trans, accepting, _row_ids)
    count = int(block.max()) + 1
    rep = np.zeros(count, dtype=np.int64)
    rep[block[::-1]] = np.arange(n)[::-1]  # first state of each block
    btrans = np.where(trans[rep] >= 0, block[np.where(trans[rep] >= 0, trans[rep], 0)], -1)
    bacc = accepting[rep]
    # breadth-first renumbering so equal languages give identical tables
    order = [int(block[start])]
    pos = {order[0]: 0}
    i = 0
    while i < len(order):
        for t in btrans[order[i]].tolist():
            if t >= 0 and t not in pos:
                pos[t] = len(order)
                order.append(t)
        i += 1
    remap = np.full(count + 1, -1, dtype=np.int64)
    remap[order] = np.arange(len(order))
    out = remap[btrans[order]]
    return out.astype(np.int32), bacc[order], 0


def to_dfa(trans_k: np.ndarray, accepting: np.ndarray, class_of_byte: np.ndarray, start: int = 0) -> DFA:
    return DFA(trans=np.ascontiguousarray(trans_k[:, class_of_byte]).astype(np.int32),
               accepting=accepting.astype(bool), start=start)


def compile_node(node: ra.Node, max_states: int = DEFAULT_MAX_STATES) -> DFA | None:
    """Regex AST -> trimmed, minimised DFA (None when the language is empty)."""
    nfa = build_nfa(node, max_states=max_states * 8)
    trans, acc, cob = subset_construction(nfa, max_states)
    trimmed = trim(trans, acc)
    if trimmed is None:
        return None
    trans, acc, start = minimise(*trimmed)
    return to_dfa(trans, acc, cob, start)


