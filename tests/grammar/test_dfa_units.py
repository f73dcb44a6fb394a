"""Unit tests of the schema compiler's automata, each against an independent reference
(Python's re, int/Decimal comparison, json.dumps, jsonschema)."""
from __future__ import annotations

import itertools
import json
import random
import re
from decimal import Decimal

import jsonschema
import numpy as np
import pytest

from kvx.grammar.schema import numbers, strings
from kvx.grammar.automata import regex_ast as ra
from kvx.grammar.schema.compiler import compile_program
from kvx.grammar.automata.determinize import compile_node, minimise, subset_construction, trim
from kvx.grammar.errors import UnsupportedSchema
from kvx.grammar.options import GrammarOptions
from kvx.grammar.automata.nfa import build_nfa
from grammar_fixtures import random_pattern, random_regex
from kvx.grammar.schema.regex_parse import pattern_ast, pattern_dfa

pytestmark = pytest.mark.timeout(120)


def _utf8(ranges):
    return strings.utf8_class(ranges)


@pytest.mark.parametrize("pattern", [r"^[a-c]+x?$", r"ab|^c\d{2,3}$", r"^(a|bc)*$", r"\w\s\W", r"^.{2}$",
                                     r"^[^abc]{1,2}$", r"^a{2,}b$", r"x\.y", r"^(?:ab)+(?<n>c)$", r"^\x41\u0042[\-z]$"])
def test_pattern_matches_python_re(pattern):
    dfa = compile_node(pattern_ast(pattern, _utf8))
    # ECMA-262's reading: Python's with re.ASCII and $ only at the very end. On ASCII text it is
    # the grammar's; with "é" (a word character to Python's re, not to ECMA-262) the grammar takes
    # only what both readings match (the narrow reading, regex_parse.class_escape)
    ecma = re.compile(pattern.replace("(?<n>", "(?P<n>").replace("$", r"\Z"), re.ASCII)
    python = re.compile(pattern.replace("(?<n>", "(?P<n>"))
    rng = random.Random(pattern)
    alphabet = "abcxyz.0123 _-\nAB\u00e9"
    for _ in range(1500):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 6)))
        both = bool(ecma.search(s)) and bool(python.search(s))
        assert dfa.accepts(s.encode()) == (both if "\u00e9" in s else bool(ecma.search(s))), (pattern, s)


ECMA_DOT = "[^\n\r\u2028\u2029]"


def _ecma(pattern: str) -> re.Pattern:
    """ECMA-262's reading of a pattern with Python's re: ASCII classes, `.` without \r, U+2028/9,
    `$` at the very end only."""
    return re.compile(re.sub(r"(?<!\\)\.", ECMA_DOT, pattern).replace("$", r"\Z"), re.ASCII)


@pytest.mark.parametrize("pattern", [r"^\d+$", r"^\D+$", r"^\w+$", r"^\W+$", r"^a.b$", r"^[^\d]+$", r"^[^\W_]+$",
                                     r"^(?!\d)\w+", r"ab$", r"^x\d", r"[\D]", r"^[a\d]{2}$"])
def test_narrow_and_wide_readings_bound_ecma_and_python(pattern):
    r"""ECMA-262 (the spec) reads `\d`/`\w` as ASCII, `.` as no line end, `$` at the very end;
    Python's re (the record check) reads them wider. A value's pattern is read narrow: every string
    it takes matches in both readings. A subtracted one (`not`, the keys outside patternProperties)
    is read wide: every string either reading matches is in it, so what is left matches in neither."""
    narrow = pattern_dfa(pattern, "p")
    wide = pattern_dfa(pattern, "p", wide=True)
    ecma, python = _ecma(pattern), re.compile(pattern)
    rng = random.Random(pattern)
    alphabet = "a1b_x-\u00e9\u0663\u00b2\r\n\u2028 "  # é a letter, ٣ a digit, ² neither: not ASCII
    differ = 0
    probes = ["a\rb", "a\u2028b", "ab\n", "x\u0663", "\u00e9", "\u0663", "\u00b2\u00b2", "\u0663\u0663"]
    for s in probes + ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 5))) for _ in range(3000)]:
        body = json.dumps(s)[1:-1].encode()
        e, p = bool(ecma.search(s)), bool(python.search(s))
        assert not narrow.accepts(body) or (e and p), (pattern, s)
        assert wide.accepts(body) or not (e or p), (pattern, s)
        differ += narrow.accepts(body) != wide.accepts(body)
    assert differ  # each pattern here is one the two readings tell apart


PROBE_STRINGS = ["ab", "a\nb", "a\rb", "ab\n", "k", "k\n", "1", "12", "\u0663", "1\u0663", "\u00e9", "--", "x", "-\u00e9"]


