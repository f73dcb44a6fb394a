"""The directly built "any key but these names" body (kvx/grammar/schema/key_names.py) against a
reference built by products: any key body, minus every spelling of the names, minus the keys that
escape a character of the names while what is read so far still starts a name (the module's
documented restriction: with no \\u spelling of printable ASCII in a string body, that is `\\/`).
The two languages are equal (each minus the other is empty); every key json.dumps writes (either
ensure_ascii) is kept unless it is a name; spot checks of spellings."""
from __future__ import annotations

import json
import random

import pytest

from kvx.grammar.automata import regex_ast as ra
from kvx.grammar.automata.compose import fast_compile
from kvx.grammar.automata.dfa_ops import product
from kvx.grammar.schema import charset as cs
from kvx.grammar.schema import strings
from kvx.grammar.schema.key_names import body_without_names
from kvx.grammar.schema.objects import any_key_body

ALPHABET = "ab/Zz09_- .$~"  # plain printable ASCII: the characters the direct build takes


def escapes(ch: str) -> ra.Node:
    """Every escaped spelling of `ch` (short escape, \\u00XX in either hex case)."""
    short = [ra.lit(esc) for cp, esc in strings.SHORT_ESCAPES.items() if cp == ord(ch)]
    hexes = [ra.chars("".join({d, d.upper()})) for d in f"{ord(ch):04x}"]
    return ra.alt(*short, ra.seq(ra.lit("\\u"), *hexes))


def reference(names):
    spelled = ra.alt(*(ra.seq(*(strings.json_char(cs.of(c)) for c in name)) for name in names))
    without_names = product(any_key_body(), fast_compile(spelled), mode="minus")
    prefixes = {name[:i] for name in names for i in range(len(name) + 1)}
    alphabet = sorted({c for name in names for c in name})
    if not alphabet:
        return without_names
    escaped_in_trie = ra.seq(ra.alt(*(ra.lit(p) for p in prefixes)), ra.alt(*(escapes(c) for c in alphabet)),
                             strings.string_body())
    return product(without_names, fast_compile(escaped_in_trie), mode="minus")


def name_sets():
    rng = random.Random(7)
    yield ("a",)
    yield ("",)  # the empty key is a name too
    yield ("id", "identity", "i")  # prefixes of each other
    yield ("/", "a/b", "~0")  # `/` has a short escape too
    yield tuple(f"field_{i}" for i in range(40))
    yield ("allow-uncaught", "async-only", "bail", "check-leaks", "delay", "exit", "watch", "watch-files")
    for _ in range(12):
        yield tuple("".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 6))) for _ in range(rng.randint(1, 8)))


@pytest.mark.parametrize("names", list(name_sets()))
def test_same_language_as_the_reference(names):
    direct, want = body_without_names(any_key_body(), names), reference(names)
    assert direct is not None
    assert product(direct, want, mode="minus") is None and product(want, direct, mode="minus") is None


@pytest.mark.parametrize("names", list(name_sets()))
def test_every_key_json_dumps_writes_is_kept_unless_a_name(names):
    rng = random.Random(repr(names))  # not hash(): str hashes change with each process
    d = body_without_names(any_key_body(), names)
    keys = set(names) | {n + c for n in names for c in "a/\u00e9\n\"\\"} | {n[:-1] for n in names if n}
    keys |= {"".join(rng.choice(ALPHABET + "\u00e9\U0001f600\t\"\\\x7f") for _ in range(rng.randint(0, 5)))
             for _ in range(60)}
    for key in keys:
        for ascii_only in (True, False):
            spelled = json.dumps(key, ensure_ascii=ascii_only)[1:-1].encode()
            assert d.accepts(spelled) == (key not in names), (key, spelled)


def test_spellings_of_a_name_are_refused_and_near_misses_kept():
    d = body_without_names(any_key_body(), ("ab", "q/"))
    # a name in any spelling; `\/` read while the key still starts like a name (`q\/x`); printable
    # ASCII written as \u00XX (a string body has no such spelling)
    for spelled in [b"ab", b"q\\/", b"q/", b"q\\/x", b"\\u0061b", b"\\u0041b", b"x\\u0061b"]:
        assert not d.accepts(spelled), spelled
    for other in [b"", b"a", b"abc", b"Ab", b"\\u00e9", "ab\u00e9".encode(), b"\\ud83d\\ude00", b"q", b"b",
                  b"a\\n", b"x\\/", b"q/x", b"a\\u00e9", b"\\u007f", b'a\\"']:
        assert d.accepts(other) == (json.loads(b'"' + other + b'"') not in ("ab", "q/")), other


@pytest.mark.parametrize("names", [("caf\u00e9",), ('q"',), ("a\\b",), ("tab\t",), ("del\x7f",)])
def test_names_json_must_escape_or_outside_ascii_take_the_product(names):
    assert body_without_names(any_key_body(), names) is None


@pytest.mark.parametrize("names", list(name_sets()))
def test_the_tree_merged_from_its_leaves_is_hopcrofts_table(names, monkeypatch):
    """With the compiled kernels, the tree's rows are merged from the leaves up (tree_minimal_rows);
    without them Moore's rounds minimise the whole table: the same table, state for state."""
    from kvx.grammar.automata import graph_kernels

    if graph_kernels.kernels() is None:
        pytest.skip("numba cannot compile here")
    got = body_without_names(any_key_body(), names)
    with monkeypatch.context() as m:
        m.setattr(graph_kernels, "kernels", lambda: None)
        want = body_without_names(any_key_body(), names)
    assert got.trans.shape == want.trans.shape and (got.trans == want.trans).all()
    assert (got.accepting == want.accepting).all() and got.start == want.start and (got.cob == want.cob).all()
