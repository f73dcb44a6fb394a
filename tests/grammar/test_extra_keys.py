"""GrammarOptions.extra_keys: where an object's schema declares its keys and says nothing of others,
"declared" (the default) writes none of the others, "schema" any (JSON Schema's own default).
Checked against jsonschema: every document either mode accepts is valid, and "declared" accepts
exactly the valid ones without undeclared keys in such objects."""
import json

import jsonschema
import pytest

from kvx.grammar.options import GrammarOptions
from kvx.grammar.schema.compiler import compile_program

DECLARED, SCHEMA = GrammarOptions(extra_keys="declared"), GrammarOptions(extra_keys="schema")

PYDANTIC = {  # what Pydantic writes for models without extra="forbid": no additionalProperties anywhere
    "$defs": {"Item": {"type": "object", "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}},
                       "required": ["sku"]}},
    "type": "object",
    "properties": {"name": {"type": "string"}, "items": {"type": "array", "items": {"$ref": "#/$defs/Item"}},
                   "meta": {"type": "object"}},
    "required": ["name"],
}
# (document, has an undeclared key in an object that declares its keys)
DOCS = [
    ({"name": "a"}, False),
    ({"name": "a", "items": [{"sku": "x", "qty": 2}]}, False),
    ({"name": "a", "meta": {"anything": 1, "goes": [True]}}, False),  # `meta` declares no keys: all allowed
    ({"name": "a", "note": "invented"}, True),
    ({"name": "a", "items": [{"sku": "x", "colour": "red"}]}, True),
    ({"name": 1}, False),  # invalid: rejected by both
]


def _accepts(program, doc) -> bool:
    return program.accepts(json.dumps(doc, separators=(",", ":")).encode())


@pytest.mark.parametrize("doc,undeclared", DOCS)
def test_declared_mode_accepts_the_valid_documents_without_undeclared_keys(doc, undeclared):
    valid = jsonschema.Draft202012Validator(PYDANTIC).is_valid(doc)
    assert _accepts(compile_program(PYDANTIC, SCHEMA).program, doc) == valid
    assert _accepts(compile_program(PYDANTIC, DECLARED).program, doc) == (valid and not undeclared)


@pytest.mark.parametrize("other", [True, {"type": "integer"}, {}])
def test_a_schema_that_speaks_of_other_keys_keeps_them(other):
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": other}
    doc = {"a": 1, "b": 2}
    assert jsonschema.Draft202012Validator(schema).is_valid(doc)
    assert _accepts(compile_program(schema, DECLARED).program, doc)


def test_pattern_properties_stay_and_other_keys_go():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "patternProperties": {"^x_": {"type": "integer"}}}
    program = compile_program(schema, DECLARED).program
    assert _accepts(program, {"a": 1, "x_1": 2})
    assert not _accepts(program, {"a": 1, "y": 2})


def test_other_keys_stay_where_min_properties_needs_them():
    """Two members at least but one declared key: closing the object would leave no document."""
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "minProperties": 2}
    program = compile_program(schema, DECLARED).program
    assert _accepts(program, {"a": 1, "b": 2}) and not _accepts(program, {"a": 1})


def test_the_objects_kept_to_their_keys_are_named():
    warnings = compile_program(PYDANTIC, DECLARED).warnings
    closed = [w for w in warnings if "declared keys only" in w]
    assert len(closed) == 1 and "/$defs/Item" in closed[0] and "/properties/meta" not in closed[0]
    assert not any("declared keys only" in w for w in compile_program(PYDANTIC, SCHEMA).warnings)


UNTYPED = {  # CloudFormation's resource schemas: no `type` anywhere, so any JSON value is valid
    "properties": {"Name": {"minLength": 1}, "Port": {"minimum": 1}, "Tags": {"items": {"required": ["Key"]}},
                   "Note": {"description": "no keyword that describes a type"},
                   "Maybe": {"properties": {"a": {"type": "integer"}}, "nullable": True}},
    "required": ["Name"], "additionalProperties": False,
}


@pytest.mark.parametrize("doc,described", [
    ({"Name": "a"}, True),
    ({"Name": "a", "Port": 8, "Tags": [{"Key": "k"}], "Note": [1, {"x": None}], "Maybe": None}, True),
    ({"Name": "a", "Maybe": {"a": 1}}, True),
    ("just a string", False),  # valid: the root names no type
    (7, False),
    ({"Name": 5}, False),  # minLength describes a string
    ({"Name": "a", "Port": "8"}, False),
    ({"Name": "a", "Tags": [{"Key": "k"}, "x"]}, False),
    ({"Name": "a", "Tags": {"Key": "k"}}, False),
])
def test_declared_mode_writes_an_untyped_schema_as_the_type_its_keywords_describe(doc, described):
    assert jsonschema.Draft202012Validator(UNTYPED).is_valid(doc)
    assert _accepts(compile_program(UNTYPED, DECLARED).program, doc) == described
    assert _accepts(compile_program(UNTYPED, SCHEMA).program, doc)  # JSON Schema's reading: any value


def test_the_untyped_schemas_written_as_their_keywords_type_are_named():
    warnings = [w for w in compile_program(UNTYPED, DECLARED).warnings if "names no 'type'" in w]
    assert len(warnings) == 1 and warnings[0].endswith(": /, /properties/Name, /properties/Port, "
                                                       "/properties/Tags, /properties/Maybe and 1 more")
    assert not any("names no 'type'" in w for w in compile_program(UNTYPED, SCHEMA).warnings)
    assert not any("names no 'type'" in w for w in compile_program(PYDANTIC, DECLARED).warnings)
