"""Any JSON string body except some ASCII names, built directly.

Every object with extra keys needs the key space "any string but the declared names" (a declared
name spelled `"a\\/b"` must not come back as an extra `a/b`). The general way, the product of the
any-key body with the names' spellings, cost ~8 ms an object (a third of a typical schema's
compile). Built directly: the names' trie, one row per node, where a raw character that continues
a name goes to its child and any other character leaves the trie for the plain body (FREE:
whatever it has read so far, then any body). A printable ASCII character has no \\u spelling in a
string body (strings.py), so a name's characters are written raw or, for `/`, as `\\/`: a
backslash read in the trie goes to one escape row all nodes share, where `\\/` is refused if a name
holds `/` (the row cannot say which node it was read at) and every other escape leaves the trie.
So while a key still starts like a declared name, its `/` is written raw, as every JSON
serialiser writes it. Names holding a character JSON text must escape (`"`, `\\`, below U+0020),
DEL (json.dumps escapes it too) or one outside ASCII take the product (the caller's fallback),
which follows every spelling.
"""
from __future__ import annotations

import numpy as np

from kvx.grammar.automata import graph_kernels
from kvx.grammar.automata.cdfa import CDFA, column_classes, trie
from kvx.grammar.automata.dfa import DFA
from kvx.grammar.automata.dfa_ops import minimal
from kvx.grammar.schema import strings

PLAIN_ASCII = np.array([c for c in range(0x20, 0x80) if c not in (0x22, 0x5C)], dtype=np.int64)


def body_without_names(body: DFA, names: tuple[str, ...]) -> CDFA | None:
    """`body` minus every spelling of `names` and minus `\\/` where a key still starts like a name (if
    a name holds `/`); None where a name holds `"`, `\\` or a character outside U+0020-U+007E, or
    `body` is not the plain string body (its start, the state between characters, is checked). The
    rows are written in one compiled call (names_kernel.py), without numba with numpy."""
    alphabet = sorted({ord(ch) for name in names for ch in name})
    if alphabet and (alphabet[0] < 0x20 or alphabet[-1] > 0x7E or 0x22 in alphabet or 0x5C in alphabet):
        return None
    b, s0 = body.trans, body.start
    esc = int(b[s0, ord("\\")])
    if esc < 0 or (b[s0, PLAIN_ASCII] != s0).any():
        return None  # not a body whose start is the state between characters: the product decides
    children, is_name = trie(names)
    nb, nodes = b.shape[0], len(children)
    escape = nb + nodes  # the shared row after a backslash read in the trie
    row_body = np.array([s0] * nodes + [esc], dtype=np.int64)
    tree_acc = np.concatenate([~np.array(is_name), [False]])
    cells = [(nb + t, ord(ch), nb + c) for t, kids in enumerate(children) for ch, c in kids.items()]
    cells += [(nb + t, ord("\\"), escape) for t in range(nodes)]
    cells += [(escape, esc_bytes[1], -1) for cp, esc_bytes in strings.SHORT_ESCAPES.items() if cp in alphabet]
    cell_row, cell_byte, cell_to = np.array(cells, dtype=np.int64).reshape(-1, 3).T.copy()  # each contiguous
    compiled = graph_kernels.kernels()
    if compiled is not None:  # the rows, their classes and the tree's merge in one call
        out, acc, cob = compiled.tree_over_body(np.ascontiguousarray(b, dtype=np.int32), body.accepting.astype(bool),
                                                row_body, tree_acc, cell_row, cell_byte, cell_to)
        return CDFA(out, acc, 0, cob)
    trans = np.concatenate([b, b[row_body]]).astype(np.int32)
    trans[cell_row, cell_byte] = cell_to
    accepting = np.concatenate([body.accepting.astype(bool), tree_acc])
    # every row is reachable from the root and can still end the body: no trimming walk needed
    reps, cob = column_classes(trans)
    return minimal(np.ascontiguousarray(trans[:, reps]), accepting, nb, cob)
