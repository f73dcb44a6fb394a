"""if/then chains keyed on one member (SchemaStore's Minecraft and Cloudify configs): conjunctions
that ask the key for two values are dropped before they multiply, and the language stays
jsonschema's."""
import json

import jsonschema
import pytest
from grammar_fixtures import smol_tokenizer

from kvx.grammar import GrammarOptions, UnsupportedSchema, compile_schema
from kvx.grammar.schema.applicators import MAX_ALTERNATIVES


def _chain(n: int, required: bool, objects: bool) -> dict:
    """n blocks `if type == t{i} then {v: <type i>}`; the value types cycle so they disagree."""
    kinds = ["integer", "string", "boolean"]
    schema = {"allOf": [{"if": {"properties": {"type": {"const": f"t{i}"}}},
                         "then": {"properties": {"v": {"type": kinds[i % 3]}}}} for i in range(n)],
              "properties": {"type": {"type": "string"}, "v": {}}}
    if required:
        schema["required"] = ["type"]
    if objects:
        schema["type"] = "object"
    return schema


def _agrees(schema: dict, texts: list[str]) -> None:
    """JSON Schema's reading (extra keys "schema"): "declared" writes an untyped root as an object."""
    grammar = compile_schema(schema, smol_tokenizer(), GrammarOptions(extra_keys="schema"))
    check = jsonschema.Draft202012Validator(schema)
    for text in texts:
        assert grammar.accepts_text(text) == check.is_valid(json.loads(text)), text


def test_a_required_discriminator_keeps_one_branch_per_value():
    """10 blocks are 2^10 = 1,024 conjunctions, past the limit of 256; with `type` required at most
    one `if` holds, so 12 remain (one per value, plus none of them) and the schema compiles."""
    schema = _chain(10, required=True, objects=True)
    assert 2 ** 10 > MAX_ALTERNATIVES
    texts = ['{"type":"t0","v":1}', '{"type":"t0","v":"x"}', '{"type":"t1","v":"x"}', '{"type":"t1","v":1}',
             '{"type":"t2","v":true}', '{"type":"t9","v":1}', '{"type":"other","v":[1]}', '{"v":1}', '"t0"',
             '{"type":"t5","v":"s"}', '{"type":"t5"}']
    _agrees(schema, texts)


def test_an_optional_discriminator_is_not_pruned():
    """Without `required`, an object without `type` satisfies every `if` (properties holds
    vacuously), so all the thens apply at once: no conjunction may be dropped. 4 blocks: 16."""
    schema = _chain(4, required=False, objects=True)
    _agrees(schema, ['{"v":1}', '{}', '{"type":"t0","v":1}', '{"type":"t0","v":"x"}', '{"type":"t3","v":1}',
                     '{"type":"t7","v":[]}'])


def test_a_value_that_may_be_no_object_keeps_its_alternative():
    """Without `type: object` a string satisfies every `if` and `required`: the conjunction of all
    the ifs (no piece of it restricted to objects) stays and strings are written; conjunctions with
    a negated `if` (an object with `type`, negate.py) are still pruned, so 10 blocks compile."""
    for n in (4, 10):
        _agrees(_chain(n, required=True, objects=False),
                ['"a string"', '3', '{"type":"t1","v":"x"}', '{"type":"t1","v":1}', '{"v":1}', '{"type":"t4","v":1}'])


def test_pruning_stops_at_the_combination_limit_otherwise():
    """Blocks on different keys do not exclude each other: 2^9 conjunctions are still refused."""
    schema = {"type": "object", "allOf": [{"if": {"properties": {f"k{i}": {"const": 1}}},
                                           "then": {"properties": {"v": {"type": "integer"}}}} for i in range(9)]}
    with pytest.raises(UnsupportedSchema, match="anyOf/oneOf/if combinations"):
        compile_schema(schema, smol_tokenizer())


def test_negated_ifs_with_type_and_required_are_pruned_too():
    """v2ray's configs write `if: {type: object, required: [protocol], properties: {protocol: {const:
    X}}}`: its negation is a union of three (not an object; no `protocol`; another protocol), so 8
    blocks are 9^8 conjunctions before pruning. A conjunction asking for two types, or for a key
    both required and absent, is empty as well."""
    blocks = [{"if": {"type": "object", "required": ["protocol"], "properties": {"protocol": {"const": f"p{i}"}}},
               "then": {"type": "object", "properties": {"settings": {"type": ["integer", "string", "boolean"][i % 3]}}}}
              for i in range(8)]
    schema = {"type": "object", "required": ["protocol"], "allOf": blocks,
              "properties": {"protocol": {"type": "string"}, "settings": {}}}
    _agrees(schema, ['{"protocol":"p0","settings":1}', '{"protocol":"p0","settings":"x"}', '{"protocol":"p1","settings":"x"}',
                     '{"protocol":"p7","settings":1}', '{"protocol":"zz","settings":[]}', '{"settings":1}', '[]'])


def test_numbers_meet_integers():
    """`integer` and `number` share the integers: that conjunction stays, the others go."""
    schema = {"allOf": [{"anyOf": [{"type": "integer"}, {"type": "string"}]},
                        {"anyOf": [{"type": "number"}, {"type": "boolean"}]}]}
    _agrees(schema, ["3", "1.5", '"x"', "true", "null"])


def test_object_values_equal_whatever_their_key_order_are_one_value():
    """`const` and `enum` naming the same object in two key orders agree: the conjunction holds
    (it used to be dropped as asking the key for two values, and the schema refused as empty)."""
    schema = {"type": "object", "required": ["k"],
              "allOf": [{"properties": {"k": {"const": {"a": 1, "b": 2}}}},
                        {"anyOf": [{"properties": {"k": {"enum": [{"b": 2, "a": 1}]}}},
                                   {"properties": {"k": {"type": "integer"}}, "required": ["z"]}]},
                        {"anyOf": [{"required": ["k"]}, {"required": ["q"]}]}]}
    _agrees(schema, ['{"k":{"a":1,"b":2}}', '{"k":{"a":1,"b":3}}', '{"k":1,"z":0}', '{}'])
