"""Where a sequence is in the pushdown program: a *configuration*, a set of stacks (usually one).

A stack is its top state plus an interned node for the frames below (node = (return state, node
below), so equal stacks are one int and pushes share their tails). A configuration is interned too:
its mask, budget masks, forced tokens and successors are computed once, on first use, and a
revisit is a list lookup. The mask of a stack is its top state's stack-free mask (frames.py) plus
the tokens that complete the top frame early and continue in the frames below (checked here
against the real stack) plus EOS when only the finished document is left. Several stacks (anyOf
branches that call different rules on the same byte) are followed side by side and their masks
joined. The length budget of a stack is its top state's token distance plus its return states';
of a configuration, the smallest over its stacks.

Depth is unbounded up to `max_depth` frames (a safety limit: a token that would nest deeper is
masked).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from kvx.grammar.automata.pda import Program
from kvx.grammar.tokens.budget import INF
from kvx.grammar.tokens.frames import Frames
from kvx.grammar.tokens.vocab import TokenVocab

MAX_DEPTH = 128
Stack = tuple  # (top state, node)


@dataclass
class Config:
    stacks: tuple  # of Stack, sorted
    dist: int  # fewest tokens to finish the document (EOS not counted)
    accepting: bool  # only the finished document is left (EOS allowed)
    mask: torch.Tensor | None = None
    budget_masks: dict[int, torch.Tensor] = field(default_factory=dict)
    nexts: dict[int, int] = field(default_factory=dict)  # token -> next config (-1: not allowed)
    forced: list[int] | None = None
    slack: int | None = None  # a budget at least this large cuts no token: the mask is `mask`


class TokenPDA:
    """The token-level view of a program for one vocabulary; shared by all matchers of a grammar."""

    def __init__(self, program: Program, vocab: TokenVocab, byte_dist: np.ndarray | None = None,
                 max_depth: int = MAX_DEPTH):
        self.program = program
        self.vocab = vocab
        self.frames = Frames(program, vocab, byte_dist)
        self.max_depth = max_depth
        self.eos = np.array(vocab.eos_ids, dtype=np.int64)
        # node 0 is the empty stack below the document's frame
        self.node_ret, self.node_parent, self.node_depth, self.node_below = [-1], [-1], [0], [0]
        self._nodes: dict[tuple[int, int], int] = {}
        self.configs: list[Config] = []
        self._config_ids: dict[tuple, int] = {}
        self._suffix: dict[tuple[int, bytes], tuple] = {}
        self.start = self.config(((program.start, 0),))

    @property
    def byte_dist(self) -> np.ndarray:
        return self.frames.byte_dist

    # ---- stacks and configurations --------------------------------------------------------------
    def push(self, node: int, ret: int) -> int:
        key = (ret, node)
        hit = self._nodes.get(key)
        if hit is None:
            hit = self._nodes[key] = len(self.node_ret)
            self.node_ret.append(ret)
            self.node_parent.append(node)
            self.node_depth.append(self.node_depth[node] + 1)
            self.node_below.append(self.node_below[node] + self.frames.dist[ret])
        return hit

    def config(self, stacks) -> int:
        """Id of the configuration of these stacks (-1 if there are none)."""
        key = tuple(sorted(set(stacks)))
        if not key:
            return -1
        cid = self._config_ids.get(key)
        if cid is None:
            dist = min(self.frames.dist[s] + self.node_below[node] for s, node in key)
            accepting = any(node == 0 and self.program.final[s] for s, node in key)
            cid = self._config_ids[key] = len(self.configs)
            self.configs.append(Config(stacks=key, dist=int(dist), accepting=accepting))
        return cid

    def dist(self, cid: int) -> int:
        return self.configs[cid].dist

    def accepting(self, cid: int) -> bool:
        return self.configs[cid].accepting

    # ---- what a token does to a stack -------------------------------------------------------------
    def _apply(self, stack: Stack, tid: int) -> list[Stack]:
        s, node = stack
        entry = self.frames.state(s)
        pos = int(np.searchsorted(entry.ids, tid))
        if pos < len(entry.ids) and entry.ids[pos] == tid:
            return [(int(entry.nexts[pos]), node)]
        out = []
        for r in entry.special.get(tid, ()):
            if r[0] == "stay":
                out.append((r[1], node))
            elif r[0] == "push":
                if self.node_depth[node] + len(r[1]) <= self.max_depth:
                    below = node
                    for ret in r[1]:
                        below = self.push(below, ret)
                    out.append((r[2], below))
            elif r[0] == "pop":
                out.append((self.node_ret[node], self.node_parent[node]))
            else:
                out += self._after_pop(node, self.vocab.token_bytes[tid][r[1]:])
        return out

    def _after_pop(self, node: int, rest: bytes) -> tuple:
        """Stacks after the frame above `node` completed with `rest` still to read (cached)."""
        key = (node, rest)
        hit = self._suffix.get(key)
        if hit is None:
            hit = self._suffix[key] = tuple(self.walk_bytes([(self.node_ret[node], self.node_parent[node])], rest))
        return hit

    def walk_bytes(self, stacks: list[Stack], data: bytes) -> list[Stack]:
        """Stacks after `data`, byte by byte through calls and returns (the slow path)."""
        pops = self.program.pop_states
        for b in data:
            nxt = []
            for s, node in stacks:
                for ret, t in self.program.step(s, b):
                    below = node
                    if ret is not None:
                        if self.node_depth[node] >= self.max_depth:
                            continue
                        below = self.push(node, ret)
                    while pops[t] and below:
                        t, below = self.node_ret[below], self.node_parent[below]
                    nxt.append((t, below))
            stacks = list(dict.fromkeys(nxt))
            if not stacks:
                break
        return stacks

    def next(self, cid: int, tid: int) -> int:
        """The configuration after token `tid` (not EOS), or -1 if no stack allows it."""
        cfg = self.configs[cid]
        hit = cfg.nexts.get(tid)
        if hit is None:
            hit = cfg.nexts[tid] = self.config([st for stack in cfg.stacks for st in self._apply(stack, tid)])
        return hit

    # ---- masks ----------------------------------------------------------------------------------
    def _stack_extra(self, stack: Stack, limit: int | None) -> list[int]:
        """Tokens beyond the top state's stack-free mask that this stack allows (within `limit`)."""
        s, node = stack
        entry = self.frames.state(s)
        out = []
        if node:
            for tid in entry.depends:
                nxt = self.config(self._apply(stack, tid))
                if nxt >= 0 and (limit is None or self.configs[nxt].dist <= limit):
                    out.append(tid)
        return out

    def _slack(self, cfg: Config) -> int:
        """The smallest budget that cuts nothing: each stack's frame bound plus the frames below it,
        and the distance after each token that completes a frame early (INF if one cannot finish)."""
        if cfg.slack is None:
            slack = 0
            for stack in cfg.stacks:
                s, node = stack
                entry = self.frames.state(s)
                slack = max(slack, entry.top + self.node_below[node])
                for tid in entry.depends if node else ():
                    nxt = self.config(self._apply(stack, tid))
                    if nxt >= 0:
                        slack = max(slack, self.configs[nxt].dist)
            cfg.slack = slack
        return cfg.slack

    def _too_deep(self, cid: int) -> list[int]:
        """Tokens of the stack-free masks that would nest deeper than max_depth."""
        out = []
        for s, node in self.configs[cid].stacks:
            entry = self.frames.state(s)
            if self.node_depth[node] + entry.max_push > self.max_depth:
                out += [tid for tid in entry.special if self.next(cid, tid) < 0]
        return out

    def mask(self, cid: int, limit: int | None = None) -> torch.Tensor:
        """Bool [vocab]: allowed tokens (EOS when accepting); with `limit`, only tokens after which the
        document can still finish within `limit` tokens. Cached: callers must not modify it."""
        cfg = self.configs[cid]
        if limit is None and cfg.mask is not None:
            return cfg.mask
        if limit is not None:
            if limit >= self._slack(cfg):  # the budget cuts nothing here (most tokens of a record)
                return self.mask(cid)
            hit = cfg.budget_masks.get(limit)
            if hit is not None:
                return hit
        parts, extra = [], []
        for stack in cfg.stacks:
            s, node = stack
            parts.append(self.frames.state(s).mask if limit is None
                         else self.frames.budget_mask(s, limit - self.node_below[node]))
            extra += self._stack_extra(stack, limit)
        removed = self._too_deep(cid)
        if len(parts) == 1 and not extra and not removed and not cfg.accepting:
            out = parts[0]
        else:
            out = parts[0].clone()
            for p in parts[1:]:
                out |= p
            if removed:
                out[removed] = False
            if extra:
                out[extra] = True
            if cfg.accepting:
                out[self.eos] = True
        if limit is None:
            cfg.mask = out
        else:
            cfg.budget_masks[limit] = out
        return out

    # ---- jump-forward ---------------------------------------------------------------------------
    def first_bytes(self, stacks) -> np.ndarray:
        """Bool [256]: bytes the top states take, in their frame or as a callee's first byte."""
        table = self.program.table
        live = np.zeros(table.shape[1], dtype=bool)
        for s, _ in stacks:
            live |= table[s] >= 0
            for start, _ in self.program.call_starts.get(s, ()):
                live |= table[start] >= 0
        return live[self.program.classes]

    def forced_bytes(self, cid: int, cap: int = 4096) -> bytes:
        """The bytes every continuation from `cid` must write next (stops at a choice or the end)."""
        stacks = list(self.configs[cid].stacks)
        out = bytearray()
        while len(out) < cap:
            if any(node == 0 and self.program.final[s] for s, node in stacks):
                break
            only = np.flatnonzero(self.first_bytes(stacks))
            if len(only) != 1:
                break
            out.append(int(only[0]))
            stacks = self.walk_bytes(stacks, bytes(out[-1:]))
        return bytes(out)

    def forced_tokens(self, cid: int) -> list[int]:
        """Tokens spelling the forced bytes exactly, greedily longest first; cached per config."""
        cfg = self.configs[cid]
        if cfg.forced is not None:
            return cfg.forced
        data = self.forced_bytes(cid)
        longest = self.vocab.longest
        tokens: list[int] = []
        i, cur = 0, cid
        while i < len(data):
            for size in range(min(longest, len(data) - i), 0, -1):
                tid = self.vocab.id_for_bytes(data[i : i + size])
                if tid is not None:
                    break
            else:
                break  # this byte is no token on its own: stop, sampling takes over
            nxt = self.next(cur, tid)
            if nxt < 0 or self.configs[nxt].dist >= INF:
                break
            tokens.append(tid)
            i, cur = i + size, nxt
        cfg.forced = tokens
        return tokens
