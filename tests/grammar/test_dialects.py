"""Schemas that mix drafts, judged against jsonschema (the record check): a subschema's own `$schema`
switches the draft it is read in, and a reference to a draft's meta-schema reads the copy jsonschema
ships (nothing is fetched)."""
import itertools
import json
import random

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
    # a definition of the root (2020-12) reached only from draft 7: read in draft 7, as the check reads it
    {"$schema": D2020, "$defs": {"x": {"$ref": "#/$defs/i", "type": "string"}, "i": {"type": "integer"}},
     "properties": {"a": {"$schema": D7, "properties": {"b": {"$ref": "#/$defs/x"}}}}},
    # a draft-4 resource (its `id`) inside 2020-12, and its boolean exclusiveMaximum
    {"$schema": D2020, "$defs": {"x": {"$schema": D4, "id": "http://example.com/x", "type": "number", "maximum": 3,
                                       "exclusiveMaximum": True}},
     "properties": {"a": {"$ref": "http://example.com/x"}}},
])
def test_a_subschema_with_its_own_schema_is_read_in_its_draft(schema):
    """jsonschema switches validators at every subschema that names a $schema, and reads any other in
    the draft of the validator that reaches it. The grammar read the whole document in the root's
    draft: draft 7's $ref-replaces-siblings was applied (or not) by the root, and a draft-7 `const`
    under `not` in a draft-4 document was read as nothing, so the negation allowed no value."""
    assert first_disagreement(schema, [{"a": v} for v in VALUES]) is None, schema


def test_a_keyword_of_the_subschemas_own_draft_is_not_called_foreign():
    schema = {"$schema": D7, "properties": {"a": {"$schema": D2020, "prefixItems": [{"type": "integer"}]}}}
    assert compile_program(schema, GrammarOptions(extra_keys="schema")).warnings == []
    schema = {"$schema": D7, "properties": {"a": {"prefixItems": [{"type": "integer"}]}}}
    assert any("'prefixItems' at /properties/a is not one of the schema's dialect (draft7)" in w
               for w in compile_program(schema, GrammarOptions(extra_keys="schema")).warnings)


def test_a_schema_two_drafts_reach_is_refused():
    """jsonschema reads a schema that names no $schema in the draft of the validator that reaches it
    (a $ref from a draft-7 schema: draft 7, $ref-replaces-siblings included), so a schema reached
    from both sides would mean two things: refused, naming it."""
    schema = {"$schema": D2020, "$defs": {"x": {"$ref": "#/$defs/i", "type": "string"}, "i": {"type": "integer"}},
              "properties": {"a": {"$schema": D7, "properties": {"b": {"$ref": "#/$defs/x"}}},
                             "c": {"$ref": "#/$defs/x"}}}
    with pytest.raises(UnsupportedSchema, match=r"^unsupported keyword '\$ref' at /\$defs/x \(.*2020-12 and draft7\)"):
        compile_program(schema)
    del schema["properties"]["c"]  # reached from draft 7 alone: read as draft 7 reads it
    assert first_disagreement(schema, [{"a": {"b": v}} for v in VALUES]) is None


def test_a_subschema_in_draft_3_is_refused():
    schema = {"$schema": D2020, "properties": {"a": {"$schema": D3, "type": "integer"}}}
    with pytest.raises(UnsupportedSchema, match=r"'\$schema' at /properties/a \(draft 3\)"):
        compile_program(schema)


# schemas as values, in the meta-schemas' property order (declared keys are written in schema order)
SCHEMAS_AS_VALUES = [{"type": "string"}, True, False, 5, "s", {"type": "strin"}, {"minimum": "x"},
                     {"properties": {"a": {"type": 3}}}, {"properties": {"a": {"type": "integer"}}},
                     {"required": []}, {"required": ["a", "a"]}, {"minimum": 1, "exclusiveMinimum": True},
                     {"exclusiveMinimum": 3}, {"items": [{"type": "string"}]}, {"enum": []}, {"const": {"a": [1]}}]


