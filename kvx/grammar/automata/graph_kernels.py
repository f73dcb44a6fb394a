"""The automata's graph loops compiled with numba, in one place: byte distances and a program's frame
boundaries, and from files of their own reachability, trimming, byte classes and the spreading of a
table's rows (table_kernels.py), minimisation (minimise_kernel.py, Hopcroft's), the composer's
subset construction (subset_kernel.py) and the rest of its network in one call (network_kernel.py),
the product of two DFAs (product_kernel.py) and `link` in one call (link_kernel.py); numba itself
comes from jit.py.

Each runs over a few hundred states a call, thousands of calls a schema: the numpy versions spend
their time in per-call overhead (a Moore round is a dozen numpy calls, one per distinguishing
length; a breadth-first search, one per level; a batch of subset states, a few dozen). Compiled, a
small call is microseconds. The numpy versions stay for installs without numba (or KVX_NUMBA=0);
`kernels()` says which applies. Both give the same results (tests/grammar/test_graph_kernels.py
holds them side by side); the subset construction numbers its new states in the order it meets them.

Compiled once per machine into $KVX_CACHE/numba (about 20 s), loaded once per process (compile.py
warms them outside the per-schema time, as it does the tokenizer's tables). The subset loop looks at
the compile's deadline every ~1 ms of its work (numba's object mode, a few microseconds a look).
"""
from __future__ import annotations

import functools
import heapq
from typing import NamedTuple

import numpy as np

from kvx.grammar.automata.empty_moves_kernel import without_empty_moves
from kvx.grammar.automata.jit import jit as _jit
from kvx.grammar.automata.jit import numba as _numba
from kvx.grammar.automata.link_kernel import link_program
from kvx.grammar.automata.minimise_kernel import minimal_rows
from kvx.grammar.automata.names_kernel import tree_over_body
from kvx.grammar.automata.network_kernel import finish_network, network_from_edges
from kvx.grammar.automata.product_kernel import product_rows
from kvx.grammar.automata.subset_kernel import subsets
from kvx.grammar.automata.table_kernels import column_classes, csr, keep_rows, reach, spread, trim_keep

# states up to which minimisation runs compiled, without looking at the compile's deadline
# (milliseconds at most); bigger automata take the numpy Moore rounds, which look between rounds
MINIMISE_COMPILED_UP_TO = 4096


class GraphKernels(NamedTuple):
    reach: object  # (n, src, dst, seeds) -> [n] bool
    minimise: object  # (trans, accepting, start) -> (trans, accepting) minimal, breadth-first numbered
    distances: object  # (trans, reps, final, call_src, call_start, call_ret, inf) -> [n] int32
    subsets: object  # compose's subset construction: subset_kernel.subsets
    spread: object  # (table, columns, offset, out [n, len(columns)]) -> None: CDFA.expand, link_kernel
    column_classes: object  # (mat [R, C] int32 or int64) -> (first column per class, class per column)
    product: object  # dfa_ops.product's walk: product_kernel.product_rows
    trim: object  # (trans, accepting, start, all_live) -> [n] bool: the states cdfa.trim keeps
    network: object  # compose's network after its closures: network_kernel.finish_network
    small_network: object  # a small network with its closures: network_kernel.network_from_edges
    link: object  # pda.link over the composed rule bodies: link_kernel.link_program
    tree_over_body: object  # key_names.body_without_names's table, minimal: names_kernel.tree_over_body
    empty_moves: object  # word_bounds' markers read as empty moves: empty_moves_kernel.without_empty_moves
    boundary: object  # (table, classes, rule_start, call_ptr, call_rule, pops) -> (row, bytes): frames.boundary_of


@functools.cache
def kernels() -> GraphKernels | None:
    """The compiled kernels, or None without a working numba."""
    if _numba is None:
        return None
    try:
        built = GraphKernels(reach, minimal_rows, _distances, subsets, spread, column_classes,
                             product_rows, trim_keep, finish_network, network_from_edges, link_program,
                             tree_over_body, without_empty_moves, _boundary)
        _warm(built)
    except Exception:  # noqa: BLE001 - numba's errors have no common base class
        return None
    return built


