"""JSON string bodies: one decoded character -> the byte spellings kvx writes and reads for it.

A character class (code point ranges) becomes the alternation of: its raw UTF-8 bytes (except
'"', '\\' and controls, which JSON forbids raw), the short escapes (\\" \\\\ \\/ \\b \\f \\n \\r \\t),
\\uXXXX for BMP characters (hex in either case) and a \\uD8xx\\uDCxx surrogate pair for the
rest, except that a printable ASCII character other than '"' and '\\' has no \\u spelling: every
JSON serialiser writes those raw (json.dumps either way, JSON.stringify), and a \\u00XX route per
state of a pattern's or format's automaton was a fifth of its states (the band's string rules:
1,881 -> 1,478 states a schema). So every string a serialiser writes is read, and the model writes
strings as they do. Each spelling is one character, so minLength/maxLength count decoded
characters, and a pattern's char-level automaton maps to JSON-escaped bytes class by class. Lone
surrogates are never produced.
"""
from __future__ import annotations

from functools import lru_cache

from kvx.grammar.schema import charset as cs
from kvx.grammar.automata import regex_ast as ra
from kvx.grammar.automata.cdfa import compact
from kvx.grammar.automata.compose import fast_compile
from kvx.grammar.automata.determinize import compile_node, minimise
from kvx.grammar.automata.dfa import DFA
from kvx.grammar.schema.numbers import fixed_range
from kvx.grammar.schema.stored_automata import stored

SHORT_ESCAPES = {0x22: b'\\"', 0x5C: b"\\\\", 0x2F: b"\\/", 0x08: b"\\b", 0x0C: b"\\f",
                 0x0A: b"\\n", 0x0D: b"\\r", 0x09: b"\\t"}
RAW_ALLOWED = cs.subtract(cs.ANY, ((0, 0x1F), (0x22, 0x22), (0x5C, 0x5C)))
# the characters with a \u spelling: all but printable ASCII, and its `"` and `\`
U_ESCAPED = cs.subtract(cs.ANY, ((0x20, 0x21), (0x23, 0x5B), (0x5D, 0x7E)))
UTF8_BOUNDS = ((0, 0x7F), (0x80, 0x7FF), (0x800, 0xFFFF), (0x10000, cs.MAX_CP))


def _utf8_split(lo: int, hi: int, out: list) -> None:
    """Byte-range sequences for code points lo..hi (same encoded length)."""
    n = len(chr(lo).encode("utf-8", "surrogatepass"))
    for i in range(1, n):
        m = (1 << (6 * i)) - 1
        if lo & ~m != hi & ~m:
            if lo & m:
                _utf8_split(lo, lo | m, out)
                _utf8_split((lo | m) + 1, hi, out)
                return
            if hi & m != m:
                _utf8_split(lo, (hi & ~m) - 1, out)
                _utf8_split(hi & ~m, hi, out)
                return
    a = chr(lo).encode("utf-8", "surrogatepass")
    b = chr(hi).encode("utf-8", "surrogatepass")
    out.append(list(zip(a, b)))


def utf8_class(ranges) -> ra.Node:
    """Raw UTF-8 spellings of the code points in `ranges`."""
    seqs: list = []
    for lo, hi in cs.normalise(ranges):
        for blo, bhi in UTF8_BOUNDS:
            a, b = max(lo, blo), min(hi, bhi)
            if a <= b:
                _utf8_split(a, b, seqs)
    return ra.alt(*(ra.seq(*(ra.byte_range(x, y) for x, y in s)) for s in seqs))


@lru_cache(maxsize=None)  # 136 (a, b) pairs at most; every \u spelling of every class asks
def _hex_digit(a: int, b: int) -> ra.Node:
    vals = range(a, b + 1)
    return ra.byte_set(*{ord(c) for v in vals for c in (format(v, "x"), format(v, "X"))})


def _hex4(lo: int, hi: int) -> ra.Node:
    d = lambda v: [(v >> s) & 15 for s in (12, 8, 4, 0)]
    return fixed_range(d(lo), d(hi), _hex_digit, base=16)


def _u_escape(lo: int, hi: int) -> ra.Node:
    return ra.seq(ra.lit("\\u"), _hex4(lo, hi))


def _surrogate_pairs(lo: int, hi: int) -> ra.Node:
    """\\uHHHH\\uLLLL spellings of astral code points lo..hi."""
    def split(cp):
        v = cp - 0x10000
        return 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF)
    (h1, l1), (h2, l2) = split(lo), split(hi)
    if h1 == h2:
        return ra.seq(_u_escape(h1, h1), _u_escape(l1, l2))
    parts = [ra.seq(_u_escape(h1, h1), _u_escape(l1, 0xDFFF))]
    if h1 + 1 <= h2 - 1:
        parts.append(ra.seq(_u_escape(h1 + 1, h2 - 1), _u_escape(0xDC00, 0xDFFF)))
    parts.append(ra.seq(_u_escape(h2, h2), _u_escape(0xDC00, l2)))
    return ra.alt(*parts)


WIDE_CLASS = 64  # ranges past which a class is built once, minimised, and embedded


@lru_cache(maxsize=4096)
def json_char(ranges: tuple) -> ra.Node:
    """The JSON-string spellings of one character from `ranges` (normalised code point ranges).
    A wide class (`\\p{L}`: 694 ranges, 3,618 composed states, 819 minimal) is one minimised
    automaton, built once a machine (stored_automata.py: 0.1-0.2 s to build, a few ms to load):
    written out, every pattern holding it composed it again."""
    ranges = cs.intersect(ranges, cs.ANY)
    if len(ranges) > WIDE_CLASS:
        key = ",".join(f"{lo}-{hi}" for lo, hi in ranges)
        name = f"class-{len(ranges)}"
        return ra.Embed(stored("classes", name, key, lambda: compact(_wide_class(ranges))).expand())
    return _spellings(ranges)


def _wide_class(ranges: tuple) -> DFA:
    built = fast_compile(_spellings(ranges))  # never empty: it holds more than WIDE_CLASS ranges
    return DFA(*minimise(built.trans, built.accepting, built.start))


def _spellings(ranges: tuple) -> ra.Node:
    """json_char's language written out: raw UTF-8, the short escapes, \\uXXXX (U_ESCAPED), surrogate pairs."""
    parts = [utf8_class(cs.intersect(ranges, RAW_ALLOWED))]
    parts += [ra.lit(esc) for cp, esc in SHORT_ESCAPES.items() if cs.contains(ranges, cp)]
    for lo, hi in cs.intersect(ranges, U_ESCAPED):
        if lo <= 0xFFFF:
            parts.append(_u_escape(lo, min(hi, 0xFFFF)))
        if hi >= 0x10000:
            parts.append(_surrogate_pairs(max(lo, 0x10000), hi))
    return ra.alt(*parts)


# one character in any spelling, as a compiled leaf: every string automaton repeats it
ANY_CHAR = ra.Embed(compile_node(json_char(cs.ANY)))


def string_body(min_len: int = 0, max_len: int | None = None) -> ra.Node:
    """JSON string contents (between the quotes) of min_len..max_len characters."""
    return ra.rep(ANY_CHAR, min_len, max_len)


def quoted(body: ra.Node) -> ra.Node:
    return ra.seq(ra.lit('"'), body, ra.lit('"'))
