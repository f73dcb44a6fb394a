"""A DFA some of whose columns are read as empty moves, determinised again, as one compiled loop.

word_bounds.resolve reads a `\\b` pattern's marker bytes this way. Its marked automaton can hold tens
of thousands of states (as-code's URL pattern: 20,126 over 48 byte classes, once no printable ASCII
character has a `\\u` spelling); written out as a graph for the composer (a Python loop over its
[states, 256] table, 3.0 s) and composed (2.3 s), it reached the 50,000-state cap in 5.4 s; here in
0.11 s. A subset state is the sorted set of the table's states its empty moves close over (a few at
most: markers sit at a pattern's boundaries), kept in an open-addressing hash table; states are
numbered in the order they are met, breadth-first.
"""
from __future__ import annotations

import numpy as np

from kvx.grammar.automata.jit import jit as _jit
from kvx.grammar.automata.kernel_deadline import deadline_passed
from kvx.grammar.automata.table_kernels import members_hash, sort_prefix


@_jit
def _push(q, mark, stamp, stack, top):  # pragma: no cover - compiled
    """Put q on the stack unless this closure (`mark`) has seen it; the new top."""
    if stamp[q] != mark:
        stamp[q] = mark
        stack[top] = q
        top += 1
    return top


@_jit
def _grown(a, need):  # pragma: no cover - compiled
    if need <= len(a):
        return a
    out = np.empty(max(need, 2 * len(a)), a.dtype)
    out[: len(a)] = a
    return out


@_jit
def _grown_rows(a, need):  # pragma: no cover - compiled
    if need <= a.shape[0]:
        return a
    out = np.empty((max(need, 2 * a.shape[0]), a.shape[1]), a.dtype)
    out[: a.shape[0]] = a
    return out


@_jit
def without_empty_moves(table, accepting, start, eps_ptr, eps_dst, max_states, look_every):  # pragma: no cover - compiled
    """`table` [n, k]: the moves over byte classes (the empty moves' classes already -1); state q's
    empty moves lead to eps_dst[eps_ptr[q]:eps_ptr[q + 1]]. Returns (status, rows [m, k], accepting
    [m]): status 0, -1 past `max_states` subset states, -2 past the compile's deadline."""
    n, k = table.shape
    stamp = np.zeros(n, np.int64)  # a closure's "seen" mark: the closure's number
    round_ = 0
    stack = np.empty(n, np.int64)
    buf = np.empty(n, np.int64)
    seeds = np.empty(n, np.int64)
    single = np.full(n, -1, np.int64)  # the state of {q}, for q without empty moves (most targets)
    mem = np.empty(1024, np.int64)
    mem_ptr = np.zeros(257, np.int64)
    rows = np.full((256, k), -1, np.int32)
    acc = np.zeros(256, np.bool_)
    slots = np.full(1 << 10, -1, np.int64)
    count = 0
    work, next_look = 0, look_every
    num_seeds = 1
    seeds[0] = start
    i, c = -1, 0  # the state and class whose move is being worked out (-1: the start, made first)
    while True:
        q = seeds[0]
        found = -1
        if num_seeds == 1 and eps_ptr[q] == eps_ptr[q + 1]:
            found = single[q]
            buf[0] = q
            size = 1
        else:  # the closure of the seeds over empty moves, sorted
            round_ += 1
            top = 0
            size = 0
            for j in range(num_seeds):
                top = _push(seeds[j], round_, stamp, stack, top)
            while top > 0:
                top -= 1
                q = stack[top]
                buf[size] = q
                size += 1
                for e in range(eps_ptr[q], eps_ptr[q + 1]):
                    top = _push(eps_dst[e], round_, stamp, stack, top)
            sort_prefix(buf, size)
            work += size
        if found < 0:  # look it up, or make it
            h = members_hash(buf[:size], False) & (len(slots) - 1)
            while slots[h] >= 0:
                s = slots[h]
                if mem_ptr[s + 1] - mem_ptr[s] == size:
                    same = True
                    for j in range(size):
                        if mem[mem_ptr[s] + j] != buf[j]:
                            same = False
                            break
                    if same:
                        found = s
                        break
                h = (h + 1) & (len(slots) - 1)
        if found < 0:
            if count >= max_states:
                return -1, rows[:count], acc[:count]
            found = count
            count += 1
            slots[h] = found
            if size == 1 and eps_ptr[buf[0]] == eps_ptr[buf[0] + 1]:
                single[buf[0]] = found
            mem = _grown(mem, mem_ptr[found] + size)
            mem[mem_ptr[found] : mem_ptr[found] + size] = buf[:size]
            mem_ptr = _grown(mem_ptr, count + 1)
            mem_ptr[count] = mem_ptr[found] + size
            rows = _grown_rows(rows, count)
            rows[found] = -1
            acc = _grown(acc, count)
            acc[found] = False
            for j in range(size):
                if accepting[buf[j]]:
                    acc[found] = True
            if 2 * count > len(slots):  # keep the hash table at most half full
                slots = np.full(2 * len(slots), -1, np.int64)
                for s in range(count):
                    hs = members_hash(mem[mem_ptr[s] : mem_ptr[s + 1]], False) & (len(slots) - 1)
                    while slots[hs] >= 0:
                        hs = (hs + 1) & (len(slots) - 1)
                    slots[hs] = s
        if i >= 0:
            rows[i, c] = found
        # the next (state, class) with a move: its targets are the seeds
        num_seeds = 0
        while num_seeds == 0:
            c += 1
            if i < 0 or c == k:
                i += 1
                c = 0
                if i == count:
                    return 0, rows[:count], acc[:count]
            if work >= next_look:
                next_look = work + look_every
                if deadline_passed():
                    return -2, rows[:count], acc[:count]
            work += 1
            for e in range(mem_ptr[i], mem_ptr[i + 1]):
                t = table[mem[e], c]
                if t >= 0:
                    seeds[num_seeds] = t
                    num_seeds += 1
