"""Acceptance against the official JSON-Schema-Test-Suite (draft 2020-12, top-level files).

For every group whose schema compiles, each valid instance written the way the grammar writes
JSON must be accepted and each invalid one rejected, except the documented inherent cases in
EXCEPTIONS (see docs/grammar_compiler.md) and invalid instances whose every error is a keyword the
compiler leaves to the check after generation (its post_checks); groups that do not compile must
raise UnsupportedSchema.
"""
from __future__ import annotations

import json
import math
from decimal import Decimal
from pathlib import Path

import pytest

from jsonschema import Draft202012Validator
from jsonschema.validators import validator_for

from kvx.grammar.errors import UnsupportedSchema
from kvx.grammar.options import GrammarOptions
from kvx.grammar.schema.compiler import compile_program
from kvx.grammar.schema.serialize import canonical_json
from kvx.grammar.schema.values import integral_ints

JSON_SCHEMA = GrammarOptions(extra_keys="schema")  # the suite tests JSON Schema's semantics: other keys allowed
SUITE = Path(__file__).resolve().parents[2].parent / "shared" / "json-schema-test-suite" / "tests" / "draft2020-12"


def _plain(v):
    """Floats re-written without exponent (bounded numbers are emitted that way)."""
    if isinstance(v, float) and math.isfinite(v):
        return _Plain(format(Decimal(repr(v)), "f"))
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v


class _Plain(float):
    def __new__(cls, text):
        obj = super().__new__(cls, text)
        obj.text = text
        return obj

    def __repr__(self):
        return self.text


def _post_checked(schema, instance, post_checks) -> bool:
    """Every error jsonschema finds is under a keyword the compiler leaves to the post-check."""
    errors = list(validator_for(schema)(schema).iter_errors(instance))
    pointers = ["/" + "/".join(str(p) for p in e.absolute_schema_path) for e in errors]
    return bool(errors) and all(any(p == c or p.startswith(c + "/") for c in post_checks) for p in pointers)


def _custom_meta_schema(schema) -> bool:
    """The schema names a meta-schema that is no draft's (read as 2020-12, as jsonschema reads it)."""
    return isinstance(schema, dict) and isinstance(schema.get("$schema"), str) and validator_for(schema, None) is None


def _exception(schema, test, program, post_checks) -> str | None:
    """Why a mismatch is one of the documented inherent cases, or None (a real failure)."""
    inst = test["data"]
    if test["valid"] and _custom_meta_schema(schema) \
            and not validator_for(schema, Draft202012Validator)(schema).is_valid(inst):
        return "custom meta-schema read as 2020-12, as the record check reads it"
    if test["valid"]:
        if program.accepts(canonical_json(integral_ints(inst), schema).encode()):
            return "integral float written as an integer"
        plain = json.dumps(_plain(inst), separators=(",", ":"), ensure_ascii=False)
        if program.accepts(plain.encode()):
            return "number written without exponent"
        if isinstance(schema, dict) and "format" in schema and "only an annotation" in test["description"]:
            return "format asserted (the suite treats format as an annotation)"
    elif _post_checked(schema, inst, post_checks):
        return "left to the check after generation"
    return None


def _groups():
    if not SUITE.is_dir():
        return []
    out = []
    for path in sorted(SUITE.glob("*.json")):
        for i, group in enumerate(json.loads(path.read_text())):
            out.append(pytest.param(group, id=f"{path.stem}-{i}"))
    return out


RESULTS = {"total": 0, "compiled": 0, "passed": 0, "exceptions": {}}


@pytest.mark.skipif(not SUITE.is_dir(), reason=f"JSON-Schema-Test-Suite not found at {SUITE}")
@pytest.mark.timeout(60)
@pytest.mark.parametrize("group", _groups())
def test_group(group):
    RESULTS["total"] += 1
    schema = group["schema"]
    try:
        compiled = compile_program(schema, JSON_SCHEMA)
    except UnsupportedSchema as err:
        assert str(err) and "\n" not in str(err)
        return
    RESULTS["compiled"] += 1
    failures = []
    for test in group["tests"]:
        text = canonical_json(test["data"], schema)
        if compiled.program.accepts(text.encode()) == test["valid"]:
            continue
        why = _exception(schema, test, compiled.program, compiled.post_checks)
        if why is None:
            failures.append(f"{test['description']}: {text} expected valid={test['valid']}")
        else:
            RESULTS["exceptions"][why] = RESULTS["exceptions"].get(why, 0) + 1
    assert not failures, "\n".join(failures)
    RESULTS["passed"] += 1


def test_zz_report(capsys):
    if not RESULTS["total"]:
        pytest.skip(f"no Test-Suite group ran (suite folder {SUITE} missing or deselected)")
    assert RESULTS["compiled"] > 0 and RESULTS["passed"] == RESULTS["compiled"]
    with capsys.disabled():
        print(f"\nJSON-Schema-Test-Suite draft2020-12: {RESULTS}")
