"""Compact DFAs over byte classes (`CDFA`) and the vectorised graph helpers the composer and the
token budget share: CSR neighbours, reachability, trimming, the byte-class form of a 256-column
DFA, one-class automata and bounded repetition of a one-character automaton as counter copies.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kvx.grammar.automata import graph_kernels
from kvx.grammar.automata.dfa import DFA
from kvx.grammar.automata.process_cache import ProcessCache
from kvx.grammar.errors import TooLarge


def neighbours(frontier: np.ndarray, starts: np.ndarray, counts: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """All targets[starts[f] : starts[f] + counts[f]] for f in frontier (CSR rows, vectorised)."""
    cnt = counts[frontier]
    total = int(cnt.sum())
    offsets = np.repeat(starts[frontier] - (np.cumsum(cnt) - cnt), cnt) + np.arange(total)
    return targets[offsets]


def reach(n: int, src: np.ndarray, dst: np.ndarray, seeds: np.ndarray) -> np.ndarray:
    """States reachable from `seeds` along edges src -> dst (breadth-first search)."""
    compiled = graph_kernels.kernels()
    if compiled is not None:  # linear in the edges: no deadline to look at
        as64 = lambda a: np.ascontiguousarray(a, dtype=np.int64)
        return compiled.reach(n, as64(src), as64(dst), as64(seeds).reshape(-1))
    order = np.argsort(src, kind="stable")
    dst_sorted = dst[order]
    counts = np.bincount(src, minlength=n)
    starts = np.concatenate([[0], np.cumsum(counts)])
    seen = np.zeros(n, dtype=bool)
    frontier = np.unique(np.asarray(seeds, dtype=np.int64))
    seen[frontier] = True
    while len(frontier):
        cand = neighbours(frontier, starts, counts, dst_sorted)
        cand = np.unique(cand[~seen[cand]])
        seen[cand] = True
        frontier = cand
    return seen


@dataclass
class CDFA:
    """A trimmed DFA over byte classes: trans [S, K] (-1 dead), cob = class of each byte [256]."""

    trans: np.ndarray
    accepting: np.ndarray
    start: int
    cob: np.ndarray

    @property
    def num_states(self) -> int:
        return int(self.trans.shape[0])

    def accepts(self, data: bytes) -> bool:
        s = self.start
        for b in data:
            s = int(self.trans[s, self.cob[b]])
            if s < 0:
                return False
        return bool(self.accepting[s])

    def expand(self) -> DFA:
        trans = np.empty((self.num_states, 256), dtype=np.int32)
        compiled = graph_kernels.kernels()
        if compiled is not None:  # each row's classes spread over the bytes: a third of numpy's column gather
            compiled.spread(np.ascontiguousarray(self.trans, dtype=np.int32), self.cob.astype(np.int64, copy=False), 0,
                            trans)
        else:
            np.take(self.trans, self.cob, axis=1, out=trans)
        return DFA(trans=trans, accepting=self.accepting.astype(bool), start=int(self.start), classes=self.cob)


def row_groups(mat: np.ndarray):
    """np.unique(mat, axis=0, return_index=True, return_inverse=True) without its slow axis path:
    rows are compared as raw bytes. Returns (first index of each group, group of each row)."""
    mat = np.ascontiguousarray(mat)
    keys = mat.view(np.dtype((np.void, mat.dtype.itemsize * mat.shape[1]))).reshape(-1)
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    return first, inverse.reshape(-1)


def column_classes(trans: np.ndarray):
    """(first byte of each class, class_of_byte) for the identical columns of `trans`."""
    compiled = graph_kernels.kernels()
    if compiled is not None and trans.dtype in (np.int32, np.int64):
        return compiled.column_classes(np.ascontiguousarray(trans))
    first, inverse = row_groups(trans.T)
    order = np.argsort(first)  # classes numbered by their first byte
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return first[order], rank[inverse].astype(np.int64)


def flat_tables(automata: list[CDFA]) -> tuple:
    """Automata as the compiled kernels read many at once (network_kernel, link_kernel): their tables
    flat (int32), shapes [n, 2], acceptance flat, byte classes [n, 256]."""
    if not automata:
        return np.zeros(0, np.int32), np.zeros((0, 2), np.int64), np.zeros(0, bool), np.zeros((0, 256), np.int64)
    return (np.concatenate([d.trans.ravel() for d in automata]).astype(np.int32, copy=False),
            np.array([d.trans.shape for d in automata], dtype=np.int64),
            np.concatenate([d.accepting for d in automata]).astype(bool, copy=False),
            np.array([d.cob for d in automata], dtype=np.int64))


def compact(dfa: DFA | CDFA) -> CDFA:
    """The byte-class form of a 256-column DFA (its classes are found once and kept in dfa.classes)."""
    if isinstance(dfa, CDFA):
        return dfa
    if dfa.classes is None:
        dfa.classes = column_classes(dfa.trans)[1]
    # the first byte of each class (classes are 0..k-1): the last write of a reversed scatter wins
    reps = np.empty(int(dfa.classes.max()) + 1, dtype=np.int64)
    reps[dfa.classes[::-1]] = np.arange(255, -1, -1)
    return CDFA(np.ascontiguousarray(dfa.trans[:, reps]).astype(np.int32), dfa.accepting.astype(bool),
                int(dfa.start), dfa.classes)


def trim(trans: np.ndarray, accepting: np.ndarray, start: int, cob: np.ndarray,
         all_live: bool = False) -> CDFA | None:
    """Keep states reachable from `start` that can reach acceptance; None if the language is empty.
    `all_live`: the caller knows every state can reach acceptance (only reachability is left)."""
    n = trans.shape[0]
    compiled = graph_kernels.kernels()
    if compiled is not None:  # one pass over the table each way: no pair list to deduplicate
        seen = compiled.trim(np.ascontiguousarray(trans), np.asarray(accepting, dtype=bool), int(start), all_live)
        if not seen[start]:
            return None
    else:
        rows, ks = np.nonzero(trans >= 0)
        pairs = np.unique(rows.astype(np.int64) * n + trans[rows, ks])
        src, dst = pairs // n, pairs % n
        if all_live:
            seen = reach(n, src, dst, np.array([start]))
        else:
            live = reach(n, dst, src, np.flatnonzero(accepting))
            if not live[start]:
                return None
            ok = live[src] & live[dst]
            seen = reach(n, src[ok], dst[ok], np.array([start]))
    keep = np.flatnonzero(seen)
    if len(keep) == n:
        return CDFA(trans.astype(np.int32, copy=False), accepting.astype(bool), int(start), cob)
    remap = np.full(n + 1, -1, dtype=np.int32)
    remap[keep] = np.arange(len(keep), dtype=np.int32)
    return CDFA(remap[trans[keep]].astype(np.int32), accepting[keep].astype(bool), int(remap[start]), cob)


_SINGLE_TRANS = np.array([[-1, 1], [-1, -1]], dtype=np.int32)
_SINGLE_ACC = np.array([False, True])


_SINGLES: ProcessCache[CDFA] = ProcessCache(4096)  # byte mask -> its one-class automaton


def single_class(mask: int) -> CDFA | None:
    if not mask:
        return None
    hit = _SINGLES.get(mask)
    if hit is not None:
        return hit
    bits = np.frombuffer(mask.to_bytes(32, "little"), dtype=np.uint8)
    cob = np.unpackbits(bits, bitorder="little").astype(np.int64)
    return _SINGLES.keep(mask, CDFA(_SINGLE_TRANS, _SINGLE_ACC, 0, cob))


def empty_word() -> CDFA:
    return CDFA(np.full((1, 1), -1, dtype=np.int32), np.array([True]), 0, np.zeros(256, dtype=np.int64))


def is_prefix_char(x: CDFA) -> bool:
    """One accepting state, no way out of it, no empty word: what `repeat_char` needs."""
    acc = np.flatnonzero(x.accepting)
    return len(acc) == 1 and not x.accepting[x.start] and not (x.trans[acc[0]] >= 0).any()


def repeat_char(x: CDFA, lo: int, hi: int | None, max_states: int) -> CDFA | None:
    """x{lo,hi} for a prefix-code x with one accepting state, as counter copies (numpy)."""
    if hi == 0:  # the empty word alone (`maxLength: 0` beside a pattern)
        return CDFA(np.full((1, x.trans.shape[1]), -1, dtype=np.int32), np.array([True]), 0, x.cob)
    (final,) = np.flatnonzero(x.accepting)
    inner = np.array([q for q in range(x.num_states) if q != final], dtype=np.int64)
    m = len(inner)
    pos = np.full(x.num_states + 1, -1, dtype=np.int64)
    pos[inner] = np.arange(m)
    copies = (hi if hi is not None else lo) + 1  # copy i = i characters done
    if copies * m > max_states:
        raise TooLarge(f"more than {max_states} DFA states")
    t = x.trans[inner].astype(np.int64)
    done = t == final
    base = np.where((t >= 0) & ~done, pos[np.where(t >= 0, t, x.num_states)], -1)
    blocks_n = copies if hi is None else copies - 1  # bounded: the last copy is one final state
    offs = (np.arange(blocks_n, dtype=np.int64) * m)[:, None, None]
    blocks = np.where(base >= 0, base[None] + offs, -1)  # [blocks, m, K]
    s0 = int(pos[x.start])
    nxt = (np.arange(blocks_n, dtype=np.int64) + 1) * m + s0
    if hi is None:
        nxt[-1] = (copies - 1) * m + s0  # unbounded: stay in the last copy
    else:
        nxt[-1] = blocks_n * m  # the final state
    blocks = np.where(done[None], nxt[:, None, None], blocks)
    trans = blocks.reshape(blocks_n * m, -1).astype(np.int32)
    accepting = np.zeros(blocks_n * m, dtype=bool)
    accepting[np.arange(lo, blocks_n) * m + s0] = True
    if hi is not None:
        trans = np.concatenate([trans, np.full((1, trans.shape[1]), -1, dtype=np.int32)])
        accepting = np.append(accepting, True)
    # every state is reachable (x is trimmed) and can finish: no trim needed
    return CDFA(trans, accepting, s0, x.cob)



def trie(words) -> tuple[list[dict], list[bool]]:
    """The trie of `words` (sequences of bytes or characters): each node's children by symbol
    (node 0 is the root), and whether a word ends there."""
    children: list[dict] = [{}]
    ends = [False]
    for word in words:
        s = 0
        for sym in word:
            nxt = children[s].get(sym)
            if nxt is None:
                nxt = children[s][sym] = len(children)
                children.append({})
                ends.append(False)
            s = nxt
        ends[s] = True
    return children, ends


def literal_set(words: list[bytes]) -> CDFA | None:
    """A finite set of byte strings (enum members) as a trie, built directly (the composer would
    find the same automaton by subset construction over one copy per word). Not minimised: a
    trie is small enough, and Moore's rounds would grow with the longest word. Kept per word list
    (ruff's 900 rule codes are one enum in seven places)."""
    if not words:
        return None
    key = tuple(words)
    hit = _LITERAL_SETS.get(key)
    if hit is None:
        hit = _LITERAL_SETS.keep(key, _literal_set(words))
    return hit


_LITERAL_SETS: ProcessCache[CDFA] = ProcessCache(256)  # word list -> its trie


def _literal_set(words: list[bytes]) -> CDFA:
    children, accepting = trie(words)
    table = np.full((len(children), 256), -1, dtype=np.int32)
    edges = [(s, b, c) for s, kids in enumerate(children) for b, c in kids.items()]  # one scatter, not one a node
    if edges:
        src, byte, dst = zip(*edges)
        table[list(src), list(byte)] = dst
    reps, cob = column_classes(table)
    return CDFA(np.ascontiguousarray(table[:, reps]), np.array(accepting), 0, cob)
