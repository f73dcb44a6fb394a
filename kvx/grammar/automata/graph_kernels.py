"""The automata's graph loops compiled with numba, in one place: reachability, byte distances, byte
classes, `link`'s reading of call edges and spreading of rows, trimming, and in files of their own
minimisation (minimise_kernel.py, Hopcroft's), the composer's subset construction (subset_kernel.py)
and the product of two DFAs (product_kernel.py); numba itself comes from jit.py.

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

from kvx.grammar.automata.jit import jit as _jit
from kvx.grammar.automata.jit import numba as _numba
from kvx.grammar.automata.minimise_kernel import minimal_rows
from kvx.grammar.automata.product_kernel import product_rows
from kvx.grammar.automata.subset_kernel import subsets

# states up to which minimisation runs compiled, without looking at the compile's deadline
# (milliseconds at most); bigger automata take the numpy Moore rounds, which look between rounds
MINIMISE_COMPILED_UP_TO = 4096


class GraphKernels(NamedTuple):
    reach: object  # (n, src, dst, seeds) -> [n] bool
    minimise: object  # (trans, accepting, start) -> (trans, accepting) minimal, breadth-first numbered
    distances: object  # (trans, reps, final, call_src, call_start, call_ret, inf) -> [n] int32
    subsets: object  # compose's subset construction: subset_kernel.subsets
    call_edges: object  # (table, cob, call) -> (edges [m, 3], spelling states [n] bool): pda._body
    spread: object  # (table, classes, offset, out [n, 256]) -> None: pda._concatenate
    column_classes: object  # (mat [R, C] int32 or int64) -> (first column per class, class per column)
    product: object  # dfa_ops.product's walk: product_kernel.product_rows
    trim: object  # (trans, accepting, start, all_live) -> [n] bool: the states cdfa.trim keeps


@functools.cache
def kernels() -> GraphKernels | None:
    """The compiled kernels, or None without a working numba."""
    if _numba is None:
        return None
    try:
        built = GraphKernels(_reach, minimal_rows, _distances, subsets, _call_edges, _spread, _column_classes,
                             product_rows, _trim_keep)
        _warm(built)
    except Exception:  # noqa: BLE001 - numba's errors have no common base class
        return None
    return built


def _warm(k: GraphKernels) -> None:
    """Compile (or load from the disk cache) for the argument types the callers pass."""
    i64, i32 = np.int64, np.int32
    k.reach(2, np.array([0], i64), np.array([1], i64), np.array([0], i64))
    k.minimise(np.array([[1], [-1]], i32), np.array([False, True]), 0)
    k.distances(np.array([[1], [-1]], i32), np.array([0], i64), np.array([False, True]),
                np.zeros(0, i64), np.zeros(0, i64), np.zeros(0, i64), 1 << 30)
    k.subsets(np.array([[1], [-1]], i32), np.array([False, True]), np.array([-1, 0], i64), np.array([0, 0], i64),
              np.zeros(0, i64), np.array([True]), np.array([0], i64), False, 16, 1 << 20)
    _warm_deadline_look(k)
    k.call_edges(np.array([[1], [-1]], i32), np.zeros(256, i64), 0)
    k.spread(np.array([[1], [-1]], i32), np.zeros(256, i64), 0, np.empty((2, 256), i32))
    for dtype in (i32, i64):
        k.column_classes(np.zeros((2, 256), dtype))
    k.product(np.array([[1], [-1]], i64), np.array([[0], [1]], i64), 1, 0, False, 16, 4096)
    for dtype in (i32, i64):
        k.trim(np.array([[1], [-1]], dtype), np.array([False, True]), 0, False)


@_jit
def _reach(n, src, dst, seeds):  # pragma: no cover - compiled
    counts = np.zeros(n + 1, np.int64)
    for i in range(len(src)):
        counts[src[i] + 1] += 1
    for i in range(n):
        counts[i + 1] += counts[i]
    fill = counts[:-1].copy()
    targets = np.empty(len(src), np.int64)
    for i in range(len(src)):
        targets[fill[src[i]]] = dst[i]
        fill[src[i]] += 1
    seen = np.zeros(n, np.bool_)
    queue = np.empty(n, np.int64)
    tail = 0
    for s in seeds:
        if not seen[s]:
            seen[s] = True
            queue[tail] = s
            tail += 1
    head = 0
    while head < tail:
        s = queue[head]
        head += 1
        for j in range(counts[s], counts[s + 1]):
            t = targets[j]
            if not seen[t]:
                seen[t] = True
                queue[tail] = t
                tail += 1
    return seen

@_jit
def _trim_keep(trans, accepting, start, all_live):  # pragma: no cover - compiled
    """cdfa.trim's states: those reachable from `start` through states that can reach acceptance
    (`all_live`: the caller knows every state can), read off the table (no deduplicated pair list:
    a third of a second on a 100,000-state product). All False when `start` cannot."""
    n, k = trans.shape
    if all_live:
        live = np.ones(n, np.bool_)
    else:  # backwards from the accepting states
        cells = 0
        for s in range(n):
            for c in range(k):
                cells += trans[s, c] >= 0
        back_src, back_dst = np.empty(cells, np.int64), np.empty(cells, np.int64)
        cells = 0
        for s in range(n):
            for c in range(k):
                if trans[s, c] >= 0:
                    back_src[cells], back_dst[cells] = trans[s, c], s
                    cells += 1
        live = _reach(n, back_src, back_dst, np.flatnonzero(accepting))
    seen = np.zeros(n, np.bool_)
    if not live[start]:
        return seen
    seen[start] = True
    queue = np.empty(n, np.int64)
    queue[0] = start
    head, tail = 0, 1
    while head < tail:
        s = queue[head]
        head += 1
        for c in range(k):
            t = trans[s, c]
            if t >= 0 and live[t] and not seen[t]:
                seen[t] = True
                queue[tail] = t
                tail += 1
    return seen


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
    counts = np.zeros(n + 1, np.int64)
    for i in range(ne):
        counts[dst[i] + 1] += 1
    for i in range(n):
        counts[i + 1] += counts[i]
    fill = counts[:-1].copy()
    preds = np.empty(ne, np.int64)
    for i in range(ne):
        preds[fill[dst[i]]] = src[i]
        fill[dst[i]] += 1
    m = len(call_src)
    # each call edge listed under both its ends (its return state, its callee's start)
    by_end = np.zeros(n + 1, np.int64)
    for e in range(m):
        by_end[call_ret[e] + 1] += 1
        by_end[call_start[e] + 1] += 1
    for i in range(n):
        by_end[i + 1] += by_end[i]
    end_edges = np.empty(2 * m, np.int64)
    fill = by_end[:-1].copy()
    for e in range(m):
        for end in (call_ret[e], call_start[e]):
            end_edges[fill[end]] = e
            fill[end] += 1
    dist = np.full(n, inf, np.int64)
    done = np.zeros(n, np.bool_)
    heap = [(np.int64(0), np.int64(0))]  # typed by its first item, taken out again
    heap.pop()
    for s in range(n):
        if final[s]:
            dist[s] = 0
            heap.append((np.int64(0), np.int64(s)))
    while heap:
        d, x = heapq.heappop(heap)
        if done[x] or d > dist[x]:
            continue
        done[x] = True
        for j in range(counts[x], counts[x + 1]):
            p = preds[j]
            if not done[p] and d + 1 < dist[p]:
                dist[p] = d + 1
                heapq.heappush(heap, (d + 1, p))
        for j in range(by_end[x], by_end[x + 1]):
            e = end_edges[j]
            if done[call_start[e]] and done[call_ret[e]]:
                c, p = dist[call_start[e]] + dist[call_ret[e]], call_src[e]
                if not done[p] and c < dist[p]:
                    dist[p] = c
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
def _call_edges(table, cob, call):  # pragma: no cover - compiled
    """pda._body's reading of call spellings (0xFF, hi, lo): the edges (state, rule, return state) in
    the order of states, then classes, then bytes; and the states that only spell them."""
    n, k = table.shape
    starts = np.zeros(k + 1, np.int64)  # the bytes of each class, ascending
    for b in range(256):
        starts[cob[b] + 1] += 1
    for c in range(k):
        starts[c + 1] += starts[c]
    fill = starts[:-1].copy()
    members = np.empty(256, np.int64)
    for b in range(256):
        members[fill[cob[b]]] = b
        fill[cob[b]] += 1
    spelling = np.zeros(n, np.bool_)
    edges = [(np.int64(0), np.int64(0), np.int64(0))]
    edges.clear()
    for s in range(n):
        m1 = table[s, call]
        if m1 < 0:
            continue
        spelling[m1] = True
        for k1 in range(k):
            m2 = table[m1, k1]
            if m2 < 0:
                continue
            spelling[m2] = True
            for k2 in range(k):
                ret = table[m2, k2]
                if ret < 0:
                    continue
                for i in range(starts[k1], starts[k1 + 1]):
                    for j in range(starts[k2], starts[k2 + 1]):
                        edges.append((np.int64(s), members[i] * 255 + members[j], np.int64(ret)))
    out = np.empty((len(edges), 3), np.int64)
    for i in range(len(edges)):
        out[i, 0], out[i, 1], out[i, 2] = edges[i]
    return out, spelling


@_jit
def _spread(table, classes, offset, out):  # pragma: no cover - compiled
    """out[s, b] = table[s, classes[b]] + offset (-1 stays -1): a rule body's rows in the program."""
    for s in range(table.shape[0]):
        for b in range(256):
            t = table[s, classes[b]]
            out[s, b] = t + offset if t >= 0 else -1


@_jit
def _column_classes(mat):  # pragma: no cover - compiled
    """cdfa.column_classes: (first column of each class, class of each column), the classes of
    identical columns numbered by their first column."""
    rows, cols = mat.shape
    of = np.empty(cols, np.int64)
    firsts = np.empty(cols, np.int64)
    classes = 0
    table = dict()  # column hash (probed linearly) -> class
    table[np.int64(-1)] = np.int64(-1)
    hashes = np.full(cols, np.uint64(0xCBF29CE484222325))
    for r in range(rows):  # row by row, in memory order: a tall table's columns are strided
        for c in range(cols):
            hashes[c] = (hashes[c] ^ np.uint64(mat[r, c] + 2)) * np.uint64(0x100000001B3)
    for c in range(cols):
        h = np.int64(hashes[c] >> np.uint64(1))
        found = -1
        while h in table:
            k = table[h]
            same = True
            for r in range(rows):
                if mat[r, firsts[k]] != mat[r, c]:
                    same = False
                    break
            if same:
                found = k
                break
            h += 1
        if found < 0:
            found = classes
            table[h] = np.int64(classes)
            firsts[classes] = c
            classes += 1
        of[c] = found
    return firsts[:classes].copy(), of
