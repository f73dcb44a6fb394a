"""The automata's graph loops compiled with numba: reachability, Moore minimisation, byte distances.

Each runs over a few hundred states a call, thousands of calls a schema: the numpy versions spend
their time in per-call overhead (a Moore round is a dozen numpy calls, one per distinguishing
length; a breadth-first search, one per level). Compiled, a call is microseconds. The numpy versions
stay for installs without numba (or KVX_NUMBA=0); `kernels()` says which applies. Both give the same
results (tests/grammar/test_graph_kernels.py holds them side by side).

Compiled once per machine into $KVX_CACHE/numba (seconds), loaded once per process (compile.py
warms them outside the per-schema time, as it does the tokenizer's tables).
"""
from __future__ import annotations

import functools
import heapq
from typing import NamedTuple

import numpy as np

# states up to which Moore runs compiled, without looking at the compile's deadline (milliseconds at
# most); bigger automata take the numpy rounds, which look between rounds
MOORE_UP_TO = 4096


class GraphKernels(NamedTuple):
    reach: object  # (n, src, dst, seeds) -> [n] bool
    moore: object  # (trans, accepting, start) -> (trans, accepting) minimal, breadth-first numbered
    distances: object  # (trans, reps, final, call_src, call_start, call_ret, inf) -> [n] int32


@functools.cache
def kernels() -> GraphKernels | None:
    """The compiled kernels, or None without a working numba."""
    from kvx.kernels.numba_env import import_numba

    numba = import_numba()
    if numba is None:
        return None
    try:
        jit = functools.partial(numba.njit, cache=True, nogil=True)
        built = GraphKernels(jit(_reach), jit(_moore), jit(_distances))
        _warm(built)
    except Exception:  # noqa: BLE001 - numba's errors have no common base class
        return None
    return built


def _warm(k: GraphKernels) -> None:
    """Compile (or load from the disk cache) for the argument types the callers pass."""
    i64, i32 = np.int64, np.int32
    k.reach(2, np.array([0], i64), np.array([1], i64), np.array([0], i64))
    k.moore(np.array([[1], [-1]], i32), np.array([False, True]), 0)
    k.distances(np.array([[1], [-1]], i32), np.array([0], i64), np.array([False, True]),
                np.zeros(0, i64), np.zeros(0, i64), np.zeros(0, i64), 1 << 30)


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

def _moore(trans, accepting, start):  # pragma: no cover - compiled
    n, k = trans.shape
    block = np.zeros(n, np.int64)
    any_rejecting = False
    for s in range(n):
        any_rejecting |= not accepting[s]
    count = 0
    for s in range(n):
        block[s] = 1 if accepting[s] and any_rejecting else 0
        count = max(count, block[s] + 1)
    h = np.empty(n, np.uint64)
    new = np.empty(n, np.int64)
    leaders = np.empty(n, np.int64)
    while True:  # Moore rounds: split blocks by (block, blocks of the successors) until stable
        for s in range(n):
            x = np.uint64(block[s] + 1) * np.uint64(0x9E3779B97F4A7C15)
            for c in range(k):
                t = trans[s, c]
                v = np.uint64(block[t] + 2) if t >= 0 else np.uint64(1)
                x = (x ^ v) * np.uint64(0x100000001B3)
            h[s] = x
        order = np.argsort(h, kind="mergesort")
        fresh = 0
        i = 0
        while i < n:  # equal hashes: equal rows, unless a collision (then a leader per row kind)
            j = i + 1
            while j < n and h[order[j]] == h[order[i]]:
                j += 1
            num_leaders = 0
            for a in range(i, j):
                s = order[a]
                found = -1
                for m in range(num_leaders):
                    r = leaders[m]
                    same = block[r] == block[s]
                    c = 0
                    while same and c < k:
                        tr, ts = trans[r, c], trans[s, c]
                        same = (tr < 0) == (ts < 0) and (tr < 0 or block[tr] == block[ts])
                        c += 1
                    if same:
                        found = new[r]
                        break
                if found < 0:
                    found = fresh
                    fresh += 1
                    leaders[num_leaders] = s
                    num_leaders += 1
                new[s] = found
            i = j
        block[:] = new
        if fresh == count:
            break
        count = fresh
    # one state per block, numbered breadth-first from the start (equal languages, equal tables)
    rep = np.full(count, -1, np.int64)
    for s in range(n):
        if rep[block[s]] < 0:
            rep[block[s]] = s
    pos = np.full(count, -1, np.int64)
    order = np.empty(count, np.int64)
    order[0] = block[start]
    pos[block[start]] = 0
    m, i = 1, 0
    while i < m:
        s = rep[order[i]]
        for c in range(k):
            t = trans[s, c]
            if t >= 0 and pos[block[t]] < 0:
                pos[block[t]] = m
                order[m] = block[t]
                m += 1
        i += 1
    out = np.empty((m, k), np.int32)
    acc = np.empty(m, np.bool_)
    for i in range(m):
        s = rep[order[i]]
        acc[i] = accepting[s]
        for c in range(k):
            t = trans[s, c]
            out[i, c] = pos[block[t]] if t >= 0 else -1
    return out, acc

def _distances(trans, reps, final, call_src, call_start, call_ret, inf):  # pragma: no cover - compiled
    # Dijkstra from the final states backwards; a call edge (src, start, ret) costs
    # dist(start) + dist(ret) and is relaxed once both ends are settled (Knuth's generalisation)
    n = trans.shape[0]
    counts = np.zeros(n + 1, np.int64)
    for s in range(n):
        for r in reps:
            t = trans[s, r]
            if t >= 0:
                counts[t + 1] += 1
    for i in range(n):
        counts[i + 1] += counts[i]
    fill = counts[:-1].copy()
    preds = np.empty(counts[n], np.int64)
    for s in range(n):
        for r in reps:
            t = trans[s, r]
            if t >= 0:
                preds[fill[t]] = s
                fill[t] += 1
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