@pytest.mark.parametrize("schema,kept", [
    ({"type": "string", "pattern": "^\\W+$"}, ["--"]),
    ({"type": "string", "pattern": "^[^\\d]+$"}, ["ab", "\u00e9"]),
    ({"type": "string", "not": {"pattern": "^\\d+$"}}, ["ab", "x"]),
    ({"type": "string", "not": {"pattern": "^ab$"}}, ["a\nb", "x"]),
    ({"type": "string", "not": {"pattern": "^a.b$"}}, ["ab", "a\nb"]),
    ({"type": "object", "patternProperties": {"^\\d+$": {"type": "string"}}, "additionalProperties": {"type": "integer"}},
     [{"1": "a", "x": 2}]),
    ({"type": "object", "properties": {"\u0663": {}, "k\n": {}, "1": {}}, "patternProperties": {"^\\d$": {"type": "string"}},
      "additionalProperties": False}, [{"1": "a"}]),  # declared keys: matched as the check matches them
])
def test_patterns_never_let_through_what_the_check_refuses(schema, kept):
    """Python's re (jsonschema's check) reads `\\d`, `\\W`, `.` and `$` wider than ECMA-262: "\u0663" is
    a digit to it, "é" a word character, "ab\\n" ends in `ab$`, "a\\rb" matches `a.b`. ECMA-262's
    reading alone let those through `not` and `additionalProperties` (and `\\W` took "é"). (A key
    pattern is read wide for `\\d`/`\\w` only: a key with a line break can still differ.)"""
    program = compile_program(schema, GrammarOptions(extra_keys="schema")).program
    check = jsonschema.Draft202012Validator(schema)
    values = PROBE_STRINGS if schema["type"] == "string" else (
        [{k: v} for k in PROBE_STRINGS for v in ("a", 2)] + [{"1": "a", "x": 2}, {"k": "a", "x": 2}, {"1": 2}])
    for value in values:
        if program.accepts(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()):
            assert check.is_valid(value), (schema, value)
    for value in kept:  # what both readings allow is still allowed
        assert program.accepts(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()), value


def test_a_tempered_token_is_read_wide_too():
    """`((?!x).)*$` is read only right before the end; read wide (subtracted under `not`), its `.`
    takes \\r too, and its `$` stays the very end (a lookahead's branch keeps ECMA-262's `$`)."""
    program = compile_program({"type": "string", "not": {"pattern": "^((?!ab).)*$"}}, GrammarOptions()).program
    for value, ok in [("ab", True), ("-ab-", True), ("k", False), ("a\rb", False), ("", False)]:
        assert program.accepts(json.dumps(value).encode()) == ok, value


@pytest.mark.parametrize("pattern", [r"^\s+$", r"^\S+$", r"^a\sb$", r"^[\s1]+$", r"^[^\s]+$", r"\s"])
def test_space_classes_match_python_re_as_the_record_check_runs_it(pattern):
    r"""`\s`/`\S` are read as Python's re reads them without re.ASCII, as jsonschema's check runs
    it: U+FEFF is no space there (ECMA-262's reading let "2\ufeffhours" through `^\d+\s(hours?)$`,
    which the check refuses), the separators U+001C-001F and U+0085 are. Every character either
    reading counts as a space, and some neither does."""
    dfa = compile_node(pattern_ast(pattern, _utf8))
    rx = re.compile(pattern.replace("$", r"\Z"))
    chars = [chr(c) for c in range(0x3001) if re.match(r"\s", chr(c))] + ["\ufeff", "\u180e", "\u200b", "a", "b", "1"]
    rng = random.Random(pattern)
    for _ in range(3000):
        text = "".join(rng.choice(chars) for _ in range(rng.randrange(0, 4)))
        assert dfa.accepts(text.encode()) == bool(rx.search(text)), (pattern, text)


@pytest.mark.parametrize("pattern", [r"^alpha|beta|rc|stable$", r"^a|b$|c", r"ab|^c\d{2,3}$", r"x*|^yz",
                                     r"en|de|ru|pt|nl|fr|it|es|pl|zh-cn", r"^(a|b)|c*d", r"(build|stage)-success",
                                     r"pull|x?ab{1,40}", r"^a|y{2,99}", r"^x{0,9}z+", r"d{1,3}e{0,50}$"])
def test_composed_pattern_on_json_spellings_matches_python_re(pattern):
    """The composer's automaton of a pattern (JSON string bodies, every spelling of a character):
    a branch that starts with a loop (`.*` padding an unanchored branch) once put its loop on the
    node the other branches start from, so `^alpha|beta` accepted "xalpha". Repeats on an
    unanchored side are cut to their least count (anchors.loosened). Checked on random
    strings, each also with one character written as a \\u escape: read as the character, but
    for printable ASCII, which has no \\u spelling (strings.py)."""
    dfa = pattern_dfa(pattern, "test")
    rx = re.compile(pattern.replace("$", r"\Z"), re.ASCII)
    rng = random.Random(pattern)
    alphabet = "abcdelnprstuxyz-0123\u00e9"
    for _ in range(1500):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 8)))
        body = json.dumps(s, ensure_ascii=False)[1:-1]
        assert dfa.accepts(body.encode()) == bool(rx.search(s)), (pattern, s)
        if s:
            i = rng.randrange(len(s))
            escaped = body[:i] + f"\\u{ord(s[i]):04x}" + body[i + 1:]
            want = bool(rx.search(s)) and not _printable_ascii(s[i])
            assert dfa.accepts(escaped.encode()) == want, (pattern, escaped)