@pytest.mark.parametrize("ref", [D4, D6, D7, D4 + "/properties/default", D7 + "/definitions/simpleTypes", D2020])
@pytest.mark.parametrize("root", [D4, D7, D2020])
def test_a_drafts_meta_schema_is_read_as_jsonschema_ships_it(ref, root):
    """A field that holds a JSON Schema (`$ref` to a draft's meta-schema) was refused as a remote
    reference; jsonschema resolves those URIs offline, and now the grammar reads the same documents
    (2020-12's `"$dynamicRef": "#meta"` lands on its root on every route: dynamic_scope.py). The
    check rejects what the grammar cannot compare (uniqueItems of `required`) after generation."""
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


# suite's dynamicRef.json group 3, its list's items in both spellings: a $dynamicRef, or a $ref, which
# jsonschema resolves dynamically too when it names a $dynamicAnchor
def _typical_dynamic_resolution(keyword: str) -> dict:
    return {"$schema": D2020, "$id": "https://example.com/root", "$ref": "list",
            "$defs": {"foo": {"$dynamicAnchor": "items", "type": "string"},
                      "list": {"$id": "list", "type": "array", "items": {keyword: "#items"},
                               "$defs": {"items": {"$dynamicAnchor": "items"}}}}}


@pytest.mark.parametrize("keyword", ["$dynamicRef", "$ref"])
def test_a_reference_to_a_dynamic_anchor_lands_where_the_check_lands(keyword):
    """The anchor `items` is carried twice: entered through the root, the list's reference lands on
    the root's (strings), not on its own (anything). It was refused (both carriers counted); a
    `$ref` read the list's own anchor, where the check reads the root's."""
    schema = _typical_dynamic_resolution(keyword)
    assert first_disagreement(schema, [[], ["a"], [1], ["a", 2], [None], "a"]) is None


def test_a_dynamic_reference_landing_by_route_is_refused_saying_so():
    """suite's group 11: the same $dynamicRef lands on one anchor through `then` and another through
    `else`; no one reading serves both."""
    schema = {"$schema": D2020, "$id": "https://example.com/main",
              "if": {"properties": {"kindOfList": {"const": "numbers"}}, "required": ["kindOfList"]},
              "then": {"$ref": "numberList"}, "else": {"$ref": "stringList"},
              "$defs": {"genericList": {"$id": "genericList", "properties": {"list": {"items": {"$dynamicRef": "#itemType"}}},
                                        "$defs": {"defaultItemType": {"$comment": "bookend", "$dynamicAnchor": "itemType"}}},
                        "numberList": {"$id": "numberList", "$defs": {"itemType": {"$dynamicAnchor": "itemType", "type": "number"}},
                                       "$ref": "genericList"},
                        "stringList": {"$id": "stringList", "$defs": {"itemType": {"$dynamicAnchor": "itemType", "type": "string"}},
                                       "$ref": "genericList"}}}
    with pytest.raises(UnsupportedSchema, match=r"'\$dynamicRef' at /\$defs/genericList/properties/list/items \(where it "
                                                r"lands depends on the route"):
        compile_program(schema)


def _resources(rng) -> dict:
    """A document of 2-5 resources that carry the dynamic anchor `a` or not, refer to each other by
    $ref or $dynamicRef (plain, to `#a`, to `rK#a`) from object members, and nest resources that
    refer again."""
    names = [f"r{i}" for i in range(rng.randint(2, 5))]
    carriers = [n for n in names if rng.random() < 0.6] or names[:1]  # every "#a" names an anchor that is there
    leaves = [{"type": "integer"}, {"type": "string"}, {"type": "null"}, {}]

    def reference(own: bool) -> dict:
        targets = [rng.choice(names), f"{rng.choice(carriers)}#a"] + (["#a"] if own else [])
        return {rng.choice(["$dynamicRef", "$ref"]): rng.choice(targets)}

    defs = {}
    for i, name in enumerate(names):
        node = {"$id": name, **({"$dynamicAnchor": "a"} if name in carriers else {})}
        if i and rng.random() < 0.35:
            node.update(rng.choice(leaves))
        else:
            node.update({"type": "object", "additionalProperties": False,
                         "properties": {p: reference(name in carriers) if rng.random() < 0.85 else dict(rng.choice(leaves))
                                        for p in "pq"}})
            if rng.random() < 0.4:
                nested = rng.random() < 0.5
                node["allOf"] = [{"$id": f"{name}n", "properties": {"q": reference(nested)},
                                  **({"$dynamicAnchor": "a"} if nested else {})}]
        defs[name] = node
    root = {"$schema": D2020, "$id": "https://example.com/root", "$ref": rng.choice(names), "$defs": defs}
    if rng.random() < 0.3:
        root["$dynamicAnchor"] = "a"
    if rng.random() < 0.2:
        del root["$id"]  # the resolver never puts an empty base in its dynamic scope
    return root


