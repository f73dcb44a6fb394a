"""Any JSON string body except some ASCII names, in every spelling, built directly.

Every object with extra keys needs the key space "any string but the declared names" (a declared
name spelled `"\\u0061"` must not come back as an extra `a`). The general way, the product of the
any-key body with the names' spellings, cost ~8 ms an object (a third of a typical schema's
compile). Built directly: the names' trie at the level of decoded characters, where each trie node
reads one JSON character (raw byte, short escape or `\\u00XX`; hex in either case) and goes to the
child it decodes to, or else continues as the plain body (FREE: whatever it has read so far, then
any body), so the result is exactly `body minus spellings(names)`. Names with a character outside
ASCII take the product (the caller's fallback).
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
HEX_LOWER = np.frombuffer(b"0123456789abcdef", dtype=np.uint8).astype(np.int64)
HEX_UPPER = np.frombuffer(b"0123456789ABCDEF", dtype=np.uint8).astype(np.int64)
HOP_BYTES = np.frombuffer(b"\\u00", dtype=np.uint8).astype(np.int64)  # a node's rows, one to the next
PLAIN_ASCII = np.array([c for c in range(0x20, 0x80) if c not in (0x22, 0x5C)], dtype=np.int64)


def body_without_names(body: DFA, names: tuple[str, ...]) -> CDFA | None:
    """`body` minus every spelling of `names`; None where a name is not ASCII or `body` is not the
    plain string body (its start, the state between characters, is checked). The rows are written
    in one compiled call (names_kernel.py), without numba per trie edge with numpy (a Python loop
    per edge cost 1-2 ms a name set)."""
    if not all(name.isascii() for name in names):
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
    edges = [(t, ord(ch), c) for t, kids in enumerate(children) for ch, c in kids.items()]
    parent, code, child = np.array(edges, dtype=np.int64).reshape(-1, 3).T.copy()  # each contiguous
    template = np.stack([b[s0], b[esc], b[u], b[u0], b[u00], *(b[x] for x in u00h)]).astype(np.int32)  # by kind
    compiled = graph_kernels.kernels()
    if compiled is not None:  # the steps below in one call, the trie's rows merged from the leaves up
        out, acc, cob = compiled.trie_after_body(np.ascontiguousarray(b, dtype=np.int32), body.accepting.astype(bool),
                                                 template, HOP_BYTES, parent, code, child, np.array(is_name),
                                                 SHORT_ESCAPE_BYTE, HEX_LOWER, HEX_UPPER)
        return CDFA(out, acc, 0, cob)
    nb = b.shape[0]
    # rows per trie node: 0 between characters, 1 after \, 2 after \u, 3 after \u0, 4 after \u00,
    # then one after \u00h for each high nibble h its children use (other nibbles go on in the body)
    pairs = np.unique(parent * 8 + (code >> 4))  # (node, nibble), ordered by node then nibble
    pair_node, pair_nibble = pairs // 8, pairs % 8
    counts = np.bincount(pair_node, minlength=len(children))
    base = nb + np.concatenate([[0], np.cumsum(5 + counts)])
    rows = base[:-1]
    nibble_row = rows[pair_node] + 5 + np.arange(len(pairs)) - np.concatenate([[0], np.cumsum(counts)])[pair_node]
    row_kind = np.zeros(int(base[-1]) - nb, dtype=np.int64)  # kind 0-4 as above, 5 + h after \u00h
    row_kind[(rows - nb)[:, None] + np.arange(5)] = np.arange(5)
    row_kind[nibble_row - nb] = 5 + pair_nibble
    trans = np.concatenate([b.astype(np.int32), template[row_kind]])
    for kind, hop in enumerate(HOP_BYTES.tolist()):
        trans[rows + kind, hop] = rows + kind + 1
    trans[rows[pair_node] + 4, ord("0") + pair_nibble] = nibble_row
    # the spellings that lead to a child; the rest stay FREE
    target, at = base[child], rows[parent]
    plain = (code >= 0x20) & (code != 0x22) & (code != 0x5C)
    trans[at[plain], code[plain]] = target[plain]
    short = SHORT_ESCAPE_BYTE[code]
    trans[at[short >= 0] + 1, short[short >= 0]] = target[short >= 0]
    after = nibble_row[np.searchsorted(pairs, parent * 8 + (code >> 4))]
    trans[after, HEX_LOWER[code & 15]] = target
    trans[after, HEX_UPPER[code & 15]] = target
    accepting = np.concatenate([body.accepting.astype(bool), np.zeros(len(row_kind), dtype=bool)])
    accepting[rows] = ~np.array(is_name)
    # every row is reachable from the root and can still end the body: no trimming walk needed
    reps, cob = column_classes(trans)
    return minimal(np.ascontiguousarray(trans[:, reps]), accepting, int(rows[0]), cob)