def _printable_ascii(ch: str) -> bool:
    """A character JSON text writes raw and kvx only raw (no \\u spelling: strings.py)."""
    return " " <= ch <= "~" and ch not in "\"\\"


@pytest.mark.parametrize("pattern", [r"^(?!-)[-a-z0-9]{0,4}[a-z0-9]$", r"^(?!tag|ca)$", r"^(?!.*(ab|ba)).*$",
                                     r"^(?!a$).*$", r"^(?!ab$)[a-z0-9][a-z0-9+-]*$", r"^(?=[^!*,;]+$)(?=(.*\w)).+$",
                                     r"^(?!x:)[a-z+.:/]+$", r"^(?!n-)(?![-])(?!.*[-]$)(?!.*[-]{2})[a-z0-9-]+$",
                                     r"^(?=a)b", r"^(?=a)(?!ab)", r"^(?!a)(?=.*b)"])
def test_leading_lookaheads_match_python_re(pattern):
    """`^(?=x)` / `^(?!x)` before the rest of a one-branch pattern: as Python's re (which has them)."""
    from kvx.grammar.schema.regex_parse import pattern_dfa

    dfa = pattern_dfa(pattern, "/pattern")
    rx = re.compile(pattern.replace("$", r"\Z"), re.ASCII)
    rng = random.Random(pattern)
    alphabet = "abntgcx:-/+.!0 _"
    seen = set()
    for _ in range(3000):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 7)))
        want = bool(rx.search(s))
        seen.add(want)
        assert (dfa is not None and dfa.accepts(s.encode())) == want, (pattern, s)
    assert seen == {True, False} or pattern == r"^(?=a)b"  # both sides were tried (that one matches nothing)


@pytest.mark.parametrize("pattern,alphabet", [
    (r"(?=a)", "ab"), (r"a(?!b)", "abc"), (r"^a(?!b)", "abc"), (r"^(?!a)b|c", "abc"), (r"x(?=y)?z", "xyz"),
    (r"^((?!ab).)*$", "abc"), (r"b((?!ab).)*$", "abc"), (r"^((?=a).)+$", "ab"), (r"^((?!a?).)*$", "ab"),
    (r"^((?!message|sev).)*$", "mesagv"), (r"^((?!(c|C)(l|L)).)*$", "cClLx"), (r"(a(?!b)){2,3}c", "abc"),
    (r"^P(?!$)(\d+Y)?(T(?=\d)(\d+H)?(\d+S)?)?$", "PT1YHS"),
    (r"^@([a-z](?:(?!.*--)[a-z-]*[a-z])?)/([a-z](?:(?!.*--)[a-z-]*[a-z])?)$", "@/a-"),
    (r"^(a(?=b)|b(?!a)){1,4}$", "ab"), (r"((?=ab)a|(?!a)b)c", "abc"), (r"(?!^[0-9]+$)([a-z0-9]+)", "a1-"),
    (r"(?!^a)b", "ab"), (r"(?=^a)b|c", "abc"), (r"(^|-)ab(-|$)", "ab-c"), (r"x(y|$)", "xyz"),
    (r"^(?!/)(?!.*//)(?!(?:.*/)?\.\.(?:/|$))", "/a."), (r"^\/(([a-z\-]+\/)*[a-z\-]+$)?", "/a-"),
    (r"^(?:^[a-z][a-z+]*:)?[^\s]*$", "a+: "), (r"^^a", "ab"), (r"a$(b$)?", "ab"), (r"(^a)?b", "ab"), (r"a$b|c", "abc"),
    (r"x(^a)?", "xa"), (r"\bfoo", "fo x"), (r"\bab\b", "ab -"), (r"a\B", "ab "),
    (r"^\w+\b-", "a-b"), (r"(x\b|y)z", "xyz "), (r"\B", "a "), (r"[a-z]{1,3}\.[a-z()]{1,3}\b([-a-z()]*)", "a.(-")])
def test_assertions_match_python_re(pattern, alphabet):
    """A lookahead in a group, a branch, a bounded repeat or the tempered `((?!x).)*` before the end
    (schema/lookaheads.py), a `^` opening a lookahead, an anchor in an alternation or optional group
    at a branch's edge (`(^|-)ab(-|$)`, `^/(a$)?`), one that cannot hold (`a$b`), word boundaries (schema/word_bounds.py): as Python's re on every string up to 6
    characters of the alphabet (7 for two letters), the last character of each also written as a \\u
    escape, which printable ASCII has not (Python before 3.14 finds no `\\B` in an empty string, where
    ECMA-262 and kvx do)."""
    dfa = pattern_dfa(pattern, "/pattern")
    rx = re.compile(pattern.replace("$", r"\Z"), re.ASCII)
    seen = set()
    for n in range(8 if len(alphabet) == 2 else 7 if len(alphabet) <= 3 else 6):
        for chars in itertools.product(alphabet, repeat=n):
            s = "".join(chars)
            want = bool(rx.search(s)) or (s == "" and pattern == r"\B")
            seen.add(want)
            assert (dfa is not None and dfa.accepts(s.encode())) == want, (pattern, s)
            if s:
                escaped = f"\\u{ord(s[-1]):04x}"
                want = want and not _printable_ascii(s[-1])
                assert (dfa is not None and dfa.accepts(s[:-1].encode() + escaped.encode())) == want, (pattern, s)
    assert seen == {True, False}


