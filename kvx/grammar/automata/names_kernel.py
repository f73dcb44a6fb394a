"""key_names.body_without_names in one compiled call: a body's table with a trie of rows after it,
their byte classes, and the merge of the trie's equal rows (minimise_kernel.tree_minimal_rows).

As numpy calls (a unique, a dozen fancy writes, the classes of a [rows, 256] table) a name set cost
~0.2 ms whatever its size, and a median schema builds three. The table is the one those calls give
(the numpy steps stay in key_names.py for installs without numba).
"""
from __future__ import annotations

import numpy as np

from kvx.grammar.automata.jit import jit as _jit
from kvx.grammar.automata.minimise_kernel import tree_minimal_rows
from kvx.grammar.automata.table_kernels import column_classes

ESCAPE_ROWS = 5  # rows per trie node before its nibble rows: between characters, \, \u, \u0, \u00


@_jit
def trie_after_body(body, body_acc, template, hop_bytes, parent, code, child, is_name, short_byte, hex_lower,
                    hex_upper):  # pragma: no cover - compiled
    """(trans [m, k] int32, accepting [m], class of each byte) of the body with the trie's rows after
    it, minimal, the start (the trie's root) numbered 0.

    Trie node t has ESCAPE_ROWS rows, a copy of template rows 0-4 each (the body's rows between
    characters, after \\, \\u, \\u0, \\u00), which move on hop_bytes[0-3] to the node's next row and
    on `0` + h from the \\u00 row to a row of its own for each high nibble h its children's codes
    use (a copy of template row 5 + h, in nibble order). Edge e (parent, code, child) leads the
    parent's spellings of `code` (raw where plain, short escape, \\u00XX in either hex case) to the
    child's first row. A node is accepting unless a name ends there."""
    nb = body.shape[0]
    nodes = len(is_name)
    uses = np.zeros((nodes, 8), np.bool_)
    for e in range(len(parent)):
        uses[parent[e], code[e] >> 4] = True
    base = np.empty(nodes + 1, np.int64)
    base[0] = nb
    nibble_row = np.full((nodes, 8), -1, np.int64)
    for t in range(nodes):
        r = base[t] + ESCAPE_ROWS
        for h in range(8):
            if uses[t, h]:
                nibble_row[t, h] = r
                r += 1
        base[t + 1] = r
    total = base[nodes]
    # the columns the trie's rows write apart from their template (each such cell a trie row, never a
    # body state): every other column is in every row a copy of a body row's, so two of those are
    # alike where the body's rows are; the written ones are compared whole. The classes come out as
    # those of the whole [rows, 256] table (numbered by first byte), without writing it (the median
    # band's name sets, ~56 characters: 207 -> 133 us a set with the Python around the call)
    cell_row, cell_byte, cell_to = _trie_cells(base, nibble_row, hop_bytes, parent, code, child, short_byte,
                                               hex_lower, hex_upper)
    written = np.zeros(256, np.bool_)
    written[cell_byte] = True
    at_written = np.full(256, -1, np.int64)
    wcols = np.flatnonzero(written)
    n_written = len(wcols)
    at_written[wcols] = np.arange(n_written)
    row_kind = np.empty(total - nb, np.int64)  # the template row each trie row copies
    accepting = np.zeros(total, np.bool_)
    accepting[:nb] = body_acc
    for t in range(nodes):
        r = base[t]
        for kind in range(ESCAPE_ROWS):
            row_kind[r + kind - nb] = kind
        for h in range(8):
            if nibble_row[t, h] >= 0:
                row_kind[nibble_row[t, h] - nb] = ESCAPE_ROWS + h
        accepting[r] = not is_name[t]
    cols = np.empty((total, n_written), np.int32)  # the written columns, whole
    for r in range(total):
        src = body[r] if r < nb else template[row_kind[r - nb]]
        for x in range(n_written):
            cols[r, x] = src[wcols[x]]
    for i in range(len(cell_row)):
        cols[cell_row[i], at_written[cell_byte[i]]] = cell_to[i]
    # classes: a column is its body rows (not written) or its whole written column; the two kinds differ
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
    for r in range(total):  # row by row: each class from its written column, or its body or template row
        src = body[r] if r < nb else template[row_kind[r - nb]]
        for j in range(k):
            x = at_written[reps[j]]
            table[r, j] = cols[r, x] if x >= 0 else src[reps[j]]
    out, acc = tree_minimal_rows(table, accepting, base[0], nb)
    return out, acc, cob


@_jit
def _trie_cells(base, nibble_row, hop_bytes, parent, code, child, short_byte, hex_lower,
                hex_upper):  # pragma: no cover - compiled
    """The cells the trie's rows write over their template rows, as (row, byte, target) arrays: each
    node's hops from its first row to its \\u00 row and from there to its nibble rows, and each edge's
    spellings of its code (raw where plain, short escape, \\u00XX in either hex case) to the child."""
    nodes = len(base) - 1
    size = nodes * (ESCAPE_ROWS - 1 + 8) + 4 * len(parent)
    rows = np.empty(size, np.int64)
    bytes_ = np.empty(size, np.int64)
    to = np.empty(size, np.int64)
    n = 0
    for t in range(nodes):
        r = base[t]
        for kind in range(ESCAPE_ROWS - 1):
            rows[n], bytes_[n], to[n] = r + kind, hop_bytes[kind], r + kind + 1
            n += 1
        for h in range(8):
            if nibble_row[t, h] >= 0:
                rows[n], bytes_[n], to[n] = r + ESCAPE_ROWS - 1, 48 + h, nibble_row[t, h]
                n += 1
    for e in range(len(parent)):
        c, at, target = code[e], base[parent[e]], base[child[e]]
        after = nibble_row[parent[e], c >> 4]
        if c >= 0x20 and c != 0x22 and c != 0x5C:
            rows[n], bytes_[n], to[n] = at, c, target
            n += 1
        if short_byte[c] >= 0:
            rows[n], bytes_[n], to[n] = at + 1, short_byte[c], target
            n += 1
        rows[n], bytes_[n], to[n] = after, hex_lower[c & 15], target
        rows[n + 1], bytes_[n + 1], to[n + 1] = after, hex_upper[c & 15], target
        n += 2
    return rows[:n], bytes_[:n], to[:n]
