"""The directly built "any key but these names" body (kvx/grammar/schema/key_names.py) is exactly the
product construction it replaces: the two languages are equal (each minus the other is empty),
and spot checks of spellings go the right way."""
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

ALPHABET = 'ab/"\\\n\t\x01\x7fZz09_- '


def by_product(names):
    spelled = ra.alt(*(ra.seq(*(strings.json_char(cs.of(c)) for c in name)) for name in names))
    return product(any_key_body(), fast_compile(spelled), mode="minus")


def name_sets():
    rng = random.Random(7)
    yield ("a",)
    yield ("",)  # the empty key is a name too
    yield ("id", "identity", "i")  # prefixes of each other
    yield ('"', "\\", "/", "\n", "\x1f", "\x7f")  # escapes only, both, raw only
    yield tuple(f"field_{i}" for i in range(40))
    for _ in range(12):
        yield tuple("".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 6))) for _ in range(rng.randint(1, 8)))


@pytest.mark.parametrize("names", list(name_sets()))
def test_same_language_as_the_product(names):
    direct, reference = body_without_names(any_key_body(), names), by_product(names)
    assert direct is not None
    assert product(direct, reference, mode="minus") is None and product(reference, direct, mode="minus") is None


def test_spellings_of_a_name_are_refused_and_near_misses_kept():
    d = body_without_names(any_key_body(), ("ab", 'q"'))
    for spelled in [b"ab", b"\\u0061b", b"a\\u0062", b"\\u0061\\u0062", b'q\\"',
                    b"q\\u0022", b"\\u0071\\u0022"]:
        assert not d.accepts(spelled), spelled
    for other in [b"", b"a", b"abc", b"Ab", b"\\u0041b", b"\\u00e9", "ab\u00e9".encode(), b"\\ud83d\\ude00", b"q",
                  b"b"]:
        assert d.accepts(other) == (json.loads(b'"' + other + b'"') not in ("ab", 'q"')), other


def test_non_ascii_names_take_the_product():
    assert body_without_names(any_key_body(), ("caf\u00e9",)) is None


@pytest.mark.parametrize("names", list(name_sets()))
def test_the_trie_merged_from_its_leaves_is_hopcrofts_table(names, monkeypatch):
    """With the compiled kernels, the trie's rows are merged from the leaves up (tree_minimal_rows);
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
