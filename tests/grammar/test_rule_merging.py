"""Rules with equal bodies calling equal rules are merged (pda._merge_equal_rules, the composer's
shape memo): a big schema's alike definitions become one rule each, recursive ones included, and
the merged program accepts exactly what jsonschema does on the cases below, as the unmerged one did."""
import json

import jsonschema
import pytest

from kvx.grammar import GrammarOptions, UnsupportedSchema
from kvx.grammar.automata import compose, graph_kernels, pda
from kvx.grammar.schema.compiler import compile_program

ITEM = {"type": "object", "properties": {"id": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}}},
        "required": ["id"], "additionalProperties": False}
# the same object written out at ten places, and two recursive lists alike in all but their names
ALIKE = {
    "type": "object",
    "properties": {**{f"p{i}": json.loads(json.dumps(ITEM)) for i in range(10)},
                   "left": {"$ref": "#/$defs/a"}, "right": {"$ref": "#/$defs/b"}},
    "additionalProperties": False,
    "$defs": {
        "a": {"type": "object", "properties": {"v": {"type": "integer"}, "next": {"$ref": "#/$defs/a"}},
              "additionalProperties": False},
        "b": {"type": "object", "properties": {"v": {"type": "integer"}, "next": {"$ref": "#/$defs/b"}},
              "additionalProperties": False},
    },
}
CASES = [
    '{}', '{"p0":{"id":1}}', '{"p3":{"id":2,"tags":["x"]},"p7":{"id":3}}', '{"p9":{"tags":[]}}',
    '{"p1":{"id":1,"tags":[1]}}', '{"left":{"v":1,"next":{"v":2,"next":{}}}}',
    '{"right":{"next":{"next":{"v":3}}}}', '{"right":{"next":{"w":1}}}', '{"left":{"next":{"next":[]}}}',
    '{"p2":{"id":1},"left":{},"right":{"v":0}}', '{"p0":{"id":1,"x":2}}',
]


def _program(schema, merge: bool, monkeypatch):
    with monkeypatch.context() as m:
        if not merge:  # numpy's link (the compiled one merges in its call), without its merging step
            m.setattr(graph_kernels, "kernels", lambda: None)
            m.setattr(pda, "_merge_equal_rules", lambda bodies: bodies)
            m.setattr(compose.Composer, "build_shared", compose.Composer.build)
        return compile_program(schema, GrammarOptions()).program


def test_alike_rules_merge_and_accept_the_same(monkeypatch):
    merged, plain = _program(ALIKE, True, monkeypatch), _program(ALIKE, False, monkeypatch)
    # left: the document, the string rule, the top object, one item, one tag list, one recursive
    # list (a and b, with their `next` slots)
    assert merged.live_rules == 6 < plain.live_rules
    assert merged.num_states < plain.num_states
    lists = {k: ALIKE[k] for k in ("type", "$defs", "additionalProperties")}
    lists["properties"] = {k: ALIKE["properties"][k] for k in ("left", "right")}
    assert _program(lists, True, monkeypatch).live_rules == 3 < _program(lists, False, monkeypatch).live_rules
    for text in CASES:
        want = jsonschema.Draft202012Validator(ALIKE).is_valid(json.loads(text))
        assert merged.accepts(text.encode()) == plain.accepts(text.encode()) == want, text


@pytest.mark.parametrize("schema", [
    # equal tables, different callees: the refinement keeps them apart
    {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}},
                                      "b": {"type": "array", "items": {"type": "string"}}},
     "additionalProperties": False},
    # equal rules whose callees differ deeper down
    {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}},
                                      "b": {"type": "array", "items": {"type": "array", "items": {"type": "boolean"}}}},
     "additionalProperties": False},
])
def test_rules_calling_unequal_rules_stay_apart(schema, monkeypatch):
    merged, plain = _program(schema, True, monkeypatch), _program(schema, False, monkeypatch)
    assert merged.live_rules == plain.live_rules
    texts = ['{"a":[1],"b":["x"]}', '{"a":["x"]}', '{"b":[1]}', '{"a":[[1]],"b":[[true]]}', '{"a":[[true]]}',
             '{"b":[[1]]}']
    for text in texts:
        want = jsonschema.Draft202012Validator(schema).is_valid(json.loads(text))
        assert merged.accepts(text.encode()) == want, text


def test_the_states_cap_counts_the_merged_program(monkeypatch):
    """The cap on all rules together is on the table the program holds: a body shared by many rules
    (the ten alike items) counts once. Counted per rule, ruff's pyproject schema (24 rules sharing a
    38,164-state body) was refused at 929,745 states for a program of 46,860."""
    merged, plain = _program(ALIKE, True, monkeypatch), _program(ALIKE, False, monkeypatch)
    assert plain.num_states > merged.num_states
    with monkeypatch.context() as m:
        m.setattr(pda, "MAX_STATES", merged.num_states)
        program = compile_program(ALIKE, GrammarOptions()).program
        assert program.num_states == merged.num_states
        for text in CASES:
            assert program.accepts(text.encode()) == jsonschema.Draft202012Validator(ALIKE).is_valid(json.loads(text))
        m.setattr(pda, "MAX_STATES", merged.num_states - 1)
        with pytest.raises(UnsupportedSchema, match="states in all rules"):
            compile_program(ALIKE, GrammarOptions())


def test_a_value_reached_by_two_routes_is_one_rule(monkeypatch):
    """A value's context (the schemas that fix its members' order) keeps only the schemas that say
    something of order or members: two draft-7 `$ref`s to one definition (the `$ref` replaces its
    siblings, so both values are the definition alone) are one rule from the walk on, not a rule per
    referrer merged by `link` (SchemaStore's renovate: 3.1 -> 0.2 s). The language is the one the
    unmerged contexts give, and jsonschema's."""
    from kvx.grammar.schema.applicators import Applicators

    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "additionalProperties": False,
              "properties": {"a": {"$ref": "#/definitions/t", "description": "one"}, "b": {"$ref": "#/definitions/t"},
                             "c": {"type": "array", "items": {"$ref": "#/definitions/t"}}},
              "definitions": {"t": {"type": "object", "required": ["x"], "additionalProperties": False,
                                    "properties": {"x": {"type": "integer"},
                                                   "y": {"type": "object", "properties": {"z": {"type": "string"}}}}}}}
    merged = compile_program(schema, GrammarOptions()).program
    with monkeypatch.context() as m:
        m.setattr(Applicators, "ordering", lambda self, context: context)
        plain = compile_program(schema, GrammarOptions()).program
    assert merged.num_rules < plain.num_rules
    texts = ['{"a":{"x":1}}', '{"a":{"x":1,"y":{"z":"q"}},"b":{"x":2}}', '{"c":[{"x":1},{"x":2,"y":{}}]}',
             '{"a":{"y":{}}}', '{"b":{"x":"1"}}', '{"c":[{"x":1,"w":0}]}', '{"a":{"x":1,"y":{"z":1}}}']
    for text in texts:
        want = jsonschema.Draft7Validator(schema).is_valid(json.loads(text))
        assert merged.accepts(text.encode()) == plain.accepts(text.encode()) == want, text
