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

from kvx.grammar.automata.cdfa import CDFA, column_classes, trie
from kvx.grammar.automata.dfa import DFA
from kvx.grammar.automata.dfa_ops import minimal
from kvx.grammar.schema import strings

# character -> the byte after the backslash of its short escape
SHORT_ESCAPES = {chr(cp): esc[1] for cp, esc in strings.SHORT_ESCAPES.items()}


def body_without_names(body: DFA, names: tuple[str, ...]) -> CDFA | None:
    """`body` minus every spelling of `names`; None where a name is not ASCII or `body` is not the
    plain string body (its start, the state between characters, is checked)."""
    if not all(name.isascii() for name in names):
        return None
    b, s0 = body.trans, body.start
    esc = int(b[s0, ord("\\")])
    u = int(b[esc, ord("u")])
    u0 = int(b[u, ord("0")])
    u00 = int(b[u0, ord("0")])
    u00h = [int(b[u00, ord(str(h))]) for h in range(8)]
    if min(esc, u, u0, u00, *u00h) < 0 or any(int(b[s0, c]) != s0 for c in range(0x20, 0x80) if c not in (0x22, 0x5C)):
        return None  # not a body whose start is the state between characters: the product decides
    children, is_name = trie(names)
    nb = b.shape[0]
    # rows per trie node: 0 between characters, 1 after \, 2 after \u, 3 after \u0, 4 after \u00,
    # then one after \u00h for each high nibble h its children use (other nibbles go on in the body)
    nibbles = [sorted({ord(ch) >> 4 for ch in kids}) for kids in children]
    base = nb + np.concatenate([[0], np.cumsum([5 + len(h) for h in nibbles])]).astype(np.int64)
    template = np.stack([b[s0], b[esc], b[u], b[u0], b[u00], *(b[x] for x in u00h)]).astype(np.int32)  # by kind
    row_kind = np.array([k for hs in nibbles for k in (0, 1, 2, 3, 4, *(5 + h for h in hs))], dtype=np.int64)
    trans = np.concatenate([b.astype(np.int32), template[row_kind]])
    rows = base[:-1]
    trans[rows, ord("\\")] = rows + 1
    trans[rows + 1, ord("u")] = rows + 2
    trans[rows + 2, ord("0")] = rows + 3
    trans[rows + 3, ord("0")] = rows + 4
    for t, kids in enumerate(children):  # the spellings that lead to a child; the rest stay FREE
        r = int(base[t])
        after_nibble = {h: r + 5 + i for i, h in enumerate(nibbles[t])}
        for h, row in after_nibble.items():
            trans[r + 4, ord(str(h))] = row
        for ch, c in kids.items():
            target, code = int(base[c]), ord(ch)
            if code >= 0x20 and ch not in '"\\':
                trans[r, code] = target
            if ch in SHORT_ESCAPES:
                trans[r + 1, SHORT_ESCAPES[ch]] = target
            for digit in {format(code & 15, "x"), format(code & 15, "X")}:
                trans[after_nibble[code >> 4], ord(digit)] = target
    accepting = np.concatenate([body.accepting.astype(bool), np.zeros(len(row_kind), dtype=bool)])
    accepting[rows] = ~np.array(is_name)
    reps, cob = column_classes(trans)
    # every row is reachable from the root and can still end the body: no trimming walk needed
    return minimal(np.ascontiguousarray(trans[:, reps]), accepting, int(rows[0]), cob)