DRAWS = 50  # documents per seed


def _key_orders(value):
    if not isinstance(value, dict):
        yield value
        return
    for keys in itertools.permutations(value):
        for parts in itertools.product(*[list(_key_orders(value[k])) for k in keys]):
            yield dict(zip(keys, parts))


@pytest.mark.parametrize("seed", range(4))
def test_random_dynamic_scopes_match_jsonschema(seed):
    """References among resources that carry a dynamic anchor, against jsonschema's resolver (its
    dynamic scope: the bases references were followed from); a valid value counts as accepted in
    any key order (declared keys are written in schema order). Run over 3,600 documents (72 seeds)
    when written: none disagreed. The code before fails here: it refused most of them, and read a
    $ref naming a dynamic anchor as the anchor it names."""
    rng = random.Random(seed)
    compiled = 0
    for _ in range(DRAWS):
        schema = _resources(rng)
        try:
            program = compile_program(schema, GrammarOptions(extra_keys="schema")).program
        except UnsupportedSchema:
            continue
        compiled += 1
        check = jsonschema.Draft202012Validator(schema)
        for _ in range(30):
            value = _random_members(rng)
            accepted = any(program.accepts(json.dumps(v, separators=(",", ":")).encode()) for v in _key_orders(value))
            assert accepted == check.is_valid(value), (json.dumps(schema), value)
    assert compiled >= DRAWS * 3 // 4


def _random_members(rng, depth: int = 0):
    if depth >= 3 or rng.random() < 0.4:
        return rng.choice([1, "s", None, True])
    return {k: _random_members(rng, depth + 1) for k in "pq" if rng.random() < 0.7}


@pytest.mark.parametrize("keyword, refusal", [
    ("$dynamicRef", r"'\$dynamicRef' at /\$defs/list/items \(where it lands depends on the route"),
    ("$ref", r"'\$ref' at /\$defs/list/items \(it names a \$dynamicAnchor, which the record check resolves "
             r"dynamically, and where it lands depends on the route\)")])
def test_a_reference_landing_by_route_is_refused_in_its_own_words(keyword, refusal):
    """`#t` lands on s1's anchor through `a` and on s2's through `b`."""
    schema = {"$schema": D2020, "$id": "https://example.com/r", "properties": {"a": {"$ref": "s1"}, "b": {"$ref": "s2"}},
              "$defs": {"list": {"$id": "list", "items": {keyword: "#t"}, "$defs": {"t": {"$dynamicAnchor": "t"}}},
                        "s1": {"$id": "s1", "$ref": "list", "$defs": {"t": {"$dynamicAnchor": "t", "type": "integer"}}},
                        "s2": {"$id": "s2", "$ref": "list", "$defs": {"t": {"$dynamicAnchor": "t", "type": "string"}}}}}
    with pytest.raises(UnsupportedSchema, match=refusal):
        compile_program(schema)


def test_a_draft7_ref_to_a_dynamic_anchor_keeps_ignoring_its_siblings():
    """Rewritten to where it lands, a draft-7 `$ref` beside `type` still replaces its siblings, as
    the check reads it there (lands on the root's anchor: the outermost carrier)."""
    schema = {"$schema": D2020, "$id": "https://example.com/root", "$dynamicAnchor": "a", "type": "object",
              "properties": {"x": {"$ref": "old"}},
              "$defs": {"old": {"$id": "old", "$schema": D7,
                                "properties": {"y": {"$ref": "https://example.com/n#a", "type": "string"}}},
                        "n": {"$id": "n", "$dynamicAnchor": "a", "type": ["integer", "object"]}}}
    values = [{"x": {"y": v}} for v in (1, "s", {}, None)] + [{}, {"x": 1}]
    assert first_disagreement(schema, values) is None
    assert compile_program(schema).program.accepts(b'{"x":{"y":{}}}')
