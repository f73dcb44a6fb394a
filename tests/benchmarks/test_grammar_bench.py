"""The grammar coverage benchmark's parts (benchmarks/grammar_bench): instance labels agree with
jsonschema, samples match their regex, texts keep the value, a runaway compile is killed, the
figures count what the outcomes say, and the engines (peers only when installed) agree with
jsonschema on simple schemas."""
from __future__ import annotations

import importlib.util
import json
import pickle
import random
import re

import jsonschema
import pytest
import referencing

from benchmarks.grammar_bench import labels, report
from benchmarks.grammar_bench.corpus import Entry
from benchmarks.grammar_bench.instances import make_tests
from benchmarks.grammar_bench.regex_sample import sample
from benchmarks.grammar_bench.sources import _pickled_fields, bundle_refs
from benchmarks.grammar_bench.texts import variants
from benchmarks.grammar_bench.workers import Outcome, Worker

SCHEMAS = {
    "object": {"type": "object", "properties": {"id": {"type": "integer", "minimum": 1, "maximum": 9},
                                                "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "uniqueItems": True},
                                                "when": {"type": "string", "format": "date"}},
               "required": ["id"], "additionalProperties": False},
    "recursive-draft7": {"$schema": "http://json-schema.org/draft-07/schema#",
                         "definitions": {"node": {"type": "object", "required": ["name"],
                                                  "properties": {"name": {"type": "string", "pattern": "^[a-z]{2,5}$"},
                                                                 "kids": {"type": "array", "items": {"$ref": "#/definitions/node"}}}}},
                         "$ref": "#/definitions/node"},
    "tuple-draft7": {"$schema": "http://json-schema.org/draft-07/schema#", "type": "array",
                     "items": [{"type": "string"}, {"type": "number", "exclusiveMinimum": 0}], "additionalItems": False},
    "union": {"oneOf": [{"type": "object", "properties": {"kind": {"const": "a"}, "x": {"type": "number"}}, "required": ["kind", "x"]},
                        {"type": "object", "properties": {"kind": {"const": "b"}, "y": {"type": "string", "maxLength": 3}},
                         "required": ["kind", "y"]}]},
}
CLASSES = {"object": jsonschema.Draft202012Validator, "recursive-draft7": jsonschema.Draft7Validator,
           "tuple-draft7": jsonschema.Draft7Validator, "union": jsonschema.Draft202012Validator}


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_instances_are_labelled_as_jsonschema_says(name):
    schema = SCHEMAS[name]
    tests = make_tests(schema, f"test/{name}")
    cls = CLASSES[name]
    reference = cls(schema, format_checker=cls.FORMAT_CHECKER)
    assert sum(t["valid"] for t in tests) >= 3 and sum(not t["valid"] for t in tests) >= 3
    for t in tests:
        assert reference.is_valid(t["data"]) == t["valid"], t
    assert make_tests(schema, f"test/{name}") == tests  # seeded: the same instances again


def test_draft_follows_dollar_schema():
    # draft 7 ignores a sibling of $ref; 2020-12 applies it: the labels must follow $schema
    base = {"$defs": {"s": {"type": "string"}}, "$ref": "#/$defs/s", "maxLength": 2}
    checker7 = labels.validator({**base, "$schema": "http://json-schema.org/draft-07/schema#",
                                 "definitions": base["$defs"], "$ref": "#/definitions/s"})
    checker2020 = labels.validator(base)
    assert labels.is_valid(checker7, "long") and not labels.is_valid(checker2020, "long")
    assert labels.draft_of({"$schema": "http://json-schema.org/draft-04/schema#"}) == "draft4"


def test_remote_ref_is_never_fetched():
    checker = labels.validator({"$ref": "https://example.invalid/schema.json"})
    with pytest.raises(labels.Unlabelled):
        labels.is_valid(checker, 1)


@pytest.mark.parametrize("pattern", [r"^https?://.+$", r"^[a-z][a-z0-9-]{2,30}$", r"^(\d+)\.(\d+)\.\1$",
                                     r"[^a-z\s]+", r"^(?:[A-Z]{2}|\d{3})?-x$", r"^\w+@\w+\.com$", r"^[^/]+/v\d$"])
def test_regex_samples_match(pattern):
    rng = random.Random(pattern)
    for _ in range(20):
        assert re.search(pattern, sample(pattern, rng))


def test_texts_are_the_same_json_value_in_both_key_orders():
    schema = {"properties": {"b": {"$ref": "#/$defs/x"}, "a": {"type": "number"}, "c": {"const": {"q": 1, "p": 2}}},
              "$defs": {"x": {"properties": {"z": {}, "y": {}}}}}
    value = {"a": 1.0, "c": {"p": 2, "q": 1}, "b": {"y": 1e-7, "z": 2}, "extra": [1.5e20]}
    texts = variants(value, schema)
    assert all(json.loads(t) == value for t in texts)
    assert '{"a":1.0,"c":{"p":2,"q":1},"b":{"y":1e-07,"z":2},"extra":[1.5e+20]}' in texts  # own order
    assert '{"b":{"z":2,"y":0.0000001},"a":1,"c":{"q":1,"p":2},"extra":[150000000000000000000]}' in texts  # schema's, plain


def test_schema_order_reaches_members_by_pattern_and_additional_properties():
    schema = {"patternProperties": {"^j": {"properties": {"name": {}, "uses": {}}}},
              "additionalProperties": {"properties": {"y": {}, "x": {}}}}
    value = {"job": {"uses": 1, "name": 2}, "other": {"x": 1, "y": 2}}
    assert '{"job":{"name":2,"uses":1},"other":{"y":2,"x":1}}' in variants(value, schema)


