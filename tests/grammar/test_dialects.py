"""Schemas that mix drafts, judged against jsonschema (the record check): a subschema's own `$schema`
switches the draft it is read in, and a reference to a draft's meta-schema reads the copy jsonschema
ships (nothing is fetched)."""
import json

import jsonschema
import pytest
from grammar_fixtures import first_disagreement

from kvx.grammar import UnsupportedSchema
from kvx.grammar.options import GrammarOptions
from kvx.grammar.schema.compiler import compile_program

D3 = "http://json-schema.org/draft-03/schema#"
D4, D6, D7 = (f"http://json-schema.org/draft-0{n}/schema#" for n in (4, 6, 7))
D2019, D2020 = "https://json-schema.org/draft/2019-09/schema", "https://json-schema.org/draft/2020-12/schema"
VALUES = [1, 2, 3, 7, 1.5, "s", None, {}, [1], [1, 2], ["s"]]


@pytest.mark.parametrize("schema", [
    # draft 7 inside 2020-12: the $ref replaces its siblings (integers, not integers that are strings)
    {"$schema": D2020, "$defs": {"i": {"type": "integer"}},
     "properties": {"a": {"$schema": D7, "$ref": "#/$defs/i", "type": "string"}}},
    # 2020-12 inside draft 7: both apply
    {"$schema": D7, "definitions": {"i": {"type": "integer"}},
     "properties": {"a": {"$schema": D2020, "$ref": "#/definitions/i", "minimum": 2}}},
    # 2020-12 region reached by a $ref from draft 7: its schemas read in 2020-12 (the $ref's siblings too)
    {"$schema": D7, "definitions": {"i": {"type": "integer"},
                                    "y": {"$schema": D2020, "properties": {"a": {"$ref": "#/definitions/i", "minimum": 2}}}},
     "$ref": "#/definitions/y"},
    # const under not: a keyword of draft 7, which draft 4 lacks, and the reverse
    {"$schema": D4, "properties": {"a": {"$schema": D7, "not": {"const": 1}}}},
    {"$schema": D2020, "properties": {"a": {"$schema": D4, "not": {"const": 1}}}},
    {"$schema": D4, "properties": {"a": {"$schema": D7, "if": {"const": 1}, "then": False}}},
    # draft 7's tuple items inside 2020-12, 2020-12's prefixItems inside draft 7
    {"$schema": D2020, "properties": {"a": {"$schema": D7, "items": [{"type": "integer"}], "additionalItems": False}}},
    {"$schema": D7, "properties": {"a": {"$schema": D2020, "prefixItems": [{"type": "integer"}], "items": False}}},
    # a draft-4 resource (its `id`) inside 2020-12, and its boolean exclusiveMaximum
    {"$schema": D2020, "$defs": {"x": {"$schema": D4, "id": "http://example.com/x", "type": "number", "maximum": 3,
                                       "exclusiveMaximum": True}},
     "properties": {"a": {"$ref": "http://example.com/x"}}},
])
def test_a_subschema_with_its_own_schema_is_read_in_its_draft(schema):
    """jsonschema switches validators at every subschema that names a $schema. The grammar read the
    whole document in the root's draft: draft 7's $ref-replaces-siblings was applied (or not) by the
    root, and a draft-7 `const` under `not` in a draft-4 document was read as nothing, so the
    negation allowed no value."""
    assert first_disagreement(schema, [{"a": v} for v in VALUES]) is None, schema


def test_a_keyword_of_the_subschemas_own_draft_is_not_called_foreign():
    schema = {"$schema": D7, "properties": {"a": {"$schema": D2020, "prefixItems": [{"type": "integer"}]}}}
    assert compile_program(schema, GrammarOptions(extra_keys="schema")).warnings == []
    schema = {"$schema": D7, "properties": {"a": {"prefixItems": [{"type": "integer"}]}}}
    assert any("'prefixItems' at /properties/a is not one of the schema's dialect (draft7)" in w
               for w in compile_program(schema, GrammarOptions(extra_keys="schema")).warnings)


def test_a_ref_whose_siblings_two_drafts_read_apart_is_refused():
    """jsonschema applies the $ref-replaces-siblings rule of the validator that descends into a schema:
    reached by a $ref from a draft-7 region, a 2020-12 `{$ref, type}` is read as draft 7 reads it, by
    its enclosing schema as 2020-12 reads it. The grammar refuses rather than pick one."""
    schema = {"$schema": D2020, "$defs": {"x": {"$ref": "#/$defs/i", "type": "string"}, "i": {"type": "integer"}},
              "properties": {"a": {"$schema": D7, "properties": {"b": {"$ref": "#/$defs/x"}}}}}
    with pytest.raises(UnsupportedSchema, match=r"at /properties/a/properties/b/\$ref \(it reaches /\$defs/x.*"
                                                r"referring schema's draft \(draft7\), the grammar by the draft "
                                                r"around them \(2020-12\)"):
        compile_program(schema)


