"""Fewest tokens from a state to the end of its rule: the length budget's bound, frame by frame.

The bound of a stack is the sum over its frames: the top state's distance plus each return
state's. It must be *realisable* (some allowed token always lowers it by one), so a matcher that
masks every token whose next stack needs more tokens than are left can never paint itself into a
corner. Per state:
1. `byte_distances`: the fewest bytes to complete the rule, using only bytes that are one-byte
   tokens (all bytes JSON emits raw are, in byte-level BPE), a call costing its callee's own
   distance. One pass over all rules together (Dijkstra by levels), vectorised.
2. `TokenDistances` tightens it lazily: along a canonical shortest path (bytes, then a call, ...),
   any token spelling a piece of the byte run before the next call is a real step, so
   dist(s) = 1 + min dist(state after the token); at a call, dist = dist(callee's start) + dist(return).
Vocabularies where some state cannot finish with one-byte tokens get exact token-level distances
(frames.py: Bellman-Ford over every state's token table).
"""
from __future__ import annotations

import numpy as np

from kvx.grammar.automata import deadline, graph_kernels
from kvx.grammar.automata.cdfa import neighbours
from kvx.grammar.automata.pda import Program
from kvx.grammar.tokens.vocab import TokenVocab

INF = np.int32(1 << 30)
# states whose canonical byte steps are found together (TokenDistances.byte_steps): the start's
# distance, worked out with the program, walks into every rule its cheapest path calls, a chunk each
# (a median program: 2,900 states; 1,024-state chunks cost it 1.0 ms of its compile, 64-state 0.1 ms)
STEP_CHUNK = 64


def _class_reps(program: Program, usable: np.ndarray) -> np.ndarray:
    """One usable byte per byte class of the program (all bytes of a class have one column)."""
    cls = np.where(usable, program.classes, -1)
    _, first = np.unique(cls, return_index=True)
    return np.array([b for b in first if usable[b]], dtype=np.int64)