def _warm(k: GraphKernels) -> None:
    """Compile (or load from the disk cache) for the argument types the callers pass."""
    i64, i32 = np.int64, np.int32
    k.reach(2, np.array([0], i64), np.array([1], i64), np.array([0], i64))
    k.minimise(np.array([[1], [-1]], i32), np.array([False, True]), 0)
    # a one-state body, the trie of one one-byte name over it
    k.tree_over_body(np.zeros((1, 256), i32), np.array([True]), np.zeros(2, i64), np.array([True, False]),
                     np.array([1], i64), np.array([97], i64), np.array([2], i64))
    k.distances(np.array([[1], [-1]], i32), np.array([0], i64), np.array([False, True]),
                np.zeros(0, i64), np.zeros(0, i64), np.zeros(0, i64), 1 << 30)
    k.subsets(np.array([[1], [-1]], i32), np.array([False, True]), np.array([-1, 0], i64), np.array([0, 0], i64),
              np.zeros(0, i64), np.array([True]), np.array([0], i64), False, 16, 1 << 20)
    _warm_deadline_look(k)
    # a -> (empty) -> b: one state reads "a" into an accepting one
    k.empty_moves(np.array([[1], [-1], [-1]], i32), np.array([False, False, True]), 0, np.array([0, 0, 1, 1], i64),
                  np.array([2], i64), 16, 1 << 16)
    # a document of one byte ("a", class 0) with a call spelling beside it (0xFF, class 1, leads nowhere)
    k.link(np.array([1, -1, -1, -1], i32), np.array([[2, 2]], i64), np.array([False, True]),
           np.ascontiguousarray((np.arange(256) == 0xFF).astype(i64)[None, :]), np.array([0], i64), np.array([0], i64), 0xFF, 16, 1 << 20)
    k.spread(np.array([[1], [-1]], i32), np.zeros(256, i64), 0, np.empty((2, 256), i32))
    # a calling state (0) whose callee starts at state 1, and a final state of that callee
    k.boundary(np.array([[-1], [2], [-1]], i32), np.zeros(256, i64), np.array([0, 1], np.int32),
               np.array([0, 1, 1, 1], i64), np.array([1], np.int32), np.array([False, False, True]))
    for dtype in (i32, i64):
        k.column_classes(np.zeros((2, 256), dtype))
    k.product(np.array([[1], [-1]], i64), np.array([[0], [1]], i64), 1, 0, False, 16, 4096)
    for dtype in (i32, i64):
        k.trim(np.array([[1], [-1]], dtype), np.array([False, True]), 0, False)
    # one copy of a one-byte automaton, ending the network
    k.network(np.array([1, -1], i32), np.array([[2, 1]], i64), np.array([False, True]), np.zeros((1, 256), i64),
              np.zeros(0, np.uint8), np.zeros(1, i64), np.array([0], i64), np.array([0], i64), np.array([0, 0], i64),
              np.zeros(0, i64), np.array([True]), np.array([0], i64), False, True, 16, 64, 1 << 20)
    # the automaton's copy, then a literal's ("ab")
    k.small_network(np.array([1, -1], i32), np.array([[2, 1]], i64), np.array([False, True]), np.zeros((1, 256), i64),
                    np.array([0], i64), np.frombuffer(b"ab", np.uint8), np.array([0, 2], i64), np.array([0, -1], i64),
                    np.array([0, 1], i64), np.array([1, 2], i64), np.zeros(0, i64), np.zeros(0, i64), 3,
                    np.array([2], i64), 16, 64, 1 << 20)