@pytest.mark.parametrize("seed", range(4))
def test_random_patterns_with_assertions_match_python_re(seed):
    """Random patterns mixing lookaheads, anchors, word boundaries and `(?i)`: each one kvx
    compiles agrees with Python's re on every string of `aAbB-` up to 4 characters (a `^` inside a
    lookahead, once read as holding wherever the lookahead sat, is refused now)."""
    rng = random.Random(seed)
    strings = ["".join(c) for n in range(5) for c in itertools.product("aAbB-", repeat=n)]
    compiled = 0
    for _ in range(40):
        pattern = ("(?i)" if rng.random() < 0.3 else "") + ("^" if rng.random() < 0.3 else "") + random_pattern(rng)
        try:
            rx = re.compile(pattern.replace("$", r"\Z"), re.ASCII)
            dfa = pattern_dfa(pattern, "/pattern", 20_000)
        except (re.error, UnsupportedSchema):
            continue
        compiled += 1
        for s in strings[1:] if "\\B" in pattern else strings:  # re before 3.14 finds no \B in ""
            assert (dfa is not None and dfa.accepts(json.dumps(s)[1:-1].encode())) == bool(rx.search(s)), (pattern, s)
    assert compiled >= 30


@pytest.mark.parametrize("pattern", [
    "a(b^c)*d", "(a^b|c)x", "(x$y)?z", "x(a^)?", "(a^b)+", "^(?:-----BEGIN(?:\\r?\\n)(?:[a-z]{4})*\\s*^-----END)+$"])
def test_anchors_that_cannot_hold_inside_groups_rule_out_their_part(pattern):
    """A `^` after a character, or a `$` before one, inside a group or repeat (gradle's certificate
    pattern, written for a multiline mode): that part matches nothing and drops out, as Python's re
    reads it; every string of a few letters up to 4 characters."""
    dfa = pattern_dfa(pattern, "/pattern")
    rx = re.compile(pattern.replace("$", r"\Z"))
    for n in range(5):
        for chars in itertools.product("abcdxyz-", repeat=n):
            s = "".join(chars)
            assert (dfa is not None and dfa.accepts(json.dumps(s)[1:-1].encode())) == bool(rx.search(s)), (pattern, s)


@pytest.mark.parametrize("pattern,alphabet", [
    ("(?i)ab", "aAbB"), ("(?i)[^a]", "aAb"), ("(?i)[a-c]x", "aCxX"), ("(?i:a)b", "aAbB"), ("(?-i:a)b", "aAbB"),
    ("(?i)\\W", "kK "), ("(?i)[\\W]k", "kK "), ("(?i)^(?:hts?|f):", "hHtTsf:"), ("(?i)\\x41", "aA"),
    ("(?is)a.", "aA\n"), ("(?i)^a$|b", "aAbB"), ("(?i)s", "sS\u017f"), ("(?i)[i]", "iI\u0131\u0130"), ("(?s)a.b", "ab\n")])
def test_inline_flags_match_python_re(pattern, alphabet):
    """Python's `(?i)` / `(?s)` at the start and `(?i:...)` groups (the record check runs Python's
    re, which reads them; ECMA-262 has no `(?i)`): letters in every case Python pairs them in, the
    Kelvin sign and long s included; categories (`\\W`) as written. Every string up to 5
    characters (4 past 5 letters), written as JSON."""
    dfa = pattern_dfa(pattern, "/pattern")
    rx = re.compile(pattern.replace("$", r"\Z"))
    seen = set()
    for n in range(5 if len(alphabet) < 6 else 4):
        for chars in itertools.product(alphabet, repeat=n):
            s = "".join(chars)
            want = bool(rx.search(s))
            seen.add(want)
            assert (dfa is not None and dfa.accepts(json.dumps(s)[1:-1].encode())) == want, (pattern, s)
    assert seen == {True, False}


@pytest.mark.parametrize("pattern", [r"(a)\1", r"\b+", r"(?=a)\b", r"\p{NoSuchProperty}", r"a(?i)b", r"(?m)^a", r"(?x)a b", r"(?<=a)b", r"a*^b", r"(?=a*^)b", r"a(?!b*^)", r"(?=a|^)b", r"a(?!^)", r"(?!a^)b",
                                     r"^((?!ab).)*c$", r"^(a(?=b))+$", r"^(a(?!b)){1,20}$"])
def test_pattern_unsupported_features(pattern):
    with pytest.raises(UnsupportedSchema, match="pattern"):
        compile_program({"type": "string", "pattern": pattern})


