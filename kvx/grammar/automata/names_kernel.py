"""key_names.body_without_names in one compiled call: the rows of a tree written over copies of a
body's rows (the names' trie and its escape row), their byte classes, and the merge of the tree's
equal rows (minimise_kernel.tree_minimal_rows).

As numpy calls (a [rows, 256] table, its column classes, Moore's rounds) a name set cost ~0.2 ms
whatever its size, and a median schema builds three. The table is the one those calls give (the
numpy steps stay in key_names.py for installs without numba).
"""
from __future__ import annotations

import numpy as np

from kvx.grammar.automata.jit import jit as _jit
from kvx.grammar.automata.minimise_kernel import tree_minimal_rows
from kvx.grammar.automata.table_kernels import column_classes


@_jit
def tree_over_body(body, body_acc, row_body, tree_acc, cell_row, cell_byte, cell_to):  # pragma: no cover - compiled
    """(trans [m, k] int32, accepting [m], class of each byte) of the body's rows followed by tree
    row i (numbered nb + i), a copy of body row row_body[i] but for the cells (cell_row, cell_byte)
    written cell_to; minimal, the first tree row (the start) numbered 0. Each tree row's writes
    lead to a later tree row, to -1 or into the body (tree_minimal_rows's condition)."""
    nb = body.shape[0]
    total = nb + len(row_body)
    # the written columns are compared whole; every other column is in every tree row a copy of a body
    # row's, so two of those are alike where the body's columns are. The classes come out as those of
    # the whole [rows, 256] table (numbered by first byte), without writing it
    written = np.zeros(256, np.bool_)
    written[cell_byte] = True
    at_written = np.full(256, -1, np.int64)
    wcols = np.flatnonzero(written)
    n_written = len(wcols)
    at_written[wcols] = np.arange(n_written)
    cols = np.empty((total, n_written), np.int32)
    for r in range(total):
        src = body[r] if r < nb else body[row_body[r - nb]]
        for x in range(n_written):
            cols[r, x] = src[wcols[x]]
    for i in range(len(cell_row)):
        cols[cell_row[i], at_written[cell_byte[i]]] = cell_to[i]
    hashes = np.full(n_written, np.uint64(0xCBF29CE484222325))
    for r in range(total):
        for x in range(n_written):
            hashes[x] = (hashes[x] ^ np.uint64(cols[r, x] + 2)) * np.uint64(0x100000001B3)
    _, plain_class = column_classes(body)
    cob = np.empty(256, np.int64)
    reps = np.empty(256, np.int64)
    of_plain = np.full(256, -1, np.int64)
    k = 0
    for b in range(256):
        if not written[b]:
            if of_plain[plain_class[b]] < 0:
                of_plain[plain_class[b]] = k
                reps[k] = b
                k += 1
            cob[b] = of_plain[plain_class[b]]
            continue
        found = -1
        y = at_written[b]
        for j in range(k):
            x = at_written[reps[j]]
            if x >= 0 and hashes[x] == hashes[y]:
                same = True
                for r in range(total):
                    if cols[r, x] != cols[r, y]:
                        same = False
                        break
                if same:
                    found = j
                    break
        if found < 0:
            found = k
            reps[k] = b
            k += 1
        cob[b] = found
    table = np.empty((total, k), np.int32)
    for r in range(total):  # row by row: each class from its written column, or its body row
        src = body[r] if r < nb else body[row_body[r - nb]]
        for j in range(k):
            x = at_written[reps[j]]
            table[r, j] = cols[r, x] if x >= 0 else src[reps[j]]
    accepting = np.empty(total, np.bool_)
    accepting[:nb] = body_acc
    accepting[nb:] = tree_acc
    out, acc = tree_minimal_rows(table, accepting, nb, nb)
    return out, acc, cob
