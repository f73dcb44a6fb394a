"""Fewest tokens from a DFA state to acceptance: the length budget's bound.

The bound must be *realisable* (some allowed token always keeps it), so a matcher that masks every
token whose next state needs more tokens than are left can never paint itself into a corner.
1. `byte_dist`: the shortest byte path using only bytes that are one-byte tokens (all bytes JSON
   emits raw are, in byte-level BPE). One BFS per schema, vectorised.
2. `TokenDistances`: tightens it lazily, per state: along a canonical shortest byte path, any token
   spelling a prefix of that path is a real step, so dist(s) = 1 + min dist(state after the token)
   (a small DP along the path, longest match found with a prefix table of the vocabulary).
Vocabularies where some state cannot finish with one-byte tokens get exact token-level distances.
"""
from __future__ import annotations

import numpy as np

from kvx.grammar.automata.dfa import DFA
from kvx.grammar.automata.cdfa import neighbours
from kvx.grammar.tokens.vocab import TokenVocab

INF = np.int32(1 << 30)


def byte_class_reps(trans: np.ndarray, usable: np.ndarray) -> np.ndarray:
    """One representative byte per group of usable bytes with identical DFA columns."""
    weights = np.random.default_rng(0).random(trans.shape[0]) + 0.5
    col_hash = weights @ trans.astype(np.float64)  # [256]; equal columns give equal sums (BLAS)
    col_hash = np.where(usable, col_hash, -np.inf)
    _, first = np.unique(col_hash, return_index=True)
    return np.array([b for b in first if usable[b]], dtype=np.int64)


def byte_distances(trans: np.ndarray, accepting: np.ndarray, usable: np.ndarray,
                   class_of_byte: np.ndarray | None = None) -> np.ndarray:
    """Fewest bytes (each from `usable`) from every state to an accepting one; INF if none.
    `class_of_byte`: a known partition of the bytes into identical columns (saves hashing them)."""
    num = trans.shape[0]
    if class_of_byte is None:
        reps = byte_class_reps(trans, usable)
    else:
        cls = np.where(usable, class_of_byte, -1)
        _, first = np.unique(cls, return_index=True)
        reps = np.array([b for b in first if usable[b]], dtype=np.int64)
    dst = trans[:, reps].ravel()
    src = np.repeat(np.arange(num, dtype=np.int32), len(reps))
    live = dst >= 0
    dst, src = dst[live], src[live]
    preds = src[np.argsort(dst, kind="stable")]
    counts = np.bincount(dst, minlength=num)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    dist = np.full(num, INF, dtype=np.int32)
    frontier = np.flatnonzero(accepting)
    dist[frontier] = 0
    level = 0
    while len(frontier):
        cand = neighbours(frontier, starts, counts, preds)
        cand = np.unique(cand[dist[cand] == INF])
        level += 1
        dist[cand] = level
        frontier = cand
    return dist


_PREFIXES: dict[str, dict[bytes, bool]] = {}


def token_prefixes(vocab: TokenVocab) -> dict[bytes, bool]:
    """Every prefix of every token -> whether it is itself a token (once per tokenizer)."""
    table = _PREFIXES.get(vocab.hash)
    if table is None:
        table = {}
        for tb in vocab.token_bytes:
            if tb:
                for k in range(1, len(tb)):
                    table.setdefault(tb[:k], False)
        for tb in vocab.token_bytes:
            if tb:
                table[tb] = True
        _PREFIXES[vocab.hash] = table
    return table


class TokenDistances:
    """dist(s) in tokens, computed on demand and memoised; see the module doc."""

    def __init__(self, dfa: DFA, vocab: TokenVocab, byte_dist: np.ndarray):
        self.dfa = dfa
        self.vocab = vocab
        self.byte_dist = byte_dist
        self.usable = vocab.single_byte_tokens()
        self.prefixes = token_prefixes(vocab)
        self.longest = vocab.longest
        self.memo = np.where(dfa.accepting, 0, -1).astype(np.int32)
        self._byte_dist_ext = np.append(byte_dist, INF)  # index -1 (dead) -> INF
        self._steps: tuple[np.ndarray, np.ndarray] | None = None

    def set_exact(self, dist: np.ndarray) -> None:
        self.memo = dist.astype(np.int32).copy()

    def __getitem__(self, s: int) -> int:
        if self.memo[s] < 0:
            self._fill(s)
        return int(self.memo[s])

    def many(self, states: np.ndarray) -> np.ndarray:
        todo = np.unique(states[self.memo[states] < 0])
        for s in todo:
            if self.memo[s] < 0:
                self._fill(int(s))
        return self.memo[states]

    def _canonical_step(self, s: int) -> tuple[int, int]:
        """The usable byte closest to acceptance from s (the lowest such byte on ties) and its state."""
        if self._steps is None:  # all states at once, vectorised (one call per state cost 13 us)
            self._steps = self._all_canonical_steps()
        return int(self._steps[0][s]), int(self._steps[1][s])

    def _all_canonical_steps(self, chunk: int = 4096) -> tuple[np.ndarray, np.ndarray]:
        trans = self.dfa.trans
        byte, nxt = np.empty(len(trans), np.int64), np.empty(len(trans), np.int64)
        for a in range(0, len(trans), chunk):  # chunks bound the [states, 256] temporaries
            rows = trans[a : a + chunk]
            byte[a : a + chunk] = np.where(self.usable[None, :], self._byte_dist_ext[rows], INF).argmin(axis=1)
            nxt[a : a + chunk] = rows[np.arange(len(rows)), byte[a : a + chunk]]
        return byte, nxt

    def _fill(self, s: int) -> None:
        if self.byte_dist[s] >= INF:
            self.memo[s] = INF
            return
        states, data = [s], bytearray()
        first_known = None
        cur = s
        while not self.dfa.accepting[cur]:  # the canonical path, `longest` bytes past the memo
            if first_known is None and self.memo[cur] >= 0:
                first_known = len(states) - 1
            if first_known is not None and len(states) - 1 - first_known >= self.longest:
                break
            b, cur = self._canonical_step(cur)
            data.append(b)
            states.append(cur)
        end = first_known if first_known is not None else len(states) - 1
        for i in range(end - 1, -1, -1):
            best = INF
            k = 1
            while i + k <= len(data):
                piece = bytes(data[i : i + k])
                is_token = self.prefixes.get(piece)
                if is_token is None:
                    break
                if is_token:
                    best = min(best, int(self.memo[states[i + k]]))
                k += 1
            self.memo[states[i]] = best + 1