@pytest.mark.parametrize("lo,hi", [(None, None), (0, 0), (-5, 7), (13, 987), (-1000, -99), (100, None),
                                   (None, -3), (9, 10), (0, 1000), (-1, 1)])
def test_integer_ranges_exhaustive(lo, hi):
    dfa = compile_node(numbers.int_range(lo, hi))
    for v in range(-1300, 1300):
        want = (lo is None or v >= lo) and (hi is None or v <= hi)
        assert dfa.accepts(str(v).encode()) == want, v
    assert not dfa.accepts(b"-0") and not dfa.accepts(b"007") and not dfa.accepts(b"")


@pytest.mark.parametrize("kw,bound", [("minimum", "1.25"), ("exclusiveMinimum", "1.25"), ("maximum", "-0.5"),
                                      ("exclusiveMaximum", "3"), ("minimum", "-2.05"), ("maximum", "0")])
def test_decimal_bounds(kw, bound):
    schema = {"type": "number", kw: float(bound) if "." in bound else int(bound)}
    dfa = compile_program(schema).program
    b = Decimal(bound)
    rng = random.Random(kw + bound)
    for _ in range(3000):
        v = Decimal(rng.randrange(-400, 400)) / Decimal(10 ** rng.randrange(0, 3))
        text = format(v, "f")
        if text.startswith("-") and v == 0:
            continue
        want = {"minimum": v >= b, "exclusiveMinimum": v > b, "maximum": v <= b, "exclusiveMaximum": v < b}[kw]
        assert dfa.accepts(text.encode()) == want, text


def test_integer_bounds_from_fractional_limits():
    dfa = compile_program({"type": "integer", "minimum": 1.5, "exclusiveMaximum": 4}).program
    assert [v for v in range(-3, 8) if dfa.accepts(str(v).encode())] == [2, 3]


@pytest.mark.parametrize("bounds", [{}, {"minimum": -5}, {"maximum": 2**64}, {"minimum": 2**62, "exclusiveMaximum": 2**80},
                                    {"minimum": 2**70}, {"type": ["integer", "null"]}, {"type": "number"},
                                    {"type": "number", "minimum": 2**60}, {"type": "number", "exclusiveMaximum": -(2**50)}],
                         ids=["plain", "min", "max-past", "straddling", "past-int64", "nullable", "number", "number-min",
                              "number-max"])
def test_parquet_numbers_keep_their_column_exact(bounds):
    """numbers="parquet" (kvx extract's choice for a Parquet output): integers inside int64, a number
    written as an integer within +-2^53 (a float64 holds it), judged against Python's ints and
    jsonschema; integer bounds that leave no int64 stay as the schema says (a number keeps its
    spellings with a fraction, so it never falls back)."""
    schema = {"type": "integer", **bounds}
    program = compile_program(schema, GrammarOptions(numbers="parquet")).program
    integer = schema["type"] != "number"
    lo, hi = (-(2**63), 2**63 - 1) if integer else (-(2**53), 2**53)
    edges = [0, 7, -5, -6, lo, lo - 1, hi, hi + 1, 2**53 + 1, 2**60, 2**62, 2**62 - 1, 2**64, 2**64 + 1, 2**70,
             2**70 + 3, 10**19, -(10**19), 2**80 - 1, 2**80]
    rng = random.Random(str(bounds))
    values = edges + [rng.randrange(-(2**66), 2**66) for _ in range(400)] + [rng.randrange(2**69, 2**71) for _ in range(100)]
    check = jsonschema.Draft202012Validator(schema)
    fallback = integer and not any(lo <= v <= hi and check.is_valid(v) for v in values)
    for v in values:
        want = check.is_valid(v) and (lo <= v <= hi or fallback)
        assert program.accepts(str(v).encode()) == want, v
    assert program.accepts(b"null") == ("null" in schema["type"])
    if not integer:  # with a fraction or an exponent json.loads gives a float: a float64 column holds it
        plain = compile_program(schema).program  # (bounded decimals are written without an exponent)
        for text in ("1152921504606846976.5", "-1152921504606846976.5", "1.5e300", "2e18", "-0", "0.25"):
            assert program.accepts(text.encode()) == plain.accepts(text.encode()), text


def test_string_length_counts_characters():
    dfa = compile_program({"type": "string", "minLength": 2, "maxLength": 3}).program
    samples = ["a", "ab", "abc", "abcd", "é😀", "\n\"", "a\\b", "\u0001xy", "😀😀😀😀", "\u2028"]
    for s in samples:
        for text in (json.dumps(s), json.dumps(s, ensure_ascii=False)):
            assert dfa.accepts(text.encode()) == (2 <= len(s) <= 3), text
    assert dfa.accepts(b'"\\u00e9\\ud83d\\ude00"')  # escapes count as one character each
    assert not dfa.accepts(b'"\\ud83d"')  # lone surrogate never produced


