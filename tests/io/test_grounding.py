"""Which fields are checked against the record's text, and what counts as the text holding a value."""
import json

import jsonschema
import pytest

from kvx.grounding import Grounding, grounded_fields
from kvx.record_fields import pointer
from kvx.text_numbers import text_values

PYDANTIC = {  # what Pydantic v2 emits for Optional[str], Optional[Money], an Optional date, nested models
    "$defs": {"Money": {"type": "number", "minimum": 0}, "Kind": {"enum": ["a", "b"]},
              "Party": {"type": "object", "properties": {"email": {"type": ["string", "null"]}, "name": {"type": "string"}}},
              "Tree": {"type": "object", "properties": {"label": {"type": ["string", "null"]},
                                                        "children": {"type": "array", "items": {"$ref": "#/$defs/Tree"}}}}},
    "type": "object",
    "properties": {
        "name": {"anyOf": [{"type": "string", "maxLength": 40}, {"type": "null"}], "default": None},
        "amount": {"anyOf": [{"$ref": "#/$defs/Money"}, {"type": "null"}]},
        "when": {"anyOf": [{"type": "string", "format": "date"}, {"type": "null"}]},
        "kind": {"anyOf": [{"$ref": "#/$defs/Kind"}, {"type": "null"}]},
        "order": {"type": ["string", "null"], "pattern": "^[A-Z0-9-]+$"},
        "count": {"type": ["null", "integer"]},
        "title": {"type": "string"},
        "flag": {"type": ["boolean", "null"]},
        "code": {"type": ["string", "null"], "const": "X"},
        "seller": {"anyOf": [{"$ref": "#/$defs/Party"}, {"type": "null"}]},
        "lines": {"type": "array", "items": {"type": "object", "properties": {"sku": {"type": ["string", "null"]}}}},
        "tree": {"$ref": "#/$defs/Tree"},
    },
}


def test_nullable_free_text_and_numbers_are_grounded_normalised_values_are_not():
    found = {pointer(p): t for p, t in grounded_fields(PYDANTIC).items()}
    assert found == {"/name": "string", "/amount": "number", "/order": "string", "/count": "integer",
                     "/seller/email": "string", "/lines/*/sku": "string", "/tree/label": "string"}  # recursion stops


def test_an_optional_of_several_types_is_no_field_and_no_crash():
    """`Optional[str | int]` (anyOf of a two-type node and null) takes no single free type: not
    checked (it raised TypeError on the list of types)."""
    schema = {"type": "object", "properties": {"a": {"anyOf": [{"type": ["string", "integer"]}, {"type": "null"}]},
                                               "b": {"anyOf": [{"type": ["string", "null"]}, {"type": "null"}]}}}
    assert {pointer(p): t for p, t in grounded_fields(schema).items()} == {"/b": "string"}


def test_a_key_named_star_is_a_key_not_any_position():
    schema = {"type": "object", "properties": {"*": {"type": ["string", "null"]}, "xs": {"type": "array", "items": {
        "type": ["number", "null"]}}}}
    g = Grounding.of(schema)
    assert {pointer(p) for p in g.fields} == {"/*", "/xs/*"}
    found = g.ungrounded({"*": "made up", "xs": [1, 7]}, "one")
    assert [(pointer(f.path), f.value) for f in found] == [("/*", "made up"), ("/xs/1", 7)]


def test_the_shipped_schemas():
    repo = __import__("pathlib").Path(__file__).resolve().parents[2]
    invoice = json.loads((repo / "schemas" / "invoice.json").read_text())
    assert {pointer(p) for p in grounded_fields(invoice)} == {
        "/seller/email", "/seller/vat_id", "/buyer/email", "/buyer/vat_id", "/tax_rate_percent"}


@pytest.mark.parametrize("value,held", [("Wells Fargo", True), ("WELLS-fargo", True), ("wells  fargo bank", False),
                                        ("Truist", False), ("", True)])
def test_strings_are_held_case_spacing_and_punctuation_aside(value, held):
    g = Grounding({("name",): "string"})
    text = "I wrote to wells fargo twice."
    assert g.ungrounded({"name": value}, text) == ([] if held else [(("name",), ("name",), value)])


def test_numbers_in_digits_scale_words_and_small_words():
    assert text_values("paid $1,200.50, then 2.5 million; five times; 3k") == [1200.5, 2500000.0, 3000.0, 5.0]
    g = Grounding({("amount",): "number", ("count",): "integer"})
    text = "I was charged $1,200.50 five times"
    assert g.ungrounded({"amount": 1200.5, "count": 5}, text) == []
    assert [f.path for f in g.ungrounded({"amount": 1200.0, "count": 100}, text)] == [("amount",), ("count",)]
    assert g.ungrounded({"amount": None, "count": True}, text) == []  # null and booleans are not values to hold


def test_nulled_record_still_matches_the_schema():
    record = {"name": "Invented", "amount": 9.0, "order": "A-1", "count": 2, "title": "t",
              "seller": {"email": "x@y.z", "name": "Acme"}, "lines": [{"sku": "A-1"}, {"sku": "B-2"}],
              "tree": {"label": "A-1", "children": [{"label": "root"}]}}
    found = Grounding.of(PYDANTIC).ungrounded(record, "order a-1, twice")
    assert {pointer(f.path) for f in found} == {"/name", "/amount", "/count", "/seller/email", "/lines/1/sku"}
    nulled = Grounding.nulled(record, [f.path for f in found])
    assert nulled == {"name": None, "amount": None, "order": "A-1", "count": None, "title": "t",
                      "seller": {"email": None, "name": "Acme"}, "lines": [{"sku": "A-1"}, {"sku": None}],
                      "tree": {"label": "A-1", "children": [{"label": "root"}]}}  # nested past the pattern: kept
    jsonschema.validate(nulled, PYDANTIC)


def test_a_string_echoing_the_records_own_choice_is_ungrounded_though_the_text_holds_it():
    schema = {"type": "object", "properties": {
        "product": {"enum": ["credit reporting", "mortgage"]},
        "issue": {"type": "object", "properties": {"kind": {"const": "Late-Fee"}}},
        "company": {"type": ["string", "null"]},
        "notes": {"type": "array", "items": {"type": ["string", "null"]}}}}
    g = Grounding.of(schema)
    text = "Equifax keeps wrong data in my credit reporting; a late fee and a mortgage too."
    record = {"product": "credit reporting", "issue": {"kind": "Late-Fee"}, "company": "Credit Reporting",
              "notes": ["late fee", "mortgage", "Equifax"]}
    found = g.ungrounded(record, text)
    assert [(pointer(f.path), f.value) for f in found] == [
        ("/company", "Credit Reporting"), ("/notes/0", "late fee")]  # "mortgage": not the record's choice
    assert g.ungrounded({**record, "product": "mortgage", "company": "Equifax", "notes": []}, text) == []
