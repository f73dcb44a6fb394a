"""The compiled loops over one state table that several kernels share: its live cells, reachability,
the states a trim keeps, a table restricted to some of its states, the byte classes of identical
columns, and its rows spread over other columns (graph_kernels.py lists them for the Python callers; network_kernel.py runs them inside its call)."""
from __future__ import annotations

import numpy as np

from kvx.grammar.automata.jit import jit as _jit


@_jit
def live_cells(trans):  # pragma: no cover - compiled
    """The table's moves row by row (a CSR): row q's are cells cell_ptr[q]:cell_ptr[q + 1], each a
    (class, target) in class order."""
    n, k = trans.shape
    cell_ptr = np.zeros(n + 1, np.int64)
    for q in range(n):
        moves = 0
        for c in range(k):
            moves += trans[q, c] >= 0
        cell_ptr[q + 1] = cell_ptr[q] + moves
    cell_class = np.empty(cell_ptr[n], np.int64)
    cell_target = np.empty(cell_ptr[n], np.int64)
    for q in range(n):
        e = cell_ptr[q]
        for c in range(k):
            if trans[q, c] >= 0:
                cell_class[e], cell_target[e] = c, trans[q, c]
                e += 1
    return cell_ptr, cell_class, cell_target


@_jit
def members_hash(members, flag):  # pragma: no cover - compiled
    """FNV-1a over a subset state's sorted members, seeded by a flag (its acceptance), as a
    non-negative int64: the subset loops' hash-table key."""
    x = np.uint64(0xCBF29CE484222325) ^ np.uint64(flag)
    for q in members:
        x = (x ^ np.uint64(q)) * np.uint64(0x100000001B3)
    return np.int64(x >> np.uint64(1))


@_jit
def sort_prefix(a, n):  # pragma: no cover - compiled
    """Sort a[:n] in place: by insertion for a few items (a subset state's members: numba's np.sort
    allocates a copy each call, the most of a small union's time), else np.sort."""
    if n > 32:
        a[:n] = np.sort(a[:n])
        return
    for j in range(1, n):
        v = a[j]
        m = j - 1
        while m >= 0 and a[m] > v:
            a[m + 1] = a[m]
            m -= 1
        a[m + 1] = v


@_jit
def csr(n, src, dst):  # pragma: no cover - compiled
    """The edges src[i] -> dst[i] of n nodes by source: node s's targets are
    targets[ptr[s]:ptr[s + 1]], in the order the edges are listed."""
    ptr = np.zeros(n + 1, np.int64)
    for i in range(len(src)):
        ptr[src[i] + 1] += 1
    for i in range(n):
        ptr[i + 1] += ptr[i]
    fill = ptr[:-1].copy()
    targets = np.empty(len(src), np.int64)
    for i in range(len(src)):
        targets[fill[src[i]]] = dst[i]
        fill[src[i]] += 1
    return ptr, targets


@_jit
def reach(n, src, dst, seeds):  # pragma: no cover - compiled
    counts, targets = csr(n, src, dst)
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
def trim_keep(trans, accepting, start, all_live):  # pragma: no cover - compiled
    """cdfa.trim's states: those reachable from `start` through states that can reach acceptance
    (`all_live`: the caller knows every state can), read off the table (no deduplicated pair list:
    a third of a second on a 100,000-state product). All False when `start` cannot."""
    n, k = trans.shape
    if all_live:
        live = np.ones(n, np.bool_)
    else:  # backwards from the accepting states
        cell_ptr, _, cell_target = live_cells(trans)
        source = np.empty(len(cell_target), np.int64)
        for s in range(n):
            source[cell_ptr[s]:cell_ptr[s + 1]] = s
        live = reach(n, cell_target, source, np.flatnonzero(accepting))
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
def column_classes(mat):  # pragma: no cover - compiled
    """cdfa.column_classes: (first column of each class, class of each column), the classes of
    identical columns numbered by their first column."""
    rows, cols = mat.shape
    of = np.empty(cols, np.int64)
    firsts = np.empty(cols, np.int64)
    classes = 0
    size = 1
    while size < 2 * cols:
        size *= 2
    slots = np.full(size, -1, np.int64)  # column hash, probed linearly -> class (an array: numba's dict
    hashes = np.full(cols, np.uint64(0xCBF29CE484222325))  # cost 7 us a call over 256 columns)
    for r in range(rows):  # row by row, in memory order: a tall table's columns are strided
        for c in range(cols):
            hashes[c] = (hashes[c] ^ np.uint64(mat[r, c] + 2)) * np.uint64(0x100000001B3)
    for c in range(cols):
        h = np.int64(hashes[c] & np.uint64(size - 1))
        found = -1
        while slots[h] >= 0:
            k = slots[h]
            same = True
            for r in range(rows):
                if mat[r, firsts[k]] != mat[r, c]:
                    same = False
                    break
            if same:
                found = k
                break
            h = (h + 1) & (size - 1)
        if found < 0:
            found = classes
            slots[h] = classes
            firsts[classes] = c
            classes += 1
        of[c] = found
    return firsts[:classes].copy(), of


@_jit
def keep_rows(table, accepting, keep):  # pragma: no cover - compiled
    """The table restricted to the `keep` states, renumbered in order (a move into another state
    becomes -1): (table int32, acceptance, the new number of each old state or -1)."""
    n, k = table.shape
    remap = np.full(n, -1, np.int64)
    kept = 0
    for s in range(n):
        if keep[s]:
            remap[s] = kept
            kept += 1
    out = np.empty((kept, k), np.int32)
    out_acc = np.empty(kept, np.bool_)
    for s in range(n):
        if keep[s]:
            out_acc[remap[s]] = accepting[s]
            for c in range(k):
                t = table[s, c]
                out[remap[s], c] = remap[t] if t >= 0 else -1
    return out, out_acc, remap


@_jit
def spread(table, columns, offset, out):  # pragma: no cover - compiled
    """out[s, j] = table[s, columns[j]] + offset (-1 stays -1): a rule body's rows in the program's
    classes, or a byte-class table's over the bytes (each row shifted first, then spread without a
    test per column)."""
    row = np.empty(table.shape[1], out.dtype)
    for s in range(table.shape[0]):
        for c in range(table.shape[1]):
            t = table[s, c]
            row[c] = t + offset if t >= 0 else -1
        for j in range(len(columns)):
            out[s, j] = row[columns[j]]
