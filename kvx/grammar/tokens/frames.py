"""Per state of the pushdown program: what every token does from it, as far as the top frame alone
decides. Computed on the state's first visit and cached (the part of a mask that does not depend on
the rest of the stack, as xgrammar's adaptive token mask cache does).

A token from state s either
- stays in the frame (one next state: most tokens; kept as sorted numpy arrays),
- pushes frames (`{"` at a value opens an object: its return states and the callee's state),
- pops the frame exactly at its last byte (`}` at the end of an object), or
- completes the frame before its end (`"},` in a string closing its object): what follows belongs to
  the caller, so whether it is allowed depends on the stack: checked per stack (stacks.py).
Tokens that reach a call byte or a frame's end take the slow path (`follow`), which also follows
every alternative where several edges fit one byte.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from kvx.grammar.automata import deadline, graph_kernels
from kvx.grammar.automata.pda import Program
from kvx.grammar.tokens.budget import INF, TokenDistances, byte_distances
from kvx.grammar.tokens.token_walk import Boundary, token_matrix, walk_all_tokens
from kvx.grammar.tokens.vocab import TokenVocab

# results of a token from a state: ("stay", state) | ("push", return states bottom first, state) |
# ("pop",) | ("dep", bytes consumed when the frame completed)
Result = tuple


@dataclass
class StateTokens:
    """The cached answer for one state."""

    ids: np.ndarray  # sorted ids of tokens that stay in the frame, one way
    nexts: np.ndarray  # next state per id
    rel_dist: np.ndarray  # per id: tokens still needed by this frame after it
    special: dict[int, tuple]  # token -> its results, for every other allowed or stack-dependent token
    special_dist: dict[int, int]  # token -> fewest tokens after it over its stack-free results (INF: none)
    mask: torch.Tensor  # bool [vocab]: tokens allowed whatever the stack below (no EOS); do not modify
    depends: list[int] = field(default_factory=list)  # tokens that end the frame early (checked per stack)
    max_push: int = 0  # most frames one token pushes
    top: int = 0  # the most tokens this frame may still need after any allowed token (budget_mask's bound)
    budget_masks: dict[int, torch.Tensor] = field(default_factory=dict)


def boundary_of(program: Program) -> Boundary:
    """(state, byte) pairs that leave a frame: a callee's first bytes, anything after a final state.
    With numba in one compiled call (graph_kernels._boundary: the same rows)."""
    compiled = graph_kernels.kernels()
    if compiled is not None:
        return Boundary(*compiled.boundary(program.table, program.classes, program.rule_start, program.call_ptr,
                                           program.call_rule, program.pop_states))
    has_calls = np.diff(program.call_ptr) > 0
    pops = program.pop_states
    states = np.flatnonzero(has_calls | pops)
    row = np.full(program.num_states, -1, dtype=np.int64)
    row[states] = np.arange(len(states))
    table = np.zeros((len(states), 256), dtype=bool)
    with_calls = np.flatnonzero(has_calls)
    if len(with_calls):  # a calling state's row: the first bytes of all its callees
        deadline.check()
        firsts = program.table[program.rule_start[program.call_rule]] >= 0  # [M, classes]
        # one segment per state with calls: the states between have none, so each ends where the next begins
        table[row[with_calls]] = np.logical_or.reduceat(firsts, program.call_ptr[with_calls], axis=0)[:, program.classes]
    table[row[pops]] = True
    return Boundary(row, table)


class Frames:
    """Lazy token tables of a program's states for one vocabulary; shared by all matchers."""

    def __init__(self, program: Program, vocab: TokenVocab, byte_dist: np.ndarray | None = None):
        self.program = program
        self.vocab = vocab
        self.matrix = token_matrix(vocab)
        self.edge = boundary_of(program)
        self._states: dict[int, StateTokens] = {}
        if byte_dist is None:
            byte_dist = byte_distances(program, vocab.single_byte_tokens())
        self.byte_dist = byte_dist
        self.dist = TokenDistances(program, vocab, byte_dist)
        if (byte_dist >= INF).any():  # some state cannot finish with one-byte tokens
            self.dist.set_exact(self._exact_distances(byte_dist))

    def state(self, s: int) -> StateTokens:
        hit = self._states.get(s)
        if hit is None:
            hit = self._visit(s)
        return hit

    # ---- one state's table ----------------------------------------------------------------------
    def _walk(self, s: int):
        walk = walk_all_tokens(self.program.table, self.program.classes, self.edge, self.matrix, s)
        special: dict[int, tuple] = {}
        ends_frame = self.program.pop_states[walk.nexts]
        for tid in walk.ids[ends_frame].tolist():
            special[tid] = (("pop",),)
        ids, nexts = walk.ids[~ends_frame], walk.nexts[~ends_frame]
        token_bytes = self.vocab.token_bytes
        for tid, pos, at in zip(walk.stop_ids.tolist(), walk.stop_pos.tolist(), walk.stop_state.tolist()):
            results = self.follow(at, token_bytes[tid], pos)
            if results:
                special[tid] = tuple(results)
        return ids, nexts, special

    def _visit(self, s: int) -> StateTokens:
        ids, nexts, special = self._walk(s)
        rel = self.dist.many(nexts) if len(nexts) else np.zeros(0, np.int32)
        reachable = rel < INF  # only false for vocabs that cannot spell every byte
        if not reachable.all():
            ids, nexts, rel = ids[reachable], nexts[reachable], rel[reachable]
        special_dist = {tid: self._result_dist(res) for tid, res in special.items()}
        depends = [tid for tid, res in special.items() if any(r[0] == "dep" for r in res)]
        free = [tid for tid, d in special_dist.items() if d < INF]
        mask_np = np.zeros(self.vocab.vocab_size, dtype=bool)
        mask_np[ids] = True
        mask_np[free] = True
        max_push = max((len(r[1]) for res in special.values() for r in res if r[0] == "push"), default=0)
        top = max(int(rel.max()) if len(rel) else 0, max((d for d in special_dist.values() if d < INF), default=0))
        entry = StateTokens(ids=ids, nexts=nexts, rel_dist=rel, special=special, special_dist=special_dist,
                            mask=torch.from_numpy(mask_np), depends=depends, max_push=max_push, top=top)
        self._states[s] = entry
        return entry

    def _result_dist(self, results) -> int:
        best = int(INF)
        for r in results:
            if r[0] == "stay":
                best = min(best, self.dist[r[1]])
            elif r[0] == "push":
                best = min(best, self.dist[r[2]] + sum(self.dist[x] for x in r[1]))
            elif r[0] == "pop":
                best = 0
        return best

    def budget_mask(self, s: int, max_next_dist: int) -> torch.Tensor:
        """Stack-free tokens whose frame can still finish within `max_next_dist` more tokens."""
        entry = self.state(s)
        if max_next_dist >= entry.top:
            return entry.mask
        cached = entry.budget_masks.get(max_next_dist)
        if cached is None:
            mask_np = np.zeros(self.vocab.vocab_size, dtype=bool)
            mask_np[entry.ids[entry.rel_dist <= max_next_dist]] = True
            mask_np[[t for t, d in entry.special_dist.items() if d <= max_next_dist]] = True
            cached = entry.budget_masks[max_next_dist] = torch.from_numpy(mask_np)
        return cached

    # ---- the slow path --------------------------------------------------------------------------
    def follow(self, s: int, data: bytes, i: int) -> list[Result]:
        """Results of the rest of a token, data[i:], from state s of the frame it started in."""
        out: list[Result] = []
        todo = [(s, i, ())]
        while todo:
            s, i, stack = todo.pop()
            if self.program.pop_states[s]:  # the frame the token started in is complete: the rest is the caller's
                out.append(("pop",) if i == len(data) else ("dep", i))
                continue
            if i == len(data):
                out.append(("push", stack, s) if stack else ("stay", s))
                continue
            for ret, t in self.program.step(s, data[i]):
                st = stack if ret is None else stack + (ret,)
                while self.program.pop_states[t] and st:  # a frame the token opened is complete
                    t, st = st[-1], st[:-1]
                todo.append((t, i + 1, st))
        return list(dict.fromkeys(out))

    # ---- exact distances (vocabularies that cannot spell every byte alone) ----------------------
    def _exact_distances(self, upper: np.ndarray) -> np.ndarray:
        """Token-level Bellman-Ford over every state's stack-free results."""
        tables = [self._walk(s) for s in range(self.program.num_states)]
        dist = np.where(self.program.final, 0, upper).astype(np.int64)
        changed = True
        while changed:
            changed = False
            for s, (_, nexts, special) in enumerate(tables):
                best = int(dist[nexts].min()) + 1 if len(nexts) else int(INF)
                for results in special.values():
                    for r in results:
                        if r[0] == "stay":
                            best = min(best, int(dist[r[1]]) + 1)
                        elif r[0] == "push":
                            best = min(best, int(dist[r[2]] + dist[list(r[1])].sum()) + 1)
                        elif r[0] == "pop":
                            best = 1
                if best < dist[s]:
                    dist[s] = best
                    changed = True
        return np.minimum(dist, INF).astype(np.int32)
