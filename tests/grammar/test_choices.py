"""Matcher.complete_values: the whole values a point of the grammar allows (kvx/grammar/tokens/choices.py),
on the default model's tokenizer: enum strings, true/false, null against an open value; nothing
inside a value or at a structural choice; the length budget applied."""
from __future__ import annotations

import pytest

from grammar_fixtures import smol_tokenizer
from kvx.grammar import compile_schema

SCHEMA = {
    "type": "object",
    "properties": {
        "product": {"enum": ["credit or prepaid card", "credit reporting", "mortgage", "student loan"]},
        "company": {"type": ["string", "null"], "maxLength": 40},
        "amount": {"type": ["number", "null"]},
        "refund": {"type": "boolean"},
        "level": {"anyOf": [{"const": "low"}, {"const": "high"}]},
        "due": {"type": "string", "format": "date"},
        "note": {"type": "string"},
        "extra": {"type": "boolean"},
    },
    "required": ["product", "company", "amount", "refund", "level", "due", "note"],
    "additionalProperties": False,
}
RECORD = b'{"product":"mortgage","company":"Acme Bank","amount":12.5,"refund":true,"level":"low","due":"2024-01-31","note":"hi"}'


@pytest.fixture(scope="module")
def grammar():
    return compile_schema(SCHEMA, smol_tokenizer())


def at(grammar, prefix: bytes, budget: int | None = None):
    """A matcher advanced through `prefix` (spelled one byte-token at a time)."""
    m = grammar.matcher(budget)
    for b in prefix:
        m.advance(grammar.vocab.id_for_bytes(bytes([b])))
    return m


def spelled(grammar, tokens) -> bytes:
    return b"".join(grammar.vocab.token_bytes[t] for t in tokens)


def test_enum_strings_are_whole_values_spelled_by_allowed_tokens(grammar):
    choice = at(grammar, b'{"product":"').complete_values()
    assert sorted(o.text for o in choice.options) == sorted(v.encode() for v in SCHEMA["properties"]["product"]["enum"])
    assert choice.open_mask is None
    for o in choice.options:
        assert spelled(grammar, o.tokens) == o.text
        m = at(grammar, b'{"product":"')
        for t in o.tokens:
            m.advance(t)  # raises if the grammar did not allow it
        assert m.forced_tokens() and spelled(grammar, m.forced_tokens()).startswith(b'","company":')
    assert len(next(o for o in choice.options if o.text == b"credit or prepaid card").tokens) > 1


def test_booleans_consts_and_null_against_an_open_value(grammar):
    head = b'{"product":"mortgage","company":'
    company = at(grammar, head).complete_values()
    assert [o.text for o in company.options] == [b"null"] and company.open_mask is not None
    quote = grammar.vocab.id_for_bytes(b'"')
    assert bool(company.open_mask[quote]) and not bool(company.open_mask[company.options[0].tokens[0]])
    amount = at(grammar, head + b'null,"amount":').complete_values()
    assert [o.text for o in amount.options] == [b"null"] and bool(amount.open_mask[grammar.vocab.id_for_bytes(b"1")])
    refund = at(grammar, head + b'null,"amount":null,"refund":').complete_values()
    assert sorted(o.text for o in refund.options) == [b"false", b"true"] and refund.open_mask is None
    level = at(grammar, head + b'null,"amount":null,"refund":true,"level":"').complete_values()
    assert sorted(o.text for o in level.options) == [b"high", b"low"]


@pytest.mark.parametrize("prefix", [
    b'{"product":"mortgage","company":"Ac',  # inside a free string
    b'{"product":"mortgage","company":"',  # a free string's start: close it or not is no value choice
    b'{"product":"mortgage","company":null,"amount":1',  # inside a number
    b'{"product":"mortgage","company":null,"amount":null,"refund":true,"level":"low","due":"2024-0',  # a date
    RECORD[:-1],  # `}` against `,"extra":...`: structure, not a value
])
def test_no_choice_inside_values_or_at_structure(grammar, prefix):
    assert at(grammar, prefix).complete_values() is None


def test_the_length_budget_leaves_out_values_that_do_not_fit(grammar):
    full = at(grammar, b'{"product":"').complete_values()
    used = len(b'{"product":"')
    rest = at(grammar, b'{"product":"').min_tokens_to_finish()
    shortest = min(len(o.tokens) for o in full.options)
    tight = at(grammar, b'{"product":"', budget=used + rest + 1).complete_values()  # one token to spare
    kept = [] if tight is None else [o.text for o in tight.options]
    assert kept and all(len(o.tokens) <= shortest + 1 for o in tight.options)
    assert len(kept) < len(full.options)


NESTED = {
    "type": "object",
    "properties": {"items": {"type": "array", "items": {"$ref": "#/$defs/item"}}},
    "required": ["items"],
    "additionalProperties": False,
    "$defs": {"item": {"type": "object", "properties": {
        "kind": {"enum": ["bug", "feature request", "question"]},
        "owner": {"anyOf": [{"type": "null"}, {"type": "string", "maxLength": 20}]},
        "child": {"$ref": "#/$defs/item"}},
        "required": ["kind", "owner"], "additionalProperties": False}},
}


def test_choices_inside_called_frames_and_recursion():
    """The pushdown grammar: an enum and null-or-string inside an array item's frame, and again one
    level of recursion deeper, are found through calls and returns."""
    g = compile_schema(NESTED, smol_tokenizer(), cache=False)
    for prefix in (b'{"items":[{"kind":"', b'{"items":[{"kind":"bug","owner":null,"child":{"kind":"'):
        kinds = at(g, prefix).complete_values()
        assert sorted(o.text for o in kinds.options) == [b"bug", b"feature request", b"question"]
        assert kinds.open_mask is None
    owner = at(g, b'{"items":[{"kind":"bug","owner":').complete_values()
    assert [o.text for o in owner.options] == [b"null"] and owner.open_mask is not None


def test_a_point_has_the_same_key_in_every_compile():
    """Calibration tables travel between processes (Ray replicas): a decision point's key must not
    depend on the order in which one process happened to visit the automaton."""
    tok = smol_tokenizer()
    a, b = compile_schema(NESTED, tok, cache=False), compile_schema(NESTED, tok, cache=False)
    at(b, b'{"items":[{"kind":"bug","owner":null},{"kind":"question","owner":"x"}]}')  # b visits more first
    deep = b'{"items":[{"kind":"bug","owner":null,"child":{"kind":"'
    assert at(a, deep).complete_values().key == at(b, deep).complete_values().key
    assert at(a, deep).complete_values().key != at(a, b'{"items":[{"kind":"').complete_values().key