def byte_distances(program: Program, usable: np.ndarray) -> np.ndarray:
    """Fewest bytes (each from `usable`) from every state to the end of its rule; INF if none."""
    n = program.num_states
    reps = _class_reps(program, usable)
    # the call edges (calling state, the callee's start, the return state)
    call_src = np.repeat(np.arange(n, dtype=np.int64), np.diff(program.call_ptr))
    call_start = program.rule_start[program.call_rule].astype(np.int64)
    call_ret = program.call_ret.astype(np.int64)
    compiled = graph_kernels.kernels()
    if compiled is not None:  # Dijkstra by levels, a heap for calls only: no deadline to look at
        return compiled.distances(np.ascontiguousarray(program.table, dtype=np.int32),
                                  program.classes[reps].astype(np.int64),
                                  np.asarray(program.final, dtype=bool), call_src, call_start, call_ret, int(INF))
    flat = program.table[:, program.classes[reps]].ravel()
    live = np.flatnonzero(flat >= 0)  # most (state, class) pairs are dead: no [n x classes] source array
    dst, src = flat[live].astype(np.int64), live // max(len(reps), 1)
    preds = src[np.argsort(dst, kind="stable")]
    counts = np.bincount(dst, minlength=n)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    dist = np.full(n, INF, dtype=np.int32)
    known = np.zeros(n, dtype=bool)  # dist < INF, kept up to date (no [n] pass per level)
    here = np.zeros(n, dtype=bool)  # the frontier as a mask, cleared after use
    pending: dict[int, list] = {0: [np.flatnonzero(program.final)]}
    while pending:
        deadline.check()
        level = min(pending)
        frontier = np.unique(np.concatenate(pending.pop(level)))
        frontier = frontier[dist[frontier] == INF]
        while len(frontier):  # calls whose return state is final add states at this very level
            dist[frontier] = level
            known[frontier] = True
            here[frontier] = True
            cand = neighbours(frontier, starts, counts, preds)
            cand = cand[dist[cand] == INF]
            if len(cand):
                pending.setdefault(level + 1, []).append(cand)
            via_ret = here[call_ret] & known[call_start]
            via_callee = here[call_start] & known[call_ret] & ~via_ret
            here[frontier] = False
            extra = np.concatenate([call_src[via_ret], call_src[via_callee]])
            cost = np.concatenate([level + dist[call_start[via_ret]], dist[call_ret[via_callee]] + level])
            keep = dist[extra] == INF
            extra, cost = extra[keep], cost[keep]
            frontier = np.unique(extra[cost == level])
            for c in np.unique(cost[cost > level]).tolist():
                pending.setdefault(int(c), []).append(extra[cost == c])
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
    """dist(s) in tokens to the end of s's rule, computed on demand and memoised; see the module doc."""

    def __init__(self, program: Program, vocab: TokenVocab, byte_dist: np.ndarray):
        self.program = program
        self.byte_dist = byte_dist
        self.usable = vocab.single_byte_tokens()
        self.prefixes = token_prefixes(vocab)
        self.longest = vocab.longest
        self.memo = np.where(program.final, 0, -1).astype(np.int32)
        self._ext = np.append(byte_dist, INF)  # index -1 (dead) -> INF
        self._reps: np.ndarray | None = None  # each class's lowest usable byte, sorted
        self._rep_columns: np.ndarray | None = None  # their columns in the program's table
        self._steps: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # chunk -> _byte_steps of its states

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

    def byte_steps(self, chunk: int) -> tuple[np.ndarray, np.ndarray]:
        """For the states chunk * STEP_CHUNK on: the usable byte closest to the rule's end (lowest on
        ties) and its cost. By chunk, on first use: a fill walks a few states, not the program."""
        hit = self._steps.get(chunk)
        if hit is not None:
            return hit
        if self._reps is None:
            self._reps = np.sort(_class_reps(self.program, self.usable))
            self._rep_columns = self.program.classes[self._reps]
        reps, rows = self._reps, self.program.table[chunk * STEP_CHUNK : (chunk + 1) * STEP_CHUNK]
        if not len(reps):
            hit = np.zeros(len(rows), np.int64), np.full(len(rows), INF, np.int64)
        else:
            d = self._ext[rows[:, self._rep_columns]]
            best = d.argmin(axis=1)  # the first, so the lowest byte, among the closest
            hit = reps[best], d[np.arange(len(d)), best].astype(np.int64)
        self._steps[chunk] = hit
        return hit

    def _step(self, s: int):
        """The canonical step from s: ("byte", b, next state) or ("call", callee start, return)."""
        bytes_, costs = self.byte_steps(s // STEP_CHUNK)
        byte, cost = int(bytes_[s % STEP_CHUNK]), int(costs[s % STEP_CHUNK])
        p = self.program
        best = None
        for k in range(int(p.call_ptr[s]), int(p.call_ptr[s + 1])):
            start, ret = int(p.rule_start[p.call_rule[k]]), int(p.call_ret[k])
            c = int(self.byte_dist[start]) + int(self.byte_dist[ret])
            if c < cost + 1 and (best is None or c < best[0]):
                best = (c, start, ret)
        if best is not None:
            return "call", best[1], best[2]
        return "byte", byte, int(p.table[s, p.classes[byte]])

    def _fill(self, s: int) -> None:
        if self.byte_dist[s] >= INF:
            self.memo[s] = INF
            return
        # the canonical path from s up to a call or `longest` bytes past the first known state (the
        # path from a known state on is all known: each fill records a prefix of a canonical path)
        states, data = [s], bytearray()
        cur, known_at = s, None
        while True:
            if known_at is None and self.memo[cur] >= 0:
                known_at = len(states) - 1
            if known_at is not None and (self.program.final[cur] or len(states) - 1 - known_at >= self.longest):
                break
            kind, x, nxt = self._step(cur)
            if kind == "call":
                if self.memo[cur] < 0:
                    self.memo[cur] = self[x] + self[nxt]
                if known_at is None:
                    known_at = len(states) - 1
                break
            data.append(x)
            states.append(nxt)
            cur = nxt
        for i in range(known_at - 1, -1, -1):
            best = INF
            k = 1
            while i + k <= len(data):
                is_token = self.prefixes.get(bytes(data[i : i + k]))
                if is_token is None:
                    break
                if is_token:
                    best = min(best, int(self.memo[states[i + k]]))
                k += 1
            self.memo[states[i]] = best + 1