@_jit
def _distances(trans, reps, final, call_src, call_start, call_ret, inf):  # pragma: no cover - compiled
    # Dijkstra from the final states backwards; a call edge (src, start, ret) costs
    # dist(start) + dist(ret) and is relaxed once both ends are settled (Knuth's generalisation)
    n = trans.shape[0]
    # the byte edges read once (the table is wide, most of a row goes to one or two states),
    # each (s, t) pair once, then ordered by target: predecessors of t are preds[counts[t]:counts[t + 1]]
    src = np.empty(n * len(reps), np.int32)  # room for every cell: no regrowth inside the loop
    dst = np.empty(n * len(reps), np.int32)
    last = np.full(n, -1, np.int64)  # the last source that listed each target
    ne = 0
    for s in range(n):
        for r in reps:
            t = trans[s, r]
            if t >= 0 and last[t] != s:
                last[t] = s
                src[ne] = s
                dst[ne] = t
                ne += 1
    counts, preds = csr(n, dst[:ne], src[:ne])
    m = len(call_src)
    # each call edge listed under both its ends (its return state, its callee's start)
    ends = np.empty(2 * m, np.int64)
    ends[0::2] = call_ret
    ends[1::2] = call_start
    by_end, end_edges = csr(n, ends, np.arange(2 * m) // 2)
    # by levels: a byte costs 1, so the states of the next level are a plain list; a call edge's cost
    # (both ends settled, so at least the level) joins this level's list, the next one's, or a heap
    # (a heap for every state: 0.74 ms a median program, 0.41 so)
    dist = np.full(n, inf, np.int64)
    done = np.zeros(n, np.bool_)
    cur = np.empty(n, np.int64)  # a state enters a level's list only when its distance drops to it
    nxt = np.empty(n, np.int64)
    n_cur, n_nxt, head, level = 0, 0, 0, 0
    heap = [(np.int64(0), np.int64(0))]  # typed by its first item, taken out again
    heap.pop()
    for s in range(n):
        if final[s]:
            dist[s] = 0
            cur[n_cur] = s
            n_cur += 1
    while True:
        while len(heap) and heap[0][0] == level:
            c, x = heapq.heappop(heap)
            if not done[x] and dist[x] == c:
                cur[n_cur] = x
                n_cur += 1
        if head == n_cur:  # the level is done: on to the next, or past a gap to the heap's least
            if n_nxt == 0:
                if not len(heap):
                    break
                level = heap[0][0]
                head = n_cur = 0
                continue
            cur, nxt = nxt, cur
            n_cur, n_nxt, head = n_nxt, 0, 0
            level += 1
            continue
        x = cur[head]
        head += 1
        if done[x] or dist[x] != level:
            continue
        done[x] = True
        for j in range(counts[x], counts[x + 1]):
            p = preds[j]
            if not done[p] and level + 1 < dist[p]:
                dist[p] = level + 1
                nxt[n_nxt] = p
                n_nxt += 1
        for j in range(by_end[x], by_end[x + 1]):
            e = end_edges[j]
            if done[call_start[e]] and done[call_ret[e]]:
                c, p = dist[call_start[e]] + dist[call_ret[e]], call_src[e]
                if not done[p] and c < dist[p]:
                    dist[p] = c
                    if c == level:
                        cur[n_cur] = p
                        n_cur += 1
                    elif c == level + 1:
                        nxt[n_nxt] = p
                        n_nxt += 1
                    else:
                        heapq.heappush(heap, (c, p))
    return dist.astype(np.int32)


def _warm_deadline_look(k: GraphKernels) -> None:
    """Run the subset and product loops past a deadline look (kernel_deadline.py): numba sets up its
    object-mode call on first use (30-90 ms), which would otherwise land in the first real compile of
    a process (the one compile `kvx extract` makes: a schema near the deadline was refused there,
    compiled later on)."""
    n = 8  # a chain of closure states, each closing onto the next; a look after every unit of work
    trans = np.full((n, 1), -1, np.int32)
    trans[:-1, 0] = np.arange(1, n, dtype=np.int32)
    k.subsets(trans, np.ones(n, np.bool_), np.zeros(n, np.int64), np.array([0, 1], np.int64),
              np.array([n - 1], np.int64), np.array([True]), np.array([0], np.int64), False, 4 * n, 1)
    chain = np.full((n, 1), -1, np.int64)  # a chain times "anything": a row per level, a look after each
    chain[:-1, 0] = np.arange(1, n)
    k.product(chain, np.array([[0], [1]], np.int64), 1, 0, False, 4 * n, 1)


@_jit
def _boundary(table, classes, rule_start, call_ptr, call_rule, pops):  # pragma: no cover - compiled
    """frames.boundary_of: the states with calls or that pop, numbered in order (row), and each one's
    bytes that leave the frame: a calling state's, the first bytes of all its callees; a popping
    state's, every byte."""
    n, k = table.shape
    row = np.full(n, -1, np.int64)
    count = 0
    for s in range(n):
        if call_ptr[s + 1] > call_ptr[s] or pops[s]:
            row[s] = count
            count += 1
    out = np.zeros((count, 256), np.bool_)
    first = np.zeros(k, np.bool_)
    for s in range(n):
        if row[s] < 0:
            continue
        if pops[s]:
            out[row[s], :] = True
            continue
        first[:] = False
        for j in range(call_ptr[s], call_ptr[s + 1]):
            start = rule_start[call_rule[j]]
            for c in range(k):
                first[c] |= table[start, c] >= 0
        for b in range(256):
            out[row[s], b] = first[classes[b]]
    return row, out