FORMAT_SAMPLES = {
    "date": (["2024-02-29", "1999-12-31", "2000-02-29"], ["2023-02-29", "1900-02-29", "2024-13-01", "2024-1-01"]),
    "time": (["12:30:00Z", "23:59:60+00:00", "08:00:00.5-05:30"], ["24:00:00Z", "12:30:00", "12:60:00Z"]),
    "date-time": (["2024-05-01T10:00:00Z", "2024-05-01t10:00:00.123+02:00"], ["2024-05-01 10:00:00Z", "2024-05-01T10:00Z"]),
    "email": (["joe@example.com", "a.b+c@x.io", "x@[127.0.0.1]"], ["joe", "@x.com", "a..b@x.com", "a@b@c"]),
    "uuid": (["123e4567-e89b-12d3-a456-426614174000"], ["123e4567e89b12d3a456426614174000", "g23e4567-e89b-12d3-a456-426614174000"]),
    "ipv4": (["192.168.0.1", "0.0.0.0"], ["256.1.1.1", "1.2.3", "01.2.3.4"]),
    "ipv6": (["::1", "2001:db8::8a2e:370:7334", "::ffff:1.2.3.4", "1:2:3:4:5:6:7:8"], ["1:2:3:4:5:6:7:8:9", ":::", "12345::"]),
    "uri": (["https://example.com/a?b=c#d", "urn:isbn:0451450523", "mailto:x@y.z"], ["//example.com", "no scheme", "http://a b"]),
    "hostname": (["example.com", "a-b.c", "localhost"], ["-a.com", "a..b", "a_b.com", "x" * 64 + ".com"]),
}


@pytest.mark.parametrize("fmt", sorted(FORMAT_SAMPLES))
def test_formats(fmt):
    dfa = compile_program({"type": "string", "format": fmt}).program
    good, bad = FORMAT_SAMPLES[fmt]
    for s in good:
        assert dfa.accepts(json.dumps(s).encode()), s
    for s in bad:
        assert not dfa.accepts(json.dumps(s).encode()), s


def test_minimisation_preserves_language():
    rng = random.Random(7)
    for _ in range(40):
        node = random_regex(rng)
        trans, acc, cob = subset_construction(build_nfa(node))
        full = lambda s: (lambda st: st >= 0 and acc[st])(_run(trans, cob, s))
        small = compile_node(node)
        if small is None:
            assert not any(full(w) for w in _words(rng))
            continue
        t2 = trim(trans, acc)
        assert small.num_states <= t2[0].shape[0]
        # minimal: minimising again cannot shrink it
        assert minimise(small.trans, small.accepting)[0].shape[0] == small.num_states
        for w in _words(rng):
            assert small.accepts(w) == bool(full(w)), w


def _words(rng):
    return [bytes(rng.choice(b"abcd") for _ in range(rng.randrange(8))) for _ in range(300)]


def _run(trans, cob, word):
    s = 0
    for b in word:
        s = int(trans[s, cob[b]])
        if s < 0:
            return -1
    return s


RECURSIVE = {"$defs": {"n": {"type": "object", "properties": {"k": {"type": "array", "items": {"$ref": "#/$defs/n"}}},
                             "additionalProperties": False}}, "$ref": "#/$defs/n"}


@pytest.mark.parametrize("schema", [json.load(open("schemas/ticket.json")), RECURSIVE, {"type": "array"}],
                         ids=["ticket", "recursive", "any-array"])
def test_program_invariants(schema):
    """Every state can complete its rule (calls counted by their callee), a frame's final state has
    no way out, every call's callee exists: what the token layer relies on (kvx/grammar/automata/pda.py)."""
    from kvx.grammar.tokens.budget import INF, byte_distances

    p = compile_program(schema).program
    dist = byte_distances(p, np.ones(256, dtype=bool))
    assert (dist < INF).all()
    pops = p.final & (p.rule_of != 0)
    assert not (p.trans[pops] >= 0).any() and not np.diff(p.call_ptr)[pops].any()
    assert (p.rule_start[p.call_rule] >= 0).all() and (p.rule_of[p.call_ret] == p.rule_of[np.repeat(
        np.arange(p.num_states), np.diff(p.call_ptr))]).all()


def test_objects_order_optional_and_extra_keys():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
              "required": ["b"], "additionalProperties": {"type": "boolean"}}
    dfa = compile_program(schema).program
    v = jsonschema.Draft202012Validator(schema)
    cases = ['{"b":"x"}', '{"a":1,"b":"x"}', '{"b":"x","a":1}', '{"a":1}', '{"b":"x","z":true}',
             '{"b":"x","z":1}', '{"b":"x","\\u0061":"s"}', '{}', '{"a":1,"b":"x","y":false,"z":true}']
    for text in cases:
        accepted = dfa.accepts(text.encode())
        if accepted:  # everything accepted validates
            assert v.is_valid(json.loads(text)), text
    assert dfa.accepts(b'{"a":1,"b":"x"}') and dfa.accepts(b'{"b":"x","z":true}')
    assert not dfa.accepts(b'{"b":"x","a":1}')  # order follows `properties`
    assert not dfa.accepts(b'{"b":"x","\\u0061":"s"}')  # escaped spelling of a declared key


