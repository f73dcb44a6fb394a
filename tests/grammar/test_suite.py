"""Acceptance against the official JSON-Schema-Test-Suite (draft 2020-12, top-level files).

For every group whose schema compiles, each valid instance written the way the grammar writes
JSON must be accepted and each invalid one rejected, except the documented inherent cases in
EXCEPTIONS (see docs/grammar_compiler.md); groups that do not compile must raise UnsupportedSchema.
"""
from __future__ import annotations

import json
import math
from decimal import Decimal
from pathlib import Path

import pytest

from kvx.grammar.schema.compiler import compile_dfa
from kvx.grammar.errors import UnsupportedSchema
from kvx.grammar.schema.rules import integral_ints
from kvx.grammar.schema.serialize import canonical_json

SUITE = Path(__file__).resolve().parents[2].parent / "shared" / "json-schema-test-suite" / "tests" / "draft2020-12"
MAX_DEPTH = 4


def _depth(v) -> int:
    if isinstance(v, dict):
        return 1 + max((_depth(x) for x in v.values()), default=0)
    if isinstance(v, list):
        return 1 + max((_depth(x) for x in v), default=0)
    return 0


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


def _exception(schema, test, dfa) -> str | None:
    """Why a mismatch is one of the documented inherent cases, or None (a real failure)."""
    inst = test["data"]
    if test["valid"]:
        if _depth(inst) > MAX_DEPTH:
            return "deeper than max_depth"
        if dfa.accepts(canonical_json(integral_ints(inst), schema).encode()):
            return "integral float written as an integer"
        plain = json.dumps(_plain(inst), separators=(",", ":"), ensure_ascii=False)
        if dfa.accepts(plain.encode()):
            return "bounded number written without exponent"
        if isinstance(schema, dict) and "format" in schema and "only an annotation" in test["description"]:
            return "format asserted (the suite treats format as an annotation)"
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
        compiled = compile_dfa(schema, max_depth=MAX_DEPTH)
    except UnsupportedSchema as err:
        assert str(err) and "\n" not in str(err)
        return
    RESULTS["compiled"] += 1
    failures = []
    for test in group["tests"]:
        text = canonical_json(test["data"], schema)
        if compiled.dfa.accepts(text.encode()) == test["valid"]:
            continue
        why = _exception(schema, test, compiled.dfa)
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
