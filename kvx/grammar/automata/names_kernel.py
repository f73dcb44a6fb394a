"""key_names.body_without_names in one compiled call: a body's table with a trie of rows after it,
their byte classes, and the merge of the trie's equal rows (minimise_kernel.tree_minimal_rows).

As numpy calls (a unique, a dozen fancy writes, the classes of a [rows, 256] table) a name set cost
~0.2 ms whatever its size, and a median schema builds three. The table is the one those calls give.
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
    trans = np.empty((total, 256), np.int32)
    trans[:nb] = body
    accepting = np.zeros(total, np.bool_)
    accepting[:nb] = body_acc
    for t in range(nodes):
        r = base[t]
        for kind in range(ESCAPE_ROWS):
            trans[r + kind] = template[kind]
        for kind in range(ESCAPE_ROWS - 1):
            trans[r + kind, hop_bytes[kind]] = r + kind + 1
        for h in range(8):
            if nibble_row[t, h] >= 0:
                trans[nibble_row[t, h]] = template[ESCAPE_ROWS + h]
                trans[r + ESCAPE_ROWS - 1, 48 + h] = nibble_row[t, h]
        accepting[r] = not is_name[t]
    for e in range(len(parent)):
        c, at, target = code[e], base[parent[e]], base[child[e]]
        if c >= 0x20 and c != 0x22 and c != 0x5C:
            trans[at, c] = target
        if short_byte[c] >= 0:
            trans[at + 1, short_byte[c]] = target
        after = nibble_row[parent[e], c >> 4]
        trans[after, hex_lower[c & 15]] = target
        trans[after, hex_upper[c & 15]] = target
    reps, cob = column_classes(trans)
    table = np.empty((total, len(reps)), np.int32)
    for s in range(total):
        for j in range(len(reps)):
            table[s, j] = trans[s, reps[j]]
    out, acc = tree_minimal_rows(table, accepting, base[0], nb)
    return out, acc, cob
