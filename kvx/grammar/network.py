"""Fast regex AST -> DFA for whole documents: compose the pieces' DFAs instead of re-determinising.

`compile_dfa` used to expand every embedded DFA back into NFA states and run the subset
construction and Moore minimisation over the whole document (thousands of states, one Moore
round per character of the longest bounded string). Here every AST node is built bottom-up into
a trimmed DFA and inner nodes (Seq, Alt, Repeat, Graph) are composed as a *network*: each
labelled edge gets its own copy of its label's DFA, and an accepting state of a copy is linked
(epsilon) to the entry states of the edges leaving the copy's target node. Determinising that
network only needs real subset states where several copies are live at once (a few key prefixes
and value ends): every other state is a singleton whose row is the copy's own row, moved with
numpy. Bounded repetitions of a one-character automaton use `dfa_ops.repeat` (counter copies).

The result is exact (same language as `determinize.compile_node`) and trimmed; small results
are minimised, large ones are left as composed (components are minimal, so few equivalent states
remain; the token FSM does not need minimality).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kvx.grammar import regex_ast as ra
from kvx.grammar.determinize import DEFAULT_MAX_STATES, minimise
from kvx.grammar.dfa import DFA
from kvx.grammar.nfa import TooLarge

MINIMISE_UP_TO = 512  # states; Moore rounds on bigger results would cost more than they save


def neighbours(frontier: np.ndarray, starts: np.ndarray, counts: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """All targets[starts[f] : starts[f] + counts[f]] for f in frontier (CSR rows, vectorised)."""
    cnt = counts[frontier]
    total = int(cnt.sum())
    offsets = np.repeat(starts[frontier] - (np.cumsum(cnt) - cnt), cnt) + np.arange(total)
    return targets[offsets]


def reach(n: int, src: np.ndarray, dst: np.ndarray, seeds: np.ndarray) -> np.ndarray:
    """States reachable from `seeds` along edges src -> dst (vectorised breadth-first search)."""
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

    def expand(self) -> DFA:
        dfa = DFA(trans=np.ascontiguousarray(self.trans[:, self.cob]).astype(np.int32, copy=False),
                  accepting=self.accepting.astype(bool), start=int(self.start))
        dfa.__dict__["_compact"] = self  # so compact(dfa) and byte_distances need not rehash columns
        return dfa


def row_groups(mat: np.ndarray):
    """np.unique(mat, axis=0, return_index=True, return_inverse=True) without its slow axis path:
    rows are compared as raw bytes. Returns (first index of each group, group of each row)."""
    mat = np.ascontiguousarray(mat)
    keys = mat.view(np.dtype((np.void, mat.dtype.itemsize * mat.shape[1]))).reshape(-1)
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    return first, inverse.reshape(-1)


def column_classes(trans: np.ndarray):
    """(first byte of each class, class_of_byte) for the identical columns of `trans`."""
    first, inverse = row_groups(trans.T)
    order = np.argsort(first)  # classes numbered by their first byte
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return first[order], rank[inverse].astype(np.int64)


def compact(dfa: DFA) -> CDFA:
    """The byte-class form of a 256-column DFA (cached on the DFA object)."""
    hit = dfa.__dict__.get("_compact")
    if hit is None:
        reps, cob = column_classes(dfa.trans)
        hit = CDFA(np.ascontiguousarray(dfa.trans[:, reps]).astype(np.int32), dfa.accepting.astype(bool),
                   int(dfa.start), cob)
        dfa.__dict__["_compact"] = hit
    return hit


def _trim(trans: np.ndarray, accepting: np.ndarray, start: int, cob: np.ndarray,
          all_live: bool = False) -> CDFA | None:
    """Keep states reachable from `start` that can reach acceptance; None if the language is empty.
    `all_live`: the caller knows every state can reach acceptance (only reachability is left)."""
    n = trans.shape[0]
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


def trim_dfa(trans: np.ndarray, accepting: np.ndarray, start: int) -> DFA | None:
    """`_trim` for a 256-column table."""
    c = _trim(trans, accepting, start, np.arange(trans.shape[1]))
    return None if c is None else DFA(trans=c.trans, accepting=c.accepting, start=c.start)


_SINGLE_TRANS = np.array([[-1, 1], [-1, -1]], dtype=np.int32)
_SINGLE_ACC = np.array([False, True])


_SINGLES: dict[int, CDFA] = {}


def _single(mask: int) -> CDFA | None:
    if not mask:
        return None
    hit = _SINGLES.get(mask)
    if hit is not None:
        return hit
    if len(_SINGLES) > 4096:
        _SINGLES.clear()
    bits = np.frombuffer(mask.to_bytes(32, "little"), dtype=np.uint8)
    cob = np.unpackbits(bits, bitorder="little").astype(np.int64)
    hit = _SINGLES[mask] = CDFA(_SINGLE_TRANS, _SINGLE_ACC, 0, cob)
    return hit


def _empty() -> CDFA:
    return CDFA(np.full((1, 1), -1, dtype=np.int32), np.array([True]), 0, np.zeros(256, dtype=np.int64))


def is_prefix_char(x: CDFA) -> bool:
    """One accepting state, no way out of it, no empty word: what `repeat_char` needs."""
    acc = np.flatnonzero(x.accepting)
    return len(acc) == 1 and not x.accepting[x.start] and not (x.trans[acc[0]] >= 0).any()


def repeat_char(x: CDFA, lo: int, hi: int | None, max_states: int) -> CDFA | None:
    """x{lo,hi} for a prefix-code x with one accepting state, as counter copies (numpy)."""
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


_ANY_CHAR: list = []


def any_char() -> CDFA:
    if not _ANY_CHAR:
        from kvx.grammar.schema_to_regex import any_char_dfa

        _ANY_CHAR.append(compact(any_char_dfa()))
    return _ANY_CHAR[0]


class Composer:
    def __init__(self, max_states: int = DEFAULT_MAX_STATES):
        self.max_states = max_states
        self.memo: dict[int, tuple] = {}
        self.chains: dict[tuple, ra.Node] = {}

    def build(self, node: ra.Node) -> CDFA | None:
        hit = self.memo.get(id(node))
        if hit is not None:
            return hit[1]
        dfa = self._build(node)
        self.memo[id(node)] = (node, dfa)  # holding the node keeps its id from being reused
        return dfa

    def _build(self, node: ra.Node) -> CDFA | None:
        from kvx.grammar import strings

        if isinstance(node, ra.Bytes):
            return _single(node.mask)
        if isinstance(node, ra.Embed):
            return compact(node.dfa)
        if node is strings.ANY_CHAR:
            return any_char()
        if isinstance(node, ra.Seq):
            if not node.items:
                return _empty()
            n = len(node.items)
            return self.network(n + 1, [(i, i + 1, it) for i, it in enumerate(node.items)], (n,))
        if isinstance(node, ra.Alt):
            return self.network(2, [(0, 1, it) for it in node.items], (1,))
        if isinstance(node, ra.Repeat):
            item = self.build(node.item)
            if item is None:
                return _empty() if node.lo == 0 else None
            if is_prefix_char(item):
                return repeat_char(item, node.lo, node.hi, self.max_states)
            return self.network(2, [(0, 1, node)], (1,))
        if isinstance(node, ra.Graph):
            return self.network(node.num_states, list(node.edges), tuple(node.finals))
        raise TypeError(f"not a regex node: {node!r}")

    def _chain(self, masks: tuple) -> ra.Embed:
        """A literal-like run of byte classes as one leaf (n + 1 states), shared per spelling."""
        hit = self.chains.get(masks)
        if hit is None:
            if not all(masks):
                hit = ra.NOTHING
            else:
                bits = np.unpackbits(np.frombuffer(b"".join(m.to_bytes(32, "little") for m in masks),
                                                   dtype=np.uint8).reshape(len(masks), 32), axis=1,
                                     bitorder="little")  # [n, 256]
                reps, cob = row_groups(bits.T)
                order = np.argsort(reps)
                rank = np.empty_like(order)
                rank[order] = np.arange(len(order))
                reps, cob = reps[order], rank[cob]
                n = len(masks)
                trans = np.where(bits[:, reps].astype(bool), np.arange(1, n + 1, dtype=np.int32)[:, None], -1)
                trans = np.concatenate([trans.astype(np.int32), np.full((1, len(reps)), -1, dtype=np.int32)])
                acc = np.zeros(n + 1, dtype=bool)
                acc[n] = True
                hit = ra.Embed(None)
                self.memo[id(hit)] = (hit, CDFA(trans, acc, 0, cob.astype(np.int64)))
            self.chains[masks] = hit
        return hit

    def _is_leaf(self, node) -> bool:
        from kvx.grammar import strings

        if isinstance(node, (ra.Bytes, ra.Embed)) or node is strings.ANY_CHAR or id(node) in self.memo:
            return True
        if isinstance(node, ra.Repeat):
            item = self.build(node.item)
            return item is None or is_prefix_char(item)
        return False

    def _expand(self, num_nodes: int, edges: list) -> tuple[int, list]:
        """Inline Seq/Alt/Graph/unrolled-Repeat labels as sub-graphs, so one network (one
        determinisation, one trim) covers the whole document; leaves are DFAs."""
        out = []
        stack = list(reversed(edges))
        count = num_nodes

        def new() -> int:
            nonlocal count
            count += 1
            if count > 8 * self.max_states:
                raise TooLarge(f"more than {self.max_states} DFA states")
            return count - 1

        while stack:
            a, b, label = stack.pop()
            if label is None or self._is_leaf(label):
                out.append((a, b, label))
            elif isinstance(label, ra.Seq):
                if not label.items:
                    out.append((a, b, None))
                    continue
                items, run = [], []
                for it in label.items + (None,):  # runs of byte classes become one chain leaf
                    if isinstance(it, ra.Bytes):
                        run.append(it.mask)
                        continue
                    if run:
                        items.append(ra.Bytes(run[0]) if len(run) == 1 else self._chain(tuple(run)))
                        run = []
                    if it is not None:
                        items.append(it)
                cur = a
                for i, it in enumerate(items):
                    nxt = b if i == len(items) - 1 else new()
                    stack.append((cur, nxt, it))
                    cur = nxt
            elif isinstance(label, ra.Alt):
                stack.extend((a, b, it) for it in label.items)
            elif isinstance(label, ra.Graph):
                ids = [new() for _ in range(label.num_states)]
                out.append((a, ids[0], None))
                out.extend((ids[f], b, None) for f in label.finals)
                stack.extend((ids[x], ids[y], lab) for x, y, lab in label.edges)
            elif isinstance(label, ra.Repeat):
                lo, hi, item = label.lo, label.hi, label.item
                cur = a
                for _ in range(lo):
                    nxt = new()
                    stack.append((cur, nxt, item))
                    cur = nxt
                if hi is None:
                    out.append((cur, cur, item) if self._is_leaf(item) else None)
                    if out[-1] is None:
                        out.pop()
                        loop = new()
                        stack.append((cur, loop, item))
                        out.append((loop, cur, None))
                    out.append((cur, b, None))
                else:
                    out.append((cur, b, None))
                    for _ in range(hi - lo):
                        nxt = new()
                        stack.append((cur, nxt, item))
                        out.append((nxt, b, None))
                        cur = nxt
            else:
                raise TypeError(f"not a regex node: {label!r}")
        return count, out

    def network(self, num_nodes: int, edges: list, finals: tuple) -> DFA | None:
        """Determinise a graph whose edges carry sub-ASTs (None = epsilon), start node 0."""
        num_nodes, edges = self._expand(num_nodes, edges)
        eps = [[] for _ in range(num_nodes)]
        copies = []  # (src node, dst node, dfa)
        for a, b, label in edges:
            if label is None:
                eps[a].append(b)
                continue
            d = self.build(label)
            if d is not None:
                copies.append((a, b, d))
        final_set = set(finals)
        offsets, total = [], 0
        for _, _, d in copies:
            offsets.append(total)
            total += d.num_states
        if total > 8 * self.max_states:
            raise TooLarge(f"more than {self.max_states} DFA states")
        out_edges = [[] for _ in range(num_nodes)]
        for k, (a, _, _) in enumerate(copies):
            out_edges[a].append(k)
        starts = [offsets[k] + d.start for k, (_, _, d) in enumerate(copies)]
        eps_copy = [bool(d.accepting[d.start]) for _, _, d in copies]

        # X(v): nodes reachable by epsilon edges or by copies that accept the empty word;
        # E(v): the copies leaving X(v), as a bitset; F(v): whether X(v) holds a final node.
        succ = [list(eps[u]) for u in range(num_nodes)]
        out_bits = [0] * num_nodes
        for k, (a, b, _) in enumerate(copies):
            out_bits[a] |= 1 << k
            if eps_copy[k]:
                succ[a].append(b)
        ebits = list(out_bits)
        fbits = [u in final_set for u in range(num_nodes)]
        with_succ = [u for u in range(num_nodes - 1, -1, -1) if succ[u]]
        changed = True
        while changed:  # fixpoint; reverse order converges in one or two passes on chains
            changed = False
            for u in with_succ:
                e, f = ebits[u], fbits[u]
                for w in succ[u]:
                    e |= ebits[w]
                    f = f or fbits[w]
                if e != ebits[u] or f != fbits[u]:
                    ebits[u], fbits[u] = e, f
                    changed = True
        closure_memo: dict[int, tuple] = {}

        def node_closure(v: int) -> tuple:
            hit = closure_memo.get(v)
            if hit is None:
                bits, entry = ebits[v], []
                while bits:
                    low = bits & -bits
                    entry.append(starts[low.bit_length() - 1])
                    bits ^= low
                hit = closure_memo[v] = (frozenset(entry), fbits[v])
            return hit

        if total == 0:
            return _empty() if node_closure(0)[1] else None
        # one byte-class partition refining every copy's classes
        cobs: dict[int, np.ndarray] = {}
        for _, _, d in copies:
            cobs.setdefault(id(d.cob), d.cob)
        distinct = {c.tobytes(): c for c in cobs.values()}
        reps, joint = row_groups(np.stack(list(distinct.values()), axis=1))  # [256, U]: bytes alike
        order = np.argsort(reps)
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        reps, joint = reps[order], rank[joint]
        gathered: dict[int, np.ndarray] = {}
        parts, sizes, accs = [], [], []
        for _, b, d in copies:
            g = gathered.get(id(d))
            if g is None:
                g = gathered[id(d)] = d.trans[:, d.cob[reps]]
            parts.append(g)
            sizes.append(d.num_states)
            accs.append(d.accepting)
        sizes_a = np.array(sizes, dtype=np.int64)
        trans = np.concatenate(parts)
        trans = np.where(trans >= 0, trans + np.repeat(np.array(offsets, dtype=np.int32), sizes_a)[:, None],
                         -1).astype(np.int32)
        copy_acc = np.concatenate(accs)
        target_node = np.repeat(np.array([b for _, b, _ in copies], dtype=np.int64), sizes_a)
        fin = np.zeros(total, dtype=bool)
        # non-plain states: accepting in their copy, with something to continue into
        closure_of: dict[int, frozenset] = {}
        for q in np.flatnonzero(copy_acc).tolist():
            entry, is_final = node_closure(int(target_node[q]))
            fin[q] = is_final
            if entry:
                closure_of[q] = entry | {q}
        ids: dict[tuple, int] = {}
        for q, members in closure_of.items():
            ids[(members, bool(fin[q]))] = q
        extra_rows: list[np.ndarray] = []
        extra_acc: list[bool] = []
        todo: list[tuple[int, frozenset]] = list(closure_of.items())

        def id_of(members: frozenset, acc: bool) -> int:
            if len(members) == 1:
                (q,) = members
                if q not in closure_of and bool(fin[q]) == acc:
                    return q
            key = (members, acc)
            j = ids.get(key)
            if j is None:
                j = ids[key] = total + len(extra_rows)
                extra_rows.append(None)
                extra_acc.append(acc)
                todo.append((j, members))
                if total + len(extra_rows) > 8 * self.max_states:
                    raise TooLarge(f"more than {self.max_states} DFA states")
            return j

        entry0, final0 = node_closure(0)
        if not entry0:
            return _empty() if final0 else None
        start = id_of(entry0, final0 or bool(fin[list(entry0)].any()))
        rows_for: dict[int, np.ndarray] = {}
        while todo:
            j, members = todo.pop()
            sub = trans[sorted(members)]
            if sub.shape[0] == 1:
                row = sub[0].copy()
            else:
                hi = sub.max(axis=0)
                lo = np.where(sub >= 0, sub, np.iinfo(np.int32).max).min(axis=0)
                row = np.where(hi >= 0, hi, -1).astype(np.int32)
                multi = np.flatnonzero((hi >= 0) & (lo != hi))
                if len(multi):
                    firsts, inverse = row_groups(sub[:, multi].T)
                    for g, col in enumerate(sub[:, multi[firsts]].T.tolist()):
                        targets = {t for t in col if t >= 0}
                        union: set = set()
                        for t in targets:
                            union |= closure_of.get(t, {t})
                        new = id_of(frozenset(union), bool(fin[list(targets)].any()))
                        row[multi[inverse == g]] = new
            if j < total:
                rows_for[j] = row
            else:
                extra_rows[j - total] = row
        if rows_for:
            keys = np.fromiter(rows_for.keys(), dtype=np.int64, count=len(rows_for))
            trans[keys] = np.stack(list(rows_for.values()))
        accepting = fin.copy()
        if extra_rows:
            trans = np.concatenate([trans, np.stack(extra_rows)])
            accepting = np.concatenate([accepting, np.array(extra_acc, dtype=bool)])
        # every copy is trimmed, so a state is dead only if its copy leads to a dead node
        preds = [[] for _ in range(num_nodes)]
        for u in range(num_nodes):
            for w in eps[u]:
                preds[w].append(u)
        for a, b, _ in copies:
            preds[b].append(a)
        live_node = [False] * num_nodes
        stack = list(final_set)
        for u in stack:
            live_node[u] = True
        while stack:
            for u in preds[stack.pop()]:
                if not live_node[u]:
                    live_node[u] = True
                    stack.append(u)
        all_live = all(live_node[b] for _, b, _ in copies)
        dfa = _trim(trans, accepting, start, joint, all_live)
        if dfa is None:
            return None
        if dfa.num_states > self.max_states:
            raise TooLarge(f"more than {self.max_states} DFA states")
        if dfa.num_states <= MINIMISE_UP_TO:
            t, a, s = minimise(dfa.trans, dfa.accepting, dfa.start)
            dfa = CDFA(t, a, s, dfa.cob)
        return dfa


def fast_compile(node: ra.Node, max_states: int = DEFAULT_MAX_STATES) -> DFA | None:
    """Regex AST -> trimmed DFA (None when the language is empty); raises TooLarge past the cap."""
    c = Composer(max_states).build(node)
    return None if c is None else c.expand()
