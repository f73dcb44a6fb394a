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
Subset states are worked out by a compiled loop (subset_kernel.subsets) or, without numba, a batch
at a time (`_subset_rows`: one numpy pass over the rows of all their members; Python only for the
cells where members disagree, once per distinct target set).

The result is exact (same language as `determinize.compile_node`) and trimmed; small results
are minimised, large ones are left as composed (components are minimal, so few equivalent states
remain; the token FSM does not need minimality).
"""
from __future__ import annotations

from itertools import accumulate
from typing import Callable

import numpy as np

from kvx.grammar.automata import deadline, graph_kernels
from kvx.grammar.automata import regex_ast as ra
from kvx.grammar.automata.cdfa import (CDFA, column_classes, compact, empty_word, flat_tables, is_prefix_char, repeat_char,
                                       row_groups, single_class, trim)
from kvx.grammar.automata.determinize import DEFAULT_MAX_STATES, minimise
from kvx.grammar.automata.dfa import DFA
from kvx.grammar.automata.process_cache import ProcessCache
from kvx.grammar.automata.subset_kernel import LOOK_EVERY
from kvx.grammar.errors import TooLarge

MINIMISE_UP_TO = 64  # states; Moore rounds on bigger results would cost more than they save
PACKED_FROM = 256  # cells with several targets in a batch before deduplicating them with numpy pays
PACKED_TARGETS = 4  # target sets up to this size are deduplicated with numpy
SUBSET_BATCH = 4096  # member rows of the subset states worked out together (numpy per batch, not per state)
SHIFT_BLOCK = 1 << 21  # cells of the copies' table renumbered per deadline look
# a network up to these sizes works out its closures in its compiled call (network_from_edges: a
# node's closure is a walk of its own, at most copies x nodes steps, with no look at the deadline);
# bigger ones take the Python closures over bitsets, which look between nodes
SMALL_COPIES = 1024
SMALL_NODES = 4096


class Composer:
    def __init__(self, max_states: int = DEFAULT_MAX_STATES):
        self.max_states = max_states
        self.memo: dict[int, tuple] = {}
        self.chains: dict[tuple, ra.Node] = {}
        self.shapes: dict[int, tuple] = {}  # id(node) -> (node, its shape)
        self.shape_ids: dict[tuple, int] = {}
        self.by_shape: dict[int, CDFA | None] = {}

    def build(self, node: ra.Node) -> CDFA | None:
        hit = self.memo.get(id(node))
        if hit is not None:
            return hit[1]
        dfa = self._build(node)
        self.memo[id(node)] = (node, dfa)  # holding the node keeps its id from being reused
        return dfa

    def build_shared(self, node: ra.Node) -> CDFA | None:
        """build(), and the same automaton (the same object) for a node of a shape built before: rule
        bodies written apart from equal pieces (a big schema's many alike definitions) compose once,
        and `link` merges the rules whose bodies are one object."""
        shape = self.shape(node)
        if shape not in self.by_shape:
            self.by_shape[shape] = self.build(node)
        return self.by_shape[shape]

    def shape(self, node: ra.Node) -> int:
        """A number per structure: equal numbers, equal languages. Byte classes compare by mask,
        embedded automata by object, the rest by their parts."""
        hit = self.shapes.get(id(node))
        if hit is not None:
            return hit[1]
        # a part is its byte mask (>= 0) or -1 - its shape: most parts are single bytes of literals,
        # read inline (a lambda call per byte was most of this function's time)
        # (a literal's part is its bytes: never equal to an int)
        part = lambda k: k.mask if k.__class__ is ra.Bytes else k.data if k.__class__ is ra.Text else -1 - self.shape(k)
        kind = node.__class__
        if kind is ra.Seq or kind is ra.Alt:
            key = (4 if kind is ra.Seq else 5, *[k.mask if k.__class__ is ra.Bytes else k.data if k.__class__ is ra.Text
                                                 else -1 - self.shape(k) for k in node.items])
        elif kind is ra.Bytes:
            key = (0, node.mask)
        elif kind is ra.Text:
            key = (6, node.data)
        elif kind is ra.Embed:
            key = (1, id(node) if node.dfa is None else id(node.dfa))  # the node (or DFA) is held below
        elif kind is ra.Repeat:
            key = (2, part(node.item), node.lo, node.hi)
        else:
            key = (3, node.num_states, node.finals,
                   *[(a, b, None if lab is None else part(lab)) for a, b, lab in node.edges])
        shape = self.shape_ids.setdefault(key, len(self.shape_ids))
        self.shapes[id(node)] = (node, shape)
        return shape

    def _build(self, node: ra.Node) -> CDFA | None:
        if isinstance(node, ra.Bytes):
            return single_class(node.mask)
        if isinstance(node, ra.Text):
            return _text_dfa(node.data)
        if isinstance(node, ra.Embed):
            return compact(node.dfa)
        if isinstance(node, ra.Seq):
            if not node.items:
                return empty_word()
            n = len(node.items)
            return self.network(n + 1, [(i, i + 1, it) for i, it in enumerate(node.items)], (n,))
        if isinstance(node, ra.Alt):
            return self.network(2, [(0, 1, it) for it in node.items], (1,))
        if isinstance(node, ra.Repeat):
            item = self.build(node.item)
            if item is None:
                return empty_word() if node.lo == 0 else None
            key = (id(item), node.lo, node.hi, self.max_states)
            hit = _REPEATS.get(key)
            if hit is not None:
                return hit[1]
            if is_prefix_char(item):
                counted = repeat_char(item, node.lo, node.hi, self.max_states)
                return _REPEATS.keep(key, (item, counted), counted.trans.size)[1]
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
                hit = ra.Embed(None)
                self.memo[id(hit)] = (hit, _chain_dfa(masks))
            self.chains[masks] = hit
        return hit

    def _is_leaf(self, node) -> bool:
        if isinstance(node, (ra.Bytes, ra.Text, ra.Embed)) or id(node) in self.memo:
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

        def new(n: int = 1) -> int:  # the first of n new nodes
            nonlocal count
            first = count
            count += n
            if count // 1024 != first // 1024:
                deadline.check()
            if count > 8 * self.max_states:
                raise TooLarge(f"more than {self.max_states} DFA states")
            return first

        memo = self.memo
        while stack:
            if len(out) % 4096 == 0:
                deadline.check()
            a, b, label = stack.pop()
            kind = label.__class__  # leaves first, by class: most labels are literals and built values
            if label is None or kind is ra.Text or kind is ra.Bytes or kind is ra.Embed or id(label) in memo \
                    or (kind is ra.Repeat and self._is_leaf(label)):
                out.append((a, b, label))
            elif kind is ra.Seq:
                if not label.items:
                    out.append((a, b, None))
                    continue
                items, run = [], []
                for it in label.items + (None,):  # runs of byte classes and literals become one chain leaf
                    kind = it.__class__
                    if kind is ra.Bytes or kind is ra.Text:
                        run.append(it)
                        continue
                    if run:
                        items.append(run[0] if len(run) == 1 else self._chain(_masks(run)))
                        run = []
                    if it is not None:
                        items.append(it)
                cur = a
                for i, it in enumerate(items):
                    nxt = b if i == len(items) - 1 else new()
                    stack.append((cur, nxt, it))
                    cur = nxt
            elif kind is ra.Alt:
                stack.extend((a, b, it) for it in label.items)
            elif kind is ra.Graph:
                first = new(label.num_states)  # the graph's node x is first + x
                out.append((a, first, None))
                out.extend((first + f, b, None) for f in label.finals)
                stack.extend((first + x, first + y, lab) for x, y, lab in label.edges)
            elif kind is ra.Repeat:
                lo, hi, item = label.lo, label.hi, label.item
                cur = a
                if lo == 0 and hi is None:  # the loop gets a node of its own: `a` may start other edges
                    cur = new()             # (an Alt's branches), which the loop must not lead back to
                    out.append((a, cur, None))
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

    @staticmethod
    def _closures(trans, copy_acc, target_node, node_closure):
        """The closure states (accepting in their copy, continuing into the copies leaving its
        target node), all at once. Returns (is_closure [T], fin [T], closure(q) -> members,
        merged: (states, rows) of the closure states whose own bytes and their continuation's never
        meet (a string's body and its closing quote: the union row), clashing: the others, which
        become subset states)."""
        total = len(copy_acc)
        acc_states, nodes, which, entries, node_fin = _target_nodes(copy_acc, target_node, node_closure)
        k = trans.shape[1]
        node_row = np.full((len(nodes), k), -1, dtype=np.int32)
        node_live = np.zeros((len(nodes), k), dtype=np.int64)
        lens = np.fromiter(map(len, entries), dtype=np.int64, count=len(entries))
        filled = np.flatnonzero(lens)
        # per node: how many entry copies move on each class, and where to if one does (in chunks
        # of about SUBSET_BATCH entry rows, so the deadline is looked at between them)
        ends = np.cumsum(lens[filled])
        chunk_of = ends // SUBSET_BATCH
        for c in np.unique(chunk_of).tolist():
            deadline.check()
            part = filled[chunk_of == c]
            rows = trans[np.concatenate([entries[i] for i in part.tolist()])]
            firsts = np.concatenate([[0], np.cumsum(lens[part])[:-1]])
            node_live[part] = np.add.reduceat((rows >= 0).astype(np.int64), firsts, axis=0)
            node_row[part] = np.where(node_live[part] == 1, np.maximum.reduceat(rows, firsts, axis=0), -1)
        fin = np.zeros(total, dtype=bool)
        fin[acc_states] = node_fin[which]
        has_entry = lens > 0
        is_closure = np.zeros(total, dtype=bool)
        closing = acc_states[has_entry[which]]
        is_closure[closing] = True
        w = which[has_entry[which]]
        rows = trans[closing]
        clash = ((rows >= 0) & (node_live[w] > 0)).any(axis=1) | (node_live[w] > 1).any(axis=1)
        merged = (closing[~clash], np.where(rows[~clash] >= 0, rows[~clash], node_row[w[~clash]]).astype(np.int32))
        entry_of = {int(u): frozenset(e.tolist()) for u, e in zip(nodes, entries)}

        def closure(q: int) -> frozenset:
            return entry_of[int(target_node[q])] | {q} if is_closure[q] else frozenset((q,))

        return is_closure, fin, closure, merged, closing[clash].tolist()

    @staticmethod
    def _subset_rows(trans: np.ndarray, members: list[list[int]],
                     successor: Callable[[tuple[int, ...]], int]) -> np.ndarray:
        """The rows of a batch of subset states (each a sorted list of member states): where all
        members that move agree, their target; where they differ, successor(the sorted distinct
        targets), which may create new subset states."""
        deadline.check()
        counts = np.fromiter(map(len, members), dtype=np.int64, count=len(members))
        firsts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        sub = trans[np.fromiter((q for m in members for q in m), dtype=np.int64, count=int(counts.sum()))]
        rows = np.maximum.reduceat(sub, firsts, axis=0)  # -1 where no member moves
        lo = np.minimum.reduceat(np.where(sub >= 0, sub, np.iinfo(np.int32).max), firsts, axis=0)
        multi = (rows >= 0) & (lo != rows)
        if not multi.any():
            return rows
        owner = np.repeat(np.arange(len(members)), counts)
        m_idx, k_idx = np.nonzero(multi[owner] & (sub >= 0))
        b_idx, t = owner[m_idx], sub[m_idx, k_idx]
        order = np.lexsort((t, k_idx, b_idx))
        b_idx, k_idx, t = b_idx[order], k_idx[order], t[order]
        fresh = np.ones(len(t), dtype=bool)
        fresh[1:] = (b_idx[1:] != b_idx[:-1]) | (k_idx[1:] != k_idx[:-1])
        distinct = fresh.copy()
        distinct[1:] |= t[1:] != t[:-1]  # two members moving to one target count once
        b_idx, k_idx, t, fresh = b_idx[distinct], k_idx[distinct], t[distinct], fresh[distinct]
        heads = np.flatnonzero(fresh)
        t_list = t.tolist()
        bounds = heads.tolist() + [len(t_list)]
        if len(heads) <= PACKED_FROM:
            new = [successor(tuple(t_list[bounds[g]:bounds[g + 1]])) for g in range(len(heads))]
        else:  # many cells: most target sets are small and repeat, look each distinct one up once
            sizes = np.diff(bounds)
            group = np.repeat(np.arange(len(heads)), sizes)
            small = sizes <= PACKED_TARGETS
            packed = np.full((len(heads), PACKED_TARGETS), -1, dtype=np.int32)
            on = small[group]
            packed[group[on], (np.arange(len(t_list)) - heads[group])[on]] = t[on]
            firsts, inverse = row_groups(packed[small])
            new = np.empty(len(heads), dtype=np.int64)
            found = []
            for targets in packed[small][firsts].tolist():
                if len(found) % 1024 == 1023:
                    deadline.check()
                found.append(successor(tuple(x for x in targets if x >= 0)))
            new[small] = np.array(found, dtype=np.int64)[inverse]
            for g in np.flatnonzero(~small).tolist():
                deadline.check()
                new[g] = successor(tuple(t_list[bounds[g]:bounds[g + 1]]))
        rows[b_idx[heads], k_idx[heads]] = new
        return rows

    def _subsets_numpy(self, trans, copy_acc, target_node, node_closure, entry0: frozenset, final0: bool):
        """The subset construction over the copies' states, a batch of subset states per numpy pass
        (_subset_rows). Returns (trans, accepting, start) with the subset states after the copies'."""
        total = len(copy_acc)
        # non-plain states: accepting in their copy, with something to continue into
        is_closure, fin, closure, merged, clashing = self._closures(trans, copy_acc, target_node, node_closure)
        ids: dict[tuple, int] = {}
        extra_rows: list[np.ndarray] = []
        extra_acc: list[bool] = []
        todo: list[tuple[int, frozenset]] = [(q, closure(q)) for q in clashing]

        def id_of(members: frozenset, acc: bool) -> int:
            if len(members) == 1:
                (q,) = members
                if not is_closure[q] and bool(fin[q]) == acc:
                    return q
            key = (members, acc)
            j = ids.get(key)
            if j is None:
                for q in members:  # the members of a closure state: that state itself
                    if is_closure[q] and bool(fin[q]) == acc and closure(q) == members:
                        ids[key] = q
                        return q
                j = ids[key] = total + len(extra_rows)
                extra_rows.append(None)
                extra_acc.append(acc)
                todo.append((j, members))
                if total + len(extra_rows) > 8 * self.max_states:
                    raise TooLarge(f"more than {self.max_states} DFA states")
            return j

        start = id_of(entry0, final0 or bool(fin[list(entry0)].any()))
        rows_for: dict[int, np.ndarray] = {}
        fin_list = fin.tolist()
        by_targets: dict[tuple, int] = {}  # the subset state a set of targets leads to

        def successor(targets: tuple) -> int:
            hit = by_targets.get(targets)
            if hit is None:
                union: set = set()
                for t in targets:
                    union |= closure(t)
                hit = by_targets[targets] = id_of(frozenset(union), any(fin_list[t] for t in targets))
            return hit

        while todo:
            size, rows_in = 0, 0
            while size < len(todo) and rows_in < SUBSET_BATCH:
                rows_in += len(todo[size][1])
                size += 1
            batch = todo[:size]
            del todo[:size]
            for (j, _), row in zip(batch, self._subset_rows(trans, [sorted(m) for _, m in batch], successor)):
                if j < total:
                    rows_for[j] = row
                else:
                    extra_rows[j - total] = row
        if rows_for:
            keys = np.fromiter(rows_for.keys(), dtype=np.int64, count=len(rows_for))
            trans[keys] = np.stack(list(rows_for.values()))
        trans[merged[0]] = merged[1]
        accepting = fin.copy()
        if extra_rows:
            trans = np.concatenate([trans, np.stack(extra_rows)])
            accepting = np.concatenate([accepting, np.array(extra_acc, dtype=bool)])
        return trans, accepting, start

    def network(self, num_nodes: int, edges: list, finals: tuple) -> DFA | None:
        """Determinise a graph whose edges carry sub-ASTs (None = epsilon), start node 0."""
        deadline.check()
        num_nodes, edges = self._expand(num_nodes, edges)
        epsilons = []  # (src node, dst node)
        copies = []  # (src node, dst node, dfa or literal text)
        total = 0
        for a, b, label in edges:
            if label is None:
                epsilons.append((a, b))
            elif label.__class__ is ra.Text:  # a literal's chain is written by the small network's kernel
                copies.append((a, b, label))
                total += len(label.data) + 1
            else:
                d = self.build(label)
                if d is not None:
                    copies.append((a, b, d))
                    total += d.num_states
        if total > 2 * self.max_states:  # the result keeps nearly every copy state: over the cap anyway
            raise TooLarge(f"more than {self.max_states} DFA states")
        compiled = graph_kernels.kernels()
        if compiled is not None and 0 < len(copies) <= SMALL_COPIES and num_nodes <= SMALL_NODES:
            return self._finish_small(compiled.small_network, num_nodes, copies, epsilons, finals)
        copies = [(a, b, _text_dfa(d.data) if d.__class__ is ra.Text else d) for a, b, d in copies]
        offsets, at = [], 0  # each copy's first state
        for _, _, d in copies:
            offsets.append(at)
            at += d.num_states
        eps = [[] for _ in range(num_nodes)]
        for a, b in epsilons:
            eps[a].append(b)
        final_set = set(finals)
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
            for i, u in enumerate(with_succ):
                if i % 1024 == 0:
                    deadline.check()
                e, f = ebits[u], fbits[u]
                for w in succ[u]:
                    e |= ebits[w]
                    f = f or fbits[w]
                if e != ebits[u] or f != fbits[u]:
                    ebits[u], fbits[u] = e, f
                    changed = True
        closure_memo: dict[int, tuple] = {}

        starts_a = np.array(starts, dtype=np.int64)
        n_bytes = (len(copies) + 7) // 8

        def node_closure(v: int) -> tuple:
            """(the entry states of the copies leaving X(v), ascending (copy order), whether X(v) ends)"""
            hit = closure_memo.get(v)
            if hit is None:
                if len(closure_memo) % 256 == 0:
                    deadline.check()
                e = ebits[v]
                if e.bit_count() <= 32:  # few copies: walk the set bits
                    members = []
                    while e:
                        low = e & -e
                        members.append(starts[low.bit_length() - 1])
                        e ^= low
                else:  # which copies leave X(v), at numpy speed
                    bits = np.unpackbits(np.frombuffer(e.to_bytes(n_bytes, "little"), dtype=np.uint8),
                                         bitorder="little")
                    members = starts_a[np.flatnonzero(bits)].tolist()
                hit = closure_memo[v] = (tuple(members), fbits[v])
            return hit

        entry0, final0 = node_closure(0)
        if not entry0:
            return empty_word() if final0 else None
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
        if compiled is not None:
            return self._finish_compiled(compiled.network, copies, node_closure, entry0, final0, all_live)
        return self._finish_numpy(copies, offsets, node_closure, entry0, final0, all_live)

    def _finish_numpy(self, copies, offsets, node_closure, entry0: tuple, final0: bool, all_live: bool):
        """The network's copies over one byte partition, their subset construction, the trim, the
        cap and a small result's minimisation, by numpy calls (without numba)."""
        # one byte-class partition refining every copy's classes
        cobs: dict[int, np.ndarray] = {}
        for _, _, d in copies:
            cobs.setdefault(id(d.cob), d.cob)
        distinct = {c.tobytes(): c for c in cobs.values()}
        reps, joint = column_classes(np.stack(list(distinct.values())))  # [U, 256]: bytes alike
        gathered: dict[int, np.ndarray] = {}
        parts, sizes, accs = [], [], []
        for i, (_, b, d) in enumerate(copies):
            if i % 4096 == 4095:
                deadline.check()
            g = gathered.get(id(d))
            if g is None:
                g = gathered[id(d)] = d.trans[:, d.cob[reps]]
            parts.append(g)
            sizes.append(d.num_states)
            accs.append(d.accepting)
        sizes_a = np.array(sizes, dtype=np.int64)
        deadline.check()
        trans = np.concatenate(parts).astype(np.int32, copy=False)
        shift = np.repeat(np.array(offsets, dtype=np.int32), sizes_a)[:, None]
        rows = max(1, SHIFT_BLOCK // trans.shape[1])
        for lo in range(0, len(trans), rows):  # megalinter's table: 0.2 s in one numpy call, between two looks
            block = trans[lo:lo + rows]
            np.add(block, shift[lo:lo + rows], out=block, where=block >= 0)
            deadline.check()
        copy_acc = np.concatenate(accs)
        target_node = np.repeat(np.array([b for _, b, _ in copies], dtype=np.int64), sizes_a)
        trans, accepting, start = self._subsets_numpy(trans, copy_acc, target_node, node_closure, frozenset(entry0),
                                                      final0)
        deadline.check()  # after the subsets, before the trim of the whole table
        # states nothing enters any more (a copy's start, entered now as part of a subset state;
        # about a quarter of a rule body) go too: each would cost `link` and the token tables a row
        dfa = trim(trans, accepting, start, joint, all_live=all_live)
        if dfa is None:
            return None
        if dfa.num_states > self.max_states:
            raise TooLarge(f"more than {self.max_states} DFA states")
        if dfa.num_states <= MINIMISE_UP_TO:
            t, a, s = minimise(dfa.trans, dfa.accepting, dfa.start)
            dfa = CDFA(t, a, s, dfa.cob)
        return dfa

    def _finish_small(self, kernel, num_nodes: int, copies: list, epsilons: list, finals: tuple):
        """network's closures and _finish_compiled's steps in one compiled call (a small network:
        network_kernel.network_from_edges); the same table. A literal text's copy is its bytes, its
        chain written by the kernel (a median schema spells ~30 new ones, 26 us each as an automaton)."""
        distinct, copy_dfa, texts = _distinct(copies)
        ends = lambda pairs, k: np.array([pair[k] for pair in pairs], dtype=np.int64)
        status, trans, accepting, start, joint = kernel(
            *flat_tables(distinct),
            np.array([d.start for d in distinct], dtype=np.int64),
            np.frombuffer(b"".join(texts), dtype=np.uint8),
            np.array(list(accumulate(map(len, texts), initial=0)), dtype=np.int64),
            np.array(copy_dfa, dtype=np.int64),
            ends(copies, 0), ends(copies, 1), ends(epsilons, 0), ends(epsilons, 1), num_nodes,
            np.array(finals, dtype=np.int64), self.max_states, MINIMISE_UP_TO, LOOK_EVERY)
        if status == 3:
            return empty_word()
        return self._kernel_result(status, trans, accepting, start, joint)

    def _finish_compiled(self, kernel, copies, node_closure, entry0: tuple, final0: bool, all_live: bool):
        """_finish_numpy's steps in one compiled call (network_kernel.finish_network): the same table."""
        distinct, copy_dfa, _ = _distinct(copies)
        nodes = sorted({b for _, b, _ in copies})
        node_index = {u: i for i, u in enumerate(nodes)}
        entries, entry_lens, node_fin = [], [0], []
        for i, u in enumerate(nodes):
            if i % 256 == 255:
                deadline.check()
            members, fin = node_closure(u)
            entries += members
            entry_lens.append(len(members))
            node_fin.append(fin)
        deadline.check()
        status, trans, accepting, start, joint = kernel(
            *flat_tables(distinct), _NO_TEXT, _NO_TEXT_PTR,
            np.array(copy_dfa, dtype=np.int64), np.array([node_index[b] for _, b, _ in copies], dtype=np.int64),
            np.cumsum(entry_lens, dtype=np.int64), np.array(entries, dtype=np.int64),
            np.array(node_fin, dtype=bool), np.array(entry0, dtype=np.int64), bool(final0), all_live,
            self.max_states, MINIMISE_UP_TO, LOOK_EVERY)
        return self._kernel_result(status, trans, accepting, start, joint)

    def _kernel_result(self, status: int, trans, accepting, start, joint) -> CDFA | None:
        deadline.raise_for_stop(status, self.max_states)
        return None if status == 1 else CDFA(trans, accepting, int(start), joint)


def _distinct(copies: list) -> tuple[list, list, list]:
    """The distinct automata of the copies, in the order the copies meet them, each copy's (a
    literal text's copy: -1 - its number among the texts), and the texts' bytes in that order."""
    index: dict[int, int] = {}
    distinct, copy_dfa, texts = [], [], []
    for _, _, d in copies:
        if d.__class__ is ra.Text:
            texts.append(d.data)
            copy_dfa.append(-len(texts))
            continue
        i = index.get(id(d))
        if i is None:
            i = index[id(d)] = len(distinct)
            distinct.append(d)
        copy_dfa.append(i)
    return distinct, copy_dfa, texts


_NO_TEXT = np.zeros(0, dtype=np.uint8)  # the texts of a network without literal copies
_NO_TEXT_PTR = np.zeros(1, dtype=np.int64)


def _target_nodes(copy_acc: np.ndarray, target_node: np.ndarray, node_closure):
    """The copies' accepting states and the nodes they lead to: (accepting states, those nodes,
    each state's node among them, each node's entry states sorted, whether each node can end)."""
    acc_states = np.flatnonzero(copy_acc)
    nodes, which = np.unique(target_node[acc_states], return_inverse=True)
    info = [node_closure(int(u)) for u in nodes]
    # as sorted arrays, each distinct set once: a big network's nodes hold ~1M entries (megalinter)
    as_array: dict[tuple, np.ndarray] = {}
    entries = []
    for i, (members, _) in enumerate(info):
        if i % 256 == 255:
            deadline.check()
        got = as_array.get(members)
        if got is None:
            got = as_array[members] = np.array(members, dtype=np.int64)  # node_closure gives them ascending
        entries.append(got)
    return acc_states, nodes, which, entries, np.array([f for _, f in info], dtype=bool)


# the chains of the byte-class runs (by their masks) and of the literals (by their bytes) met so far in
# this process: a key or a character class's UTF-8 spelling recurs across rules and schemas, and each
# is a few numpy calls to build; ~2 KB each (the byte-class map), 4,096 kept at most
_CHAINS: ProcessCache[CDFA] = ProcessCache(4096)
# the counter copies of one-character automata (a string's length bound, a pattern's `{m,n}`), by (the
# character's automaton, the bounds, the cap): over the median band's first compiles 1,266 asks held
# 158 distinct, each a dozen numpy calls (~70 us). The character's automaton is kept beside its
# result, so its id names it while the entry lives; 4 M table cells kept at most
_REPEATS: ProcessCache[tuple[CDFA, CDFA]] = ProcessCache(1 << 22)


def _chain_dfa(masks: tuple) -> CDFA:
    """The n + 1 state chain of a run of n non-empty byte classes (masks)."""
    hit = _CHAINS.get(masks)
    if hit is not None:
        return hit
    if all(m.bit_count() == 1 for m in masks):  # a plain literal: its chain as the literal's
        return _text_dfa(bytes(m.bit_length() - 1 for m in masks))
    bits = np.unpackbits(np.frombuffer(b"".join(m.to_bytes(32, "little") for m in masks),
                                       dtype=np.uint8).reshape(len(masks), 32), axis=1,
                         bitorder="little")  # [n, 256]
    reps, cob = column_classes(bits)
    n = len(masks)
    trans = np.where(bits[:, reps].astype(bool), np.arange(1, n + 1, dtype=np.int32)[:, None], -1)
    trans = np.concatenate([trans.astype(np.int32), np.full((1, len(reps)), -1, dtype=np.int32)])
    acc = np.zeros(n + 1, dtype=bool)
    acc[n] = True
    return _CHAINS.keep(masks, CDFA(trans, acc, 0, cob.astype(np.int64)))


def _masks(run: list) -> tuple:
    """A run of byte classes and literals as the masks of its bytes, one per byte."""
    out = []
    for it in run:
        if it.__class__ is ra.Bytes:
            out.append(it.mask)
        else:
            out += [1 << b for b in it.data]
    return tuple(out)


def _text_dfa(data: bytes) -> CDFA:
    """The chain spelling `data`: _chain_dfa's for its bytes' masks, kept per process by the bytes."""
    hit = _CHAINS.get(data)
    return hit if hit is not None else _CHAINS.keep(data, _literal_chain(list(data)))


def _literal_chain(text: list[int]) -> CDFA:
    """The n + 1 state chain spelling the bytes `text`, with the byte classes column_classes
    would give it (the literal's bytes, one class each, and the rest; numbered by first byte).
    Built from Python lists, a few numpy calls: a median schema spells about seventy keys."""
    distinct = set(text)
    rest = next((b for b in range(256) if b not in distinct), None)  # the lowest byte not in it
    rank = {b: i for i, b in enumerate(sorted(distinct if rest is None else distinct | {rest}))}
    classes = bytearray([rank.get(rest, 0)]) * 256  # at most 256 classes: each fits a byte
    for b in distinct:
        classes[b] = rank[b]
    n, k = len(text), len(rank)
    cob = np.frombuffer(bytes(classes), dtype=np.uint8).astype(np.int64)
    trans = np.full((n + 1, k), -1, dtype=np.int32)
    steps = np.arange(n + 1, dtype=np.int32)
    trans[steps[:-1], cob[text]] = steps[1:]  # the i-th byte's class leads from state i to i + 1
    acc = np.zeros(n + 1, dtype=bool)
    acc[n] = True
    return CDFA(trans, acc, 0, cob)


def fast_compile(node: ra.Node, max_states: int = DEFAULT_MAX_STATES) -> DFA | None:
    """Regex AST -> trimmed DFA (None when the language is empty); raises TooLarge past the cap. An
    embedded DFA alone is that DFA (built already: a product, a pattern's lookaheads)."""
    if isinstance(node, ra.Embed) and isinstance(node.dfa, DFA):
        return node.dfa
    c = Composer(max_states).build(node)
    return None if c is None else c.expand()
