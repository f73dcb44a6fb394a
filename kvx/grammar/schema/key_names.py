"""Any JSON string body except some ASCII names, built directly.

Every object with extra keys needs the key space "any string but the declared names" (a declared
name spelled `"\\u0061"` must not come back as an extra `a`). The general way, the product of the
any-key body with the names' spellings, cost ~8 ms an object (a third of a typical schema's
compile). Built directly: the names' trie, one row per node, where a raw character that continues
a name goes to its child and any other character leaves the trie for the plain body (FREE:
whatever it has read so far, then any body).

Escapes inside the trie: while the key read so far is still the start of a declared name, a
character that occurs in some declared name must be written raw (as every JSON serialiser writes
a printable ASCII character), not as `\\/` or `\\u00XX`; an escape of any other character leaves the
trie. That keeps the escapes in a few rows shared by every node (the escape's bytes cannot say
which node they were read at, so no escape may continue a name): mocharc's 38 names are 194 states
where following every spelling through the trie took 1,024, and each object body holding them as
many. Names holding a character JSON text must escape (`"`, `\\`, below U+0020), DEL (json.dumps
escapes it too) or one outside ASCII take the product (the caller's fallback), which follows every
spelling.
"""
from __future__ import annotations

import numpy as np

from kvx.grammar.automata import graph_kernels
from kvx.grammar.automata.cdfa import CDFA, column_classes, trie
from kvx.grammar.automata.dfa import DFA
from kvx.grammar.automata.dfa_ops import minimal
from kvx.grammar.schema import strings

# code point (ASCII) -> the byte after the backslash of its short escape, or -1
SHORT_ESCAPE_BYTE = np.full(128, -1, dtype=np.int64)
SHORT_ESCAPE_BYTE[list(strings.SHORT_ESCAPES)] = [esc[1] for esc in strings.SHORT_ESCAPES.values()]
HEX_DIGITS = b"0123456789abcdef"
PLAIN_ASCII = np.array([c for c in range(0x20, 0x80) if c not in (0x22, 0x5C)], dtype=np.int64)
# the shared escape rows after the trie's: after \, \u, \u0, \u00, then after \u00h for each h in 0-7
ESCAPE, AFTER_U, AFTER_U0, AFTER_U00, AFTER_NIBBLE = range(5)


def body_without_names(body: DFA, names: tuple[str, ...]) -> CDFA | None:
    """`body` minus every spelling of `names` and minus the escapes the module docstring names; None
    where a name holds `"`, `\\` or a character outside U+0020-U+007E, or `body` is not the plain
    string body (its start, the state between characters, is checked). The rows are written in one
    compiled call (names_kernel.py), without numba with numpy."""
    alphabet = sorted({ord(ch) for name in names for ch in name})
    if alphabet and (alphabet[0] < 0x20 or alphabet[-1] > 0x7E or 0x22 in alphabet or 0x5C in alphabet):
        return None
    b, s0 = body.trans, body.start
    esc = int(b[s0, ord("\\")])
    u = int(b[esc, ord("u")])
    u0 = int(b[u, ord("0")])
    u00 = int(b[u0, ord("0")])
    u00h = [int(b[u00, ord(str(h))]) for h in range(8)]
    if min(esc, u, u0, u00, *u00h) < 0 or (b[s0, PLAIN_ASCII] != s0).any():
        return None  # not a body whose start is the state between characters: the product decides
    children, is_name = trie(names)
    nb, nodes = b.shape[0], len(children)
    shared = nb + nodes  # the first escape row
    row_body = np.array([s0] * nodes + [esc, u, u0, u00] + u00h, dtype=np.int64)
    tree_acc = np.concatenate([~np.array(is_name), np.zeros(4 + 8, dtype=bool)])
    cells = [(nb + t, ord(ch), nb + c) for t, kids in enumerate(children) for ch, c in kids.items()]
    cells += [(nb + t, ord("\\"), shared + ESCAPE) for t in range(nodes)]
    cells += [(shared + ESCAPE, ord("u"), shared + AFTER_U), (shared + AFTER_U, ord("0"), shared + AFTER_U0),
              (shared + AFTER_U0, ord("0"), shared + AFTER_U00)]
    cells += [(shared + AFTER_U00, ord(str(h)), shared + AFTER_NIBBLE + h) for h in range(8)]
    for cp in alphabet:  # no escape of a name's character: it could not say which child it leads to
        if SHORT_ESCAPE_BYTE[cp] >= 0:
            cells.append((shared + ESCAPE, int(SHORT_ESCAPE_BYTE[cp]), -1))
        digit = chr(HEX_DIGITS[cp & 15])
        cells += [(shared + AFTER_NIBBLE + (cp >> 4), ord(d), -1) for d in {digit, digit.upper()}]
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
