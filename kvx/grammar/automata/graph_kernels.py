"""The automata's graph loops compiled with numba: reachability, Moore minimisation, byte distances,
the composer's subset construction, byte classes, and `link`'s reading of call edges and spreading of rows.

Each runs over a few hundred states a call, thousands of calls a schema: the numpy versions spend
their time in per-call overhead (a Moore round is a dozen numpy calls, one per distinguishing
length; a breadth-first search, one per level; a batch of subset states, a few dozen). Compiled, a
small call is microseconds. The numpy versions stay for installs without numba (or KVX_NUMBA=0);
`kernels()` says which applies. Both give the same results (tests/grammar/test_graph_kernels.py
holds them side by side); the subset construction numbers its new states in the order it meets them.

Compiled once per machine into $KVX_CACHE/numba (about 15 s), loaded once per process (compile.py
warms them outside the per-schema time, as it does the tokenizer's tables). The subset loop looks at
the compile's deadline every 1,024 states it works out (numba's object mode, a few microseconds).
"""
from __future__ import annotations

import functools
import heapq
from typing import NamedTuple

import numpy as np

from kvx.grammar.automata import deadline
from kvx.kernels.numba_env import import_numba

_numba = import_numba()  # None without numba (or with KVX_NUMBA=0): kernels() is None then
# compiled on first call (or loaded from the disk cache); without numba plain functions nobody calls
_jit = (lambda fn: fn) if _numba is None else functools.partial(_numba.njit, cache=True)

# states up to which Moore runs compiled, without looking at the compile's deadline (milliseconds at
# most); bigger automata take the numpy rounds, which look between rounds
MOORE_UP_TO = 4096


class GraphKernels(NamedTuple):
    reach: object  # (n, src, dst, seeds) -> [n] bool
    moore: object  # (trans, accepting, start) -> (trans, accepting) minimal, breadth-first numbered
    distances: object  # (trans, reps, final, call_src, call_start, call_ret, inf) -> [n] int32
    subsets: object  # compose's subset construction: see _subsets
    call_edges: object  # (table, cob, call) -> (edges [m, 3], spelling states [n] bool): pda._body
    spread: object  # (table, classes, offset, out [n, 256]) -> None: pda._concatenate
    column_classes: object  # (mat [R, C] int32 or int64) -> (first column per class, class per column)


@functools.cache
def kernels() -> GraphKernels | None:
    """The compiled kernels, or None without a working numba."""
    if _numba is None:
        return None
    try:
        built = GraphKernels(_reach, _moore, _distances, _subsets, _call_edges, _spread, _column_classes)
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
    k.subsets(np.array([[1], [-1]], i32), np.array([False, True]), np.array([-1, 0], i64), np.array([0, 0], i64),
              np.zeros(0, i64), np.array([True]), np.array([0], i64), False, 16)
    _deadline_passed_once(k)
    k.call_edges(np.array([[1], [-1]], i32), np.zeros(256, i64), 0)
    k.spread(np.array([[1], [-1]], i32), np.zeros(256, i64), 0, np.empty((2, 256), i32))
    for dtype in (i32, i64):
        k.column_classes(np.zeros((2, 256), dtype))


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

@_jit
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


def _deadline_passed_once(k: GraphKernels) -> None:
    """Run the subset loop past its first deadline look: numba sets up its object-mode call on first
    use (~30 ms), which would otherwise land in the first real compile of a process."""
    n = 3 * 1024 + 2  # a chain of closure states, each closing onto the next: 1,024 states worked out
    trans = np.full((n, 1), -1, np.int32)
    trans[:-1, 0] = np.arange(1, n, dtype=np.int32)
    k.subsets(trans, np.ones(n, np.bool_), np.zeros(n, np.int64), np.array([0, 1], np.int64),
              np.array([n - 1], np.int64), np.array([True]), np.array([0], np.int64), False, 4 * n)


def _deadline_passed() -> bool:
    """Whether the compile's active deadline has passed (read from the compiled subset loop)."""
    active = deadline.active()
    return active is not None and active.clock() > active.end


@_jit
def _members_hash(members, acc):  # pragma: no cover - compiled
    x = np.uint64(0xCBF29CE484222325) ^ np.uint64(acc)
    for q in members:
        x = (x ^ np.uint64(q)) * np.uint64(0x100000001B3)
    return np.int64(x >> np.uint64(1))