def test_a_subschema_in_draft_3_is_refused():
    schema = {"$schema": D2020, "properties": {"a": {"$schema": D3, "type": "integer"}}}
    with pytest.raises(UnsupportedSchema, match=r"'\$schema' at /properties/a \(draft 3\)"):
        compile_program(schema)


# schemas as values, in the meta-schemas' property order (declared keys are written in schema order)
SCHEMAS_AS_VALUES = [{"type": "string"}, True, False, 5, "s", {"type": "strin"}, {"minimum": "x"},
                     {"properties": {"a": {"type": 3}}}, {"properties": {"a": {"type": "integer"}}},
                     {"required": []}, {"required": ["a", "a"]}, {"minimum": 1, "exclusiveMinimum": True},
                     {"exclusiveMinimum": 3}, {"items": [{"type": "string"}]}, {"enum": []}, {"const": {"a": [1]}}]


@pytest.mark.parametrize("ref", [D4, D6, D7, D4 + "/properties/default", D7 + "/definitions/simpleTypes"])
@pytest.mark.parametrize("root", [D4, D7, D2020])
def test_a_drafts_meta_schema_is_read_as_jsonschema_ships_it(ref, root):
    """A field that holds a JSON Schema (`$ref` to a draft's meta-schema) was refused as a remote
    reference; jsonschema resolves those URIs offline, and now the grammar reads the same documents.
    The check rejects what the grammar cannot compare (uniqueItems of `required`) after generation."""
    schema = {"$schema": root, "type": "object", "properties": {"schema": {"$ref": ref}}, "required": ["schema"]}
    result = compile_program(schema, GrammarOptions(extra_keys="schema"))
    check = jsonschema.validators.validator_for(schema)(schema)
    for value in SCHEMAS_AS_VALUES:
        instance = {"schema": value}
        accepted = result.program.accepts(json.dumps(instance, separators=(",", ":")).encode())
        valid = check.is_valid(instance)
        post_checked = value == {"required": ["a", "a"]} and "uniqueItems" in " ".join(result.post_checks)
        assert accepted == valid or (accepted and post_checked), (value, accepted, valid)


def test_a_meta_schema_is_named_by_its_uri_in_messages():
    schema = {"$schema": D7, "properties": {"schema": {"$ref": D7}}}
    warnings = compile_program(schema).warnings
    assert any(f'at {D7}/properties/$id is not known' in w for w in warnings), warnings


@pytest.mark.parametrize("ref, refusal", [
    ("https://json-schema.org/draft-07/schema#", "remote reference"),  # not a URI jsonschema ships
    (D3, "remote reference"),
    (D2020, r"'\$dynamicRef' at https://json-schema.org/draft/2020-12/meta/applicator#/properties/"),
    (D2019, r"'\$recursiveRef' at https://json-schema.org/draft/2019-09/meta/applicator#/properties/"),
])
def test_what_the_meta_schemas_do_not_cover_is_refused(ref, refusal):
    with pytest.raises(UnsupportedSchema, match=refusal):
        compile_program({"properties": {"schema": {"$ref": ref}}})


@pytest.mark.parametrize("schema", [
    {"$schema": D7, "type": "array", "not": {"items": [{"type": "integer"}], "additionalItems": False}},
    {"$schema": D7, "type": "array", "not": {"items": [{"type": "integer"}, True], "additionalItems": True}},
    {"$schema": D7, "type": "array", "not": {"additionalItems": False, "minItems": 2}},
    {"$schema": D4, "type": "array", "not": {"additionalItems": True, "maxItems": 1}},
    {"$schema": D4, "type": "array", "not": {"items": {"type": "integer"}, "additionalItems": False}},
])
def test_a_negated_additional_items_matches_jsonschema(schema):
    """Swagger 2.0's `vendorExtension` (`additionalItems: true`, negated where a oneOf's branches
    exclude each other) was refused as a negation kvx could not write, and so was an items array."""
    arrays = [[], [1], ["s"], [1, 2], [1, "s"], ["s", 1], [1, 2, 3], 1]
    assert first_disagreement(schema, arrays) is None
