"""DFA minimisation compiled with numba: Hopcroft's partition refinement, O(k n log n).

Moore's rounds (the numpy version in determinize.py) cost one pass over the table per
distinguishing length: a 128-character bound on a key name is 128 passes over a product of a
thousand states. Hopcroft refines by splitters instead: each state is in a splitter O(log n) times.

The result does not depend on the algorithm: the coarsest partition that separates accepting from
rejecting states and a move from no move (-1, the dead state, a block of its own, so a state with no
way out is kept as a state, as Moore keeps it), numbered breadth-first from the start with one row
per block; so tables are identical to Moore's.
"""
from __future__ import annotations

import numpy as np

from kvx.grammar.automata.jit import jit as _jit


@_jit
def minimal_rows(trans, accepting, start):  # pragma: no cover - compiled
    """(trans [m, k] int32, accepting [m]) of the minimal DFA, breadth-first numbered (start = 0)."""
    n, k = trans.shape
    big = n + 1  # state n stands for -1
    # predecessors by (target, class): preds[ptr[t * k + c]:ptr[t * k + c + 1]]
    ptr = np.zeros(big * k + 1, np.int64)
    for s in range(n):
        for c in range(k):
            t = trans[s, c]
            ptr[(t if t >= 0 else n) * k + c + 1] += 1
    for i in range(big * k):
        ptr[i + 1] += ptr[i]
    fill = ptr[:-1].copy()
    preds = np.empty(ptr[-1], np.int64)
    for s in range(n):
        for c in range(k):
            t = trans[s, c]
            j = (t if t >= 0 else n) * k + c
            preds[fill[j]] = s
            fill[j] += 1
    # blocks are ranges of `elems`: first[b] <= marked ones < mid[b] <= the rest < end[b]
    elems = np.empty(big, np.int64)
    pos = np.empty(big, np.int64)
    blk = np.empty(big, np.int64)
    first = np.zeros(big, np.int64)
    mid = np.zeros(big, np.int64)
    end = np.zeros(big, np.int64)
    count = 0
    i = 0
    for kind in range(3):  # rejecting, accepting, dead
        begin = i
        for s in range(big):
            if (2 if s == n else (1 if accepting[s] else 0)) == kind:
                elems[i] = s
                pos[s] = i
                blk[s] = count
                i += 1
        if i > begin:
            first[count], mid[count], end[count] = begin, begin, i
            count += 1
    work = np.empty(big, np.int64)
    in_work = np.zeros(big, np.bool_)
    top = 0
    largest = 0
    for b in range(count):
        if end[b] - first[b] > end[largest] - first[largest]:
            largest = b
    for b in range(count):  # all but the largest: a block stable under the others is under it too
        if b != largest:
            work[top] = b
            in_work[b] = True
            top += 1
    splitter = np.empty(big, np.int64)
    touched = np.empty(big, np.int64)
    while top > 0:
        top -= 1
        b = work[top]
        in_work[b] = False
        size = end[b] - first[b]
        splitter[:size] = elems[first[b]:end[b]]  # its states now: splits below do not change them
        for c in range(k):
            num_touched = 0
            for a in range(size):
                j = splitter[a] * k + c
                for p in range(ptr[j], ptr[j + 1]):
                    s = preds[p]
                    x = blk[s]
                    at = pos[s]
                    if at < mid[x]:
                        continue  # marked already
                    if mid[x] == first[x]:
                        touched[num_touched] = x
                        num_touched += 1
                    other = elems[mid[x]]  # swap s into the marked part
                    elems[at], elems[mid[x]] = other, s
                    pos[other], pos[s] = at, mid[x]
                    mid[x] += 1
            for t in range(num_touched):
                x = touched[t]
                if mid[x] == end[x]:  # all of it moves alike: no split
                    mid[x] = first[x]
                    continue
                y = count  # the marked part becomes block y
                count += 1
                first[y], mid[y], end[y] = first[x], first[x], mid[x]
                first[x] = mid[x]
                for a in range(first[y], end[y]):
                    blk[elems[a]] = y
                if in_work[x]:
                    work[top] = y
                    in_work[y] = True
                    top += 1
                else:
                    z = y if end[y] - first[y] <= end[x] - first[x] else x
                    work[top] = z
                    in_work[z] = True
                    top += 1
    # one row per block (its lowest state), numbered breadth-first from the start
    rep = np.full(count, -1, np.int64)
    for s in range(n):
        if rep[blk[s]] < 0:
            rep[blk[s]] = s
    number = np.full(count, -1, np.int64)
    order = np.empty(count, np.int64)
    order[0] = blk[start]
    number[blk[start]] = 0
    m, i = 1, 0
    while i < m:
        s = rep[order[i]]
        for c in range(k):
            t = trans[s, c]
            if t >= 0 and number[blk[t]] < 0:
                number[blk[t]] = m
                order[m] = blk[t]
                m += 1
        i += 1
    out = np.empty((m, k), np.int32)
    acc = np.empty(m, np.bool_)
    for i in range(m):
        s = rep[order[i]]
        acc[i] = accepting[s]
        for c in range(k):
            t = trans[s, c]
            out[i, c] = number[blk[t]] if t >= 0 else -1
    return out, acc


@_jit
def tree_minimal_rows(trans, accepting, start, first):  # pragma: no cover - compiled
    """minimal_rows for a table whose rows from `first` on form a tree part: each of their moves
    goes to a later row or to a row before `first`, and the rows before `first` are minimal
    (key_names: the plain string body, then the names' trie). Equal rows are merged, the rows
    before `first` taken as they are and the tree's from the last back, each compared once its
    targets are merged (a hash of the row, checked in full): O(n k) instead of Hopcroft's
    refinement, and the same table, numbered breadth-first from the start as minimal_rows numbers.
    `trans` is rewritten in place."""
    n, k = trans.shape
    canon = np.arange(n)
    size = 2
    while size < 2 * n + 2:
        size *= 2
    slots = np.full(size, -1, np.int64)
    for j in range(n):
        r = j if j < first else n - 1 - (j - first)  # the rows before `first`, then the tree backwards
        h = np.int64(1469598103934665603) if accepting[r] else np.int64(7)
        for c in range(k):
            t = trans[r, c]
            if t >= 0 and r >= first:
                t = canon[t]
                trans[r, c] = t
            h = (h ^ (t + 2)) * np.int64(1099511628211)
        i = h & (size - 1)
        while True:
            s = slots[i]
            if s < 0:
                slots[i] = r
                break
            same = accepting[s] == accepting[r]
            c = 0
            while same and c < k:
                same = trans[s, c] == trans[r, c]
                c += 1
            if same:
                canon[r] = s
                break
            i = (i + 1) & (size - 1)
    number = np.full(n, -1, np.int64)
    order = np.empty(n, np.int64)
    root = canon[start]
    order[0] = root
    number[root] = 0
    m, i = 1, 0
    while i < m:
        s = order[i]
        for c in range(k):
            t = trans[s, c]
            if t >= 0:
                t = canon[t]
                if number[t] < 0:
                    number[t] = m
                    order[m] = t
                    m += 1
        i += 1
    out = np.empty((m, k), np.int32)
    acc = np.empty(m, np.bool_)
    for i in range(m):
        s = order[i]
        acc[i] = accepting[s]
        for c in range(k):
            t = trans[s, c]
            out[i, c] = number[canon[t]] if t >= 0 else -1
    return out, acc
