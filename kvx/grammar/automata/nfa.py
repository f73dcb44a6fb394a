"""Thompson construction: regex AST -> epsilon-NFA over bytes.

Invariant that makes sharing of endpoints safe: a fragment built between (src, dst) only adds
edges leaving src, entering dst, or between fresh states it created itself.
"""
from __future__ import annotations

from kvx.grammar.automata import regex_ast as ra
from kvx.grammar.automata.cdfa import compact
from kvx.grammar.errors import TooLarge


class NFA:
    def __init__(self, max_states: int = 400_000):
        self.eps: list[list[int]] = []
        self.edges: list[list[tuple[int, int]]] = []  # (byte mask, target)
        self.max_states = max_states
        self.start = self.new()
        self.accept = self.new()

    def new(self) -> int:
        if len(self.eps) >= self.max_states:
            raise TooLarge(f"more than {self.max_states} NFA states")
        self.eps.append([])
        self.edges.append([])
        return len(self.eps) - 1

    def build(self, node: ra.Node, src: int, dst: int) -> None:
        if isinstance(node, ra.Bytes):
            if node.mask:
                self.edges[src].append((node.mask, dst))
        elif isinstance(node, ra.Text):
            cur = src
            for i, b in enumerate(node.data):
                nxt = dst if i == len(node.data) - 1 else self.new()
                self.edges[cur].append((1 << b, nxt))
                cur = nxt
        elif isinstance(node, ra.Seq):
            if not node.items:
                self.eps[src].append(dst)
                return
            cur = src
            for i, item in enumerate(node.items):
                nxt = dst if i == len(node.items) - 1 else self.new()
                self.build(item, cur, nxt)
                cur = nxt
        elif isinstance(node, ra.Alt):
            for item in node.items:
                self.build(item, src, dst)
        elif isinstance(node, ra.Repeat):
            self._repeat(node, src, dst)
        elif isinstance(node, ra.Embed):
            self._embed(node.dfa, src, dst)
        elif isinstance(node, ra.Graph):
            states = [self.new() for _ in range(node.num_states)]
            self.eps[src].append(states[0])
            for f in node.finals:
                self.eps[states[f]].append(dst)
            for a, b, label in node.edges:
                if label is None:
                    self.eps[states[a]].append(states[b])
                else:
                    self.build(label, states[a], states[b])
        else:
            raise TypeError(f"not a regex node: {node!r}")

    def _repeat(self, node: ra.Repeat, src: int, dst: int) -> None:
        cur = src
        for _ in range(node.lo):  # mandatory copies
            nxt = self.new()
            self.build(node.item, cur, nxt)
            cur = nxt
        if node.hi is None:
            loop = self.new()
            self.eps[cur].append(loop)
            self.eps[loop].append(dst)
            back = self.new()
            self.build(node.item, loop, back)
            self.eps[back].append(loop)
            return
        # optional copies, each may exit: x(x(x)?)? keeps epsilon closures small
        self.eps[cur].append(dst)
        for _ in range(node.hi - node.lo):
            nxt = self.new()
            self.build(node.item, cur, nxt)
            self.eps[nxt].append(dst)
            cur = nxt

    def _embed(self, dfa, src: int, dst: int) -> None:
        # one edge per (state, byte class of the embedded automaton)
        c = compact(dfa)
        masks = [0] * c.trans.shape[1]
        for b, k in enumerate(c.cob.tolist()):
            masks[k] |= 1 << b
        table = c.trans.tolist()
        ids = [self.new() for _ in range(c.num_states)]
        self.eps[src].append(ids[c.start])
        for s, row in enumerate(table):
            if c.accepting[s]:
                self.eps[ids[s]].append(dst)
            groups: dict[int, int] = {}
            for k, t in enumerate(row):
                if t >= 0:
                    groups[t] = groups.get(t, 0) | masks[k]
            self.edges[ids[s]].extend((m, ids[t]) for t, m in groups.items())


def build_nfa(node: ra.Node, max_states: int = 400_000) -> NFA:
    nfa = NFA(max_states)
    nfa.build(node, nfa.start, nfa.accept)
    return nfa
