"""Codes copied from the text (kvx/code_spans.py): which fields, which spans, and the guard that
lets a started code be only one of them."""
import pickle
import re

from char_vocab import Spell

from kvx.code_spans import CodeField, CodeGuard, CodeSpans, code_fields, spans
from kvx.json_cursor import JsonCursor
from kvx.record_fields import pointer

CHARS = '{}":,[]. -_/\\0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ'
CODE = {"type": ["string", "null"], "pattern": "^[A-Z]{2}-[0-9]{3}$"}
SCHEMA = {"type": "object", "properties": {
    "code": CODE, "note": {"type": ["string", "null"]},
    "items": {"type": "array", "items": {"type": "object", "properties": {"ref": CODE}}},
    "required_code": {"type": "string", "pattern": "^[a-z]+$"},  # may rightly be a word the text lacks
    "kind": {"type": ["string", "null"], "enum": ["AB-123", None], "pattern": "^A"},
    "opt": {"anyOf": [{"type": "string", "pattern": "^[a-z_]+$"}, {"type": "null"}]}}}
TEXT = "Order AB-123 and later CD-456, see also ab-999 (XY 777)."


def test_nullable_patterned_strings_are_code_fields():
    assert {pointer(p) for p in code_fields(SCHEMA)} == {"/code", "/items/*/ref", "/opt"}


def test_spans_fit_the_field_as_written_or_joined():
    field = code_fields(SCHEMA)[("code",)]
    assert spans(TEXT, field) == ["AB-123", "CD-456", "XY-777"]  # punctuation around a word is not part of it
    ident = CodeField(re.compile("^[a-z_]+$"), 0, 12)
    # lower case and joined words; the length bound applies (total_revenue is 13 characters)
    assert spans("Total Revenue per day", ident) == ["total", "revenue", "revenue_per", "per", "per_day", "day"]


def guard(text: str = TEXT) -> tuple[CodeGuard, Spell]:
    spell = Spell(CHARS)
    return CodeGuard(CodeSpans.of(code_fields(SCHEMA), text), JsonCursor(spell.spelling)), spell


def allowed_chars(g: CodeGuard, spell: Spell, output: str) -> set[str] | None:
    ids = g.allowed(spell.ids(output))
    return None if ids is None else {spell.chars[t] for t in ids}


def test_a_started_code_may_only_continue_a_span():
    g, spell = guard()
    assert allowed_chars(g, spell, '{"code":"') == {"A", "C", "X"}
    assert allowed_chars(g, spell, '{"code":"AB-12') == {"3"}
    assert allowed_chars(g, spell, '{"code":"AB-123') == {'"'}  # the whole span: only its end
    assert spell.vetoed(g, '{"code":"', "Z") and not spell.vetoed(g, '{"code":"', "C")
    # at the value's start null stays the model's choice; a string must start a span
    assert allowed_chars(g, spell, '{"code":') is None
    assert not spell.vetoed(g, '{"code":', "n") and not spell.vetoed(g, '{"code":', '"')
    # in an array of objects, by place
    assert allowed_chars(g, spell, '{"code":null,"items":[{"ref":"AB-123"},{"ref":"C') == {"D"}


def test_other_fields_keys_and_texts_without_a_span_are_left_alone():
    g, spell = guard()
    assert allowed_chars(g, spell, '{"note":"') is None and not spell.vetoed(g, '{"note":"', "Z")
    assert allowed_chars(g, spell, '{"co') is None and not spell.vetoed(g, '{"co', "Z")  # a key
    assert allowed_chars(g, spell, '{"required_code":"') is None
    assert not CodeSpans.of(code_fields(SCHEMA), "12 34, 5.").spans
    # a string that already left every span (the veto gave way): no list, the grammar decides
    assert allowed_chars(g, spell, '{"code":"ZZ') is None


def test_the_cursor_follows_a_dropped_draft_and_the_guard_pickles():
    g, spell = guard()
    assert allowed_chars(g, spell, '{"code":"CD-4') == {"5"}
    assert allowed_chars(g, spell, '{"code":"A') == {"B"}  # a shorter, different output: rescanned
    there = pickle.loads(pickle.dumps(g))
    assert allowed_chars(there, spell, '{"code":"XY-') == {"7"}


def test_copied_counts_the_values_that_are_spans():
    found = CodeSpans.of(code_fields(SCHEMA), TEXT)
    assert found.copied({"code": "AB-123", "items": [{"ref": "CD-456"}, {"ref": "QQ-111"}, {"ref": None}]}) == 2