def test_bundled_refs_validate_like_the_registry():
    # inside the definitions document they refer to each other locally, as Kubernetes' do
    defs = {"Meta": {"type": "object", "properties": {"name": {"type": "string"}, "owner": {"$ref": "#/$defs/Ref"}},
                     "required": ["name"]},
            "Ref": {"type": "object", "properties": {"uid": {"type": "string"}, "at": {"$ref": "#/$defs/Time"}},
                    "required": ["uid"]},
            "Time": {"type": "string", "format": "date-time"},
            "Unused": {"type": "null"}}
    schema = {"$id": "https://k8s.test/api/pod.json", "type": "object",
              "properties": {"metadata": {"$ref": "/api/d.json#/$defs/Meta"}}}
    bundled = bundle_refs(schema, defs, "/api/d.json#/$defs/")
    assert set(bundled["$defs"]) == {"Meta", "Ref", "Time"}
    resource = referencing.Resource.from_contents({"$defs": defs}, default_specification=referencing.jsonschema.DRAFT202012)
    registry = referencing.Registry().with_resource("https://k8s.test/api/d.json", resource)
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    reference = jsonschema.Draft202012Validator(schema, registry=registry, format_checker=checker)
    mine = jsonschema.Draft202012Validator(bundled, format_checker=checker)
    for doc in [{"metadata": {"name": "a"}}, {"metadata": {}}, {"metadata": {"name": "a", "owner": {}}},
                {"metadata": {"name": "a", "owner": {"uid": "u"}}}, {"metadata": {"name": 3}},
                {"metadata": {"name": "a", "owner": {"uid": "u", "at": "2024-01-01T00:00:00Z"}}},
                {"metadata": {"name": "a", "owner": {"uid": "u", "at": 5}}}]:
        assert mine.is_valid(doc) == reference.is_valid(doc), doc


def test_pickled_fields_read_without_unpickling():
    blob = pickle.dumps({"_content": b'{"type": "object"}', "created_at": "2022", "url": "https://x/s.json",
                         "request": {"url": "https://x/other"}, "status_code": 200}, protocol=4)
    assert _pickled_fields(blob, ("_content", "url")) == {"_content": b'{"type": "object"}', "url": "https://x/s.json"}


def test_runaway_compile_is_killed_and_the_worker_comes_back():
    worker = Worker("tests.benchmarks.fake_engines:SleepyEngine", kill_after_s=1.0, walk_limit_s=30)
    try:
        killed = worker.run(json.dumps({"sleep": 60}), [])
        assert killed.status == "killed"
        refused = worker.run(json.dumps({"refuse": "no thanks"}), [])
        assert (refused.status, refused.error) == ("refused", "no thanks")
        ok = worker.run(json.dumps({}), [(1, [[1, 2], [2, 2]]), (2, [[1, 2]])])
        assert ok.status == "compiled" and ok.walks == [[True, None], [False, None]]
    finally:
        worker.close()


def test_figures_count_the_outcomes():
    entries = [Entry("a", "t", {}, [{"data": 1, "valid": True, "how": "v"}, {"data": "x", "valid": False, "how": "i"}]),
               Entry("b", "t", {}, [{"data": 1, "valid": True, "how": "v"}, {"data": "x", "valid": False, "how": "i"}]),
               Entry("c", "t", {}, [{"data": 1, "valid": True, "how": "v"}]),
               Entry("d", "t", {}, [])]
    outcomes = {"a": Outcome("compiled", wall_ms=2, cpu_ms=2, walks=[[True, True], [False, None]]),  # passes
                "b": Outcome("compiled", wall_ms=5, cpu_ms=5, walks=[[True, True], [True, False]]),  # post-check saves it
                "c": Outcome("killed", "slow", wall_ms=1500, cpu_ms=1500),
                "d": Outcome("refused", "no", wall_ms=1, cpu_ms=1)}
    texts = {e.id: [[json.dumps(t["data"])] for t in e.tests] for e in entries}
    f = report.figures(entries, outcomes, texts, has_post_check=True)
    assert (f.statuses["compiled"], f.statuses["refused"], f.statuses["killed"]) == (2, 1, 1)
    assert (f.counts["over"], f.counts["with_tests"], f.counts["valid"], f.counts["invalid"]) == (1, 3, 2, 2)
    assert (f.raw.passing, f.post.passing, f.raw.invalid_accepted, f.post.invalid_accepted) == (1, 2, 1, 0)
    assert {(x.entry, x.kind) for x in f.failures} >= {("b", "invalid-accepted-by-grammar"), ("c", "killed"), ("c", "over-1s")}


ENGINE_CASES = [({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"], "additionalProperties": False},
                 [{"n": 3}, {"n": -12}], [{}, {"n": "3"}, {"n": 1, "m": 2}]),
                ({"type": "array", "items": {"enum": ["x", "y"]}, "maxItems": 2}, [[], ["x", "y"]], [["z"], ["x", "x", "x"]])]


@pytest.mark.parametrize("name", ["kvx", "llguidance", "xgrammar"])
def test_engines_agree_with_jsonschema_on_simple_schemas(name):
    if name != "kvx" and importlib.util.find_spec(name) is None:
        pytest.skip(f"{name} not installed (the peers extra)")
    from benchmarks.grammar_bench.engines import make_engine
    from benchmarks.grammar_bench.tokenizer import smol_tokenizer

    engine, tok = make_engine(name), smol_tokenizer()
    for schema, good, bad in ENGINE_CASES:
        compiled = engine.compile(json.dumps(schema))
        for value, expected in [(v, True) for v in good] + [(v, False) for v in bad]:
            assert jsonschema.Draft202012Validator(schema).is_valid(value) == expected
            ids = tok.encode(json.dumps(value, separators=(",", ":")), add_special_tokens=False)
            assert compiled.accepts(ids) == expected, (name, schema, value)