@_jit
def _closure_of(q, node_of, entry_ptr, entry_states, is_closure, buf, at):  # pragma: no cover - compiled
    """Write closure(q) (q, and the entries of its target node if q is a closure state) at buf[at:]."""
    buf[at] = q
    at += 1
    if is_closure[q]:
        u = node_of[q]
        for i in range(entry_ptr[u], entry_ptr[u + 1]):
            buf[at] = entry_states[i]
            at += 1
    return at


@_jit
def _closure_with(members, acc, fin, is_closure, node_of, entry_ptr, entry_states):  # pragma: no cover - compiled
    """The first closure state among the sorted `members` whose closure they are (with its acceptance), or -1."""
    for q in members:
        if not is_closure[q] or fin[q] != acc:
            continue
        u = node_of[q]
        size = entry_ptr[u + 1] - entry_ptr[u]
        if len(members) < size or len(members) > size + 1:
            continue
        # closure(q) = {q} | entries(u) (entries sorted, q possibly among them) must equal members
        pos = 0
        ok = True
        for i in range(entry_ptr[u], entry_ptr[u + 1]):
            while pos < len(members) and members[pos] < entry_states[i]:
                if members[pos] != q:
                    ok = False
                    break
                pos += 1
            if not ok or pos == len(members) or members[pos] != entry_states[i]:
                ok = False
                break
            pos += 1
        while ok and pos < len(members):
            ok = members[pos] == q
            pos += 1
        if ok:
            return q
    return -1