def test_flexible_whitespace_is_bounded():
    dfa = compile_program({"type": "array", "items": {"type": "integer"}}, GrammarOptions(whitespace="flexible", max_ws=2)).program
    assert dfa.accepts(b"[ 1 ,\n2 ]") and dfa.accepts(b"  [1]  ")
    assert not dfa.accepts(b"[   1]")
    assert not compile_program({"type": "array"}).program.accepts(b"[ ]")


def test_errors_name_keyword_and_pointer():
    with pytest.raises(UnsupportedSchema, match=r"unsupported keyword 'not' at /properties/tags/not") as e:
        compile_program({"properties": {"tags": {"not": {"type": "array", "uniqueItems": True}}}})
    assert e.value.keyword == "not" and e.value.pointer == "/properties/tags/not"
    with pytest.raises(UnsupportedSchema, match="invalid schema"):
        compile_program({"type": 5})
    with pytest.raises(UnsupportedSchema, match="too large for the automaton at /items"):  # 2^16 states relaxed too
        compile_program({"type": "array", "items": {"type": "string", "pattern": "^[ab]*a[ab]{16}$"}})


def test_post_checks_and_lenient():
    c = compile_program({"properties": {"tags": {"type": "array", "uniqueItems": True}}})
    assert c.post_checks == ["/properties/tags/uniqueItems"] and "uniqueItems" in c.warnings[0]
    assert c.program.accepts(b'{"tags":[1,1]}')  # the automaton over-approximates; jsonschema checks
    c = compile_program({"properties": {"tags": {"not": {"uniqueItems": True}}}}, GrammarOptions(lenient=True))
    assert c.post_checks == ["/properties/tags/not"] and c.program.accepts(b'{"tags":[1,2]}')


def test_recursion_and_nesting_are_unbounded():
    """A recursive $ref and an unconstrained array nest to any depth (frames, not unrolled copies);
    wrong shapes deep down are still rejected."""
    p = compile_program(RECURSIVE).program
    deep = '{"k":[' * 50 + "{}" + "]}" * 50
    assert p.accepts(deep.encode())
    assert not p.accepts(deep.replace("{}", '{"k":[1]}').encode())
    assert not p.accepts(deep.replace("{}", '{"x":[]}').encode())
    any_array = compile_program({"type": "array"}).program
    assert any_array.accepts(("[" * 50 + '"a"' + "]" * 50).encode())
    assert any_array.accepts(b'[[[["a"]]]]') and any_array.accepts(b"[[[[]]]]")  # level 4 not only empty
    assert not any_array.accepts(b"[[[[]]]") and not any_array.accepts(b"[[[[1,]]]]")


def test_date_year_range_matches_python():
    """format date: years 0001-9999 only (jsonschema's checker is date.fromisoformat)."""
    import datetime

    dfa = compile_program({"type": "string", "format": "date"}).program
    for text in ["0000-01-01", "0000-02-29", "0000-12-31"]:
        assert not dfa.accepts(json.dumps(text).encode()), text
    for text in ["0001-01-01", "0004-02-29", "0400-02-29", "9999-12-31", "0099-06-30", "0999-11-30"]:
        assert dfa.accepts(json.dumps(text).encode()), text
    rng = random.Random(11)
    for _ in range(2000):
        text = f"{rng.choice([0, 0, 1, 4, 100, 400, 1900, 2000, 2024, 9999, rng.randrange(10000)]):04d}-" \
               f"{rng.randrange(0, 14):02d}-{rng.randrange(0, 33):02d}"
        try:
            datetime.date.fromisoformat(text)
            ok = True
        except ValueError:
            ok = False
        assert dfa.accepts(json.dumps(text).encode()) == ok, text


def test_fast_compile_matches_nfa_route():
    """network.fast_compile (composed DFAs) accepts exactly what the NFA route accepts, trimmed."""
    from kvx.grammar.automata.compose import fast_compile

    rng = random.Random(23)
    for _ in range(150):
        node = random_regex(rng)
        if rng.random() < 0.3:  # literal chains and embedded DFAs inside a sequence
            inner = compile_node(random_regex(rng))
            node = ra.seq(ra.lit("ab"), node, ra.Embed(inner) if inner is not None else ra.EMPTY, ra.lit("c"))
        ref, fast = compile_node(node), fast_compile(node)
        assert (ref is None) == (fast is None)
        if ref is None:
            continue
        live = fast.accepting.copy()
        while True:  # backward reachability from the accepting states, to its fixpoint
            grown = live | ((fast.trans >= 0) & live[np.maximum(fast.trans, 0)]).any(axis=1)
            if (grown == live).all():
                break
            live = grown
        assert live.all()
        for w in _words(rng) + [b"ab" + w + b"c" for w in _words(rng)]:
            assert fast.accepts(w) == ref.accepts(w), w