@_jit
def _subsets(trans, copy_acc, node_of, entry_ptr, entry_states, node_fin, start_members, start_final,
             cap):  # pragma: no cover - compiled
    """The subset construction of compose.Composer.network over its copies' states (see there):
    returns (status, trans, accepting, start); status -1: `cap` states or more, -2: the deadline.

    A closure state (accepting in its copy, continuing into the copies that leave its target node)
    stands for its closure, so its row becomes that subset's; the part of the row its node's entry
    copies give is worked out once per node. Other subset states are keyed by their sorted members."""
    total, k = trans.shape
    num_nodes = len(node_fin)
    fin = np.zeros(total, np.bool_)
    is_closure = np.zeros(total, np.bool_)
    for q in range(total):
        if copy_acc[q]:
            u = node_of[q]
            fin[q] = node_fin[u]
            is_closure[q] = entry_ptr[u + 1] > entry_ptr[u]
    # per node and class: how many entry copies move (0, 1, 2 = several) and where, if one does
    node_live = np.zeros((num_nodes, k), np.int8)
    node_row = np.full((num_nodes, k), -1, np.int32)
    for u in range(num_nodes):
        for i in range(entry_ptr[u], entry_ptr[u + 1]):
            for c in range(k):
                t = trans[entry_states[i], c]
                if t >= 0 and node_live[u, c] < 2:
                    node_live[u, c] += 1
                    node_row[u, c] = t
    start_acc = start_final
    for q in start_members:
        start_acc |= fin[q]
    table = dict()  # hash of (members, acceptance), probed linearly -> slot
    table[np.int64(-1)] = np.int64(-1)
    slot_id = [np.int64(0)]
    slot_acc = [False]
    mem_ptr = [np.int64(0)]
    mem = [np.int64(0)]
    slot_id.clear()
    slot_acc.clear()
    mem.clear()
    out = trans.copy()
    extra = np.full((16, k), -1, np.int32)
    extra_acc = np.zeros(16, np.bool_)
    n_extra = 0
    buf = np.empty(total + 16, np.int64)
    targets = np.empty(total + 1, np.int64)
    seen_target = np.full(total, -1, np.int64)  # per (state, class) visit: target already counted
    seen_member = np.full(total, -1, np.int64)
    visit = 0
    row = np.empty(k, np.int32)

    def lookup(members, acc):  # (slot of (members, acc) or -1, the free hash to put it at)
        h = _members_hash(members, acc)
        while h in table:
            s = table[h]
            if s >= 0 and slot_acc[s] == acc and mem_ptr[s + 1] - mem_ptr[s] == len(members):
                same = True
                for i in range(len(members)):
                    if mem[mem_ptr[s] + i] != members[i]:
                        same = False
                        break
                if same:
                    return s, h
            h += 1
        return -1, h

    def add(members, acc, ident, h):
        table[h] = np.int64(len(slot_id))
        slot_id.append(ident)
        slot_acc.append(acc)
        for q in members:
            mem.append(q)
        mem_ptr.append(np.int64(len(mem)))

    todo = [np.int64(0)]  # (state id, first member in mem or -1 for a closure state, member count)
    todo.clear()
    for q in range(total):  # a closure state's members are read from its node when needed
        if is_closure[q]:
            todo.append(np.int64(q))
            todo.append(np.int64(-1))
            todo.append(np.int64(0))
    if len(start_members) == 1 and not is_closure[start_members[0]] and fin[start_members[0]] == start_acc:
        start = np.int64(start_members[0])
    else:
        s, h = lookup(start_members, start_acc)
        q = -1 if s >= 0 else _closure_with(start_members, start_acc, fin, is_closure, node_of, entry_ptr, entry_states)
        if s >= 0:
            start = slot_id[s]
        elif q >= 0:
            start = np.int64(q)
            add(start_members, start_acc, start, h)
        else:
            start = np.int64(total)
            add(start_members, start_acc, start, h)
            todo.append(start)
            todo.append(mem_ptr[-2])
            todo.append(np.int64(len(start_members)))
            n_extra = 1
            extra_acc[0] = start_acc
    head = 0
    while head < len(todo):
        if head and head % 3072 == 0:  # every 1,024 states (three entries each)
            with _numba.objmode(late="boolean"):
                late = _deadline_passed()
            if late:
                return -2, out, fin, start
        j, at, count = todo[head], todo[head + 1], todo[head + 2]
        head += 3
        for c in range(k):
            if j < total and is_closure[j]:  # the copy's own move and its node's entries'
                u, own = node_of[j], trans[j, c]
                if node_live[u, c] == 0 or (own < 0 and node_live[u, c] == 1):
                    row[c] = own if node_live[u, c] == 0 else node_row[u, c]
                    continue
            visit += 1
            nt = 0
            if at < 0:  # a closure state: itself, then its node's entries
                first, last = entry_ptr[node_of[j]] - 1, entry_ptr[node_of[j] + 1]
            else:
                first, last = at, at + count
            for i in range(first, last):
                m = (j if i < entry_ptr[node_of[j]] else entry_states[i]) if at < 0 else mem[i]
                t = trans[m, c]
                if t >= 0 and seen_target[t] != visit:
                    seen_target[t] = visit
                    targets[nt] = t
                    nt += 1
            if nt <= 1:  # one target: its own state (a closure state's row is its subset's)
                row[c] = targets[0] if nt else -1
                continue
            end = 0
            acc = False
            for x in range(nt):
                t = targets[x]
                need = end + 1 + (entry_ptr[node_of[t] + 1] - entry_ptr[node_of[t]] if is_closure[t] else 0)
                if need > len(buf):
                    grown_buf = np.empty(2 * need, np.int64)
                    grown_buf[:end] = buf[:end]
                    buf = grown_buf
                before = end
                end = _closure_of(t, node_of, entry_ptr, entry_states, is_closure, buf, end)
                kept = before
                for y in range(before, end):  # drop members already in the union
                    if seen_member[buf[y]] != visit:
                        seen_member[buf[y]] = visit
                        buf[kept] = buf[y]
                        kept += 1
                end = kept
                acc |= fin[t]
            members = np.sort(buf[:end])
            s, h = lookup(members, acc)
            if s >= 0:
                row[c] = slot_id[s]
                continue
            q = _closure_with(members, acc, fin, is_closure, node_of, entry_ptr, entry_states)
            if q >= 0:  # the members of a closure state: that state itself
                add(members, acc, q, h)
                row[c] = q
                continue
            ident = total + n_extra
            if ident >= cap:
                return -1, out, fin, start
            add(members, acc, np.int64(ident), h)
            if n_extra == len(extra_acc):
                grown = np.full((2 * n_extra, k), -1, np.int32)
                grown[:n_extra] = extra
                extra = grown
                grown_acc = np.zeros(2 * n_extra, np.bool_)
                grown_acc[:n_extra] = extra_acc
                extra_acc = grown_acc
            extra_acc[n_extra] = acc
            n_extra += 1
            todo.append(np.int64(ident))
            todo.append(mem_ptr[-2])
            todo.append(np.int64(len(members)))
            row[c] = ident
        if j < total:
            out[j] = row
        else:
            extra[j - total] = row
    return 0, np.concatenate((out, extra[:n_extra])), np.concatenate((fin, extra_acc[:n_extra])), start


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
    for c in range(cols):
        x = np.uint64(0xCBF29CE484222325)
        for r in range(rows):
            x = (x ^ np.uint64(mat[r, c] + 2)) * np.uint64(0x100000001B3)
        h = np.int64(x >> np.uint64(1))
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