@pytest.mark.parametrize("packed_from", [0, None])
def test_batched_subset_states_match_nfa_route(monkeypatch, packed_from):
    """Many copies live at once (keys sharing prefixes, each with its own continuation, the shape
    of an object with optional members): the batched subset construction accepts exactly what the
    NFA route accepts, with the cells where members disagree looked up one by one or deduplicated
    with numpy (packed_from=0: every batch; target sets past PACKED_TARGETS take the one-by-one path)."""
    from kvx.grammar.automata import compose

    if packed_from is not None:
        monkeypatch.setattr(compose, "PACKED_FROM", packed_from)
    rng = random.Random(5)
    words = sorted({"".join(rng.choice("abcd") for _ in range(rng.randint(1, 6))) for _ in range(300)})
    tails = [ra.rep(ra.chars("xyz"[: 1 + i % 3]), i % 2, 1 + i % 4) for i in range(len(words))]
    node = ra.rep(ra.alt(*(ra.seq(ra.lit(w), t, ra.lit(";")) for w, t in zip(words, tails))), 0, 3)
    ref, fast = compile_node(node), compose.fast_compile(node)
    samples = [b""] + [("".join(rng.choice(words) + rng.choice(["", "x", "xy", "zz", "yyy"]) + ";"
                                for _ in range(rng.randint(1, 3)))).encode() for _ in range(400)]
    samples += [w[:-1] for w in samples[1:50]] + [w + b"a" for w in samples[1:50]]
    assert any(ref.accepts(w) for w in samples) and not all(ref.accepts(w) for w in samples)
    for w in samples:
        assert fast.accepts(w) == ref.accepts(w), w


@pytest.mark.parametrize("schema,kept", [
    ({"type": "number", "not": {"type": "integer"}}, ["12.50", "-0.5", "0.0000001", "999999999.999999"]),
    ({"type": "number", "exclusiveMaximum": 6}, ["5.99999999999999", "-12.5", "5"]),
    ({"type": "number", "exclusiveMinimum": 0.1, "exclusiveMaximum": 0.3}, ["0.2", "0.10000000000001"]),
    ({"type": "number", "not": {"const": 6}}, ["6.1", "5.99999999999999", "7"]),
    ({"type": "number", "not": {"multipleOf": 3}}, ["6.5", "7", "-2"]),
])
def test_numbers_stay_apart_when_the_check_reads_them_as_floats(schema, kept):
    """json.loads reads a number with a fraction as a float: 9033351000476249989215489763530.65 is
    9.03e30, an integer to jsonschema (found by a token walk of `{"not": {"type": "integer"}}`);
    5.99999999999999999 is 6.0, past `exclusiveMaximum: 6`, a multiple of 3, the excluded 6. Where
    the check compares strictly, the grammar writes a fraction with at most 15 significant digits,
    which reads back as itself (integers stay exact)."""
    program = compile_program(schema, GrammarOptions()).program
    check = jsonschema.Draft202012Validator(schema)
    for text in ["9033351000476249989215489763530.65", "4503599627370496.5", "6.00000000000000001",
                 "5.99999999999999999", "0.30000000000000001", "0.1000000000000000001"]:
        if not check.is_valid(json.loads(text)):
            assert not program.accepts(text.encode()), text
    for text in kept:
        assert check.is_valid(json.loads(text)) and program.accepts(text.encode()), text
    rng = random.Random(json.dumps(schema))
    for _ in range(20_000):
        whole = str(rng.randrange(10 ** rng.randrange(1, 20)))
        fraction = "".join(rng.choice("0123456789" if rng.random() < 0.5 else "09") for _ in range(rng.randrange(0, 22)))
        text = f"{'-' * rng.randrange(2)}{whole}" + (f".{fraction}" if fraction else "")
        if program.accepts(text.encode()):
            assert check.is_valid(json.loads(text)), text


@pytest.mark.parametrize("schema", [
    {"not": {"const": 1}}, {"type": "number", "not": {"type": "integer"}}, {"type": "number", "exclusiveMaximum": 6},
    {"type": "number", "exclusiveMinimum": -0.5}, {"type": "number", "maximum": 1.5}, {"type": "number", "multipleOf": 0.5},
    {"type": "number", "not": {"multipleOf": 2}}, {"type": "integer", "minimum": -3}, {"not": {"enum": [0, 1.5]}},
    {"enum": [1, 1.5, -0.0]}, {"type": "number"}])
def test_every_short_number_word_is_a_json_number_the_check_accepts(schema):
    """Every word of up to 5 characters of `0.-15e+` a number program accepts parses as JSON and
    passes the check: the round-trip form of a zero's fraction once ended at `0.` (a token walk
    under `not: {const: 1}` wrote `[0.]`, which json.loads refuses); the generated texts above
    always carry a digit after the point."""
    program = compile_program(schema, GrammarOptions()).program
    check = jsonschema.Draft202012Validator(schema)
    accepted = 0
    for n in range(1, 6):
        for chars in itertools.product("0.-15e+", repeat=n):
            text = "".join(chars)
            if program.accepts(text.encode()):
                accepted += 1
                assert check.is_valid(json.loads(text)), text
    assert accepted
