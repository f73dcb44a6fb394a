"""Random token walks (with jump-forward runs and length budgets) always give valid JSON.

Reference: json.loads + jsonschema. Keywords the compiler leaves to post_checks are not asserted."""
import json

import jsonschema
import numpy as np
import pytest
from grammar_fixtures import REPO, SUITE, smol_tokenizer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvx.grammar import UnsupportedSchema, compile_schema
from kvx.grammar.schema.unicode_properties import with_python_patterns

SCHEMAS = sorted((REPO / "schemas").glob("*.json"))
SETTINGS = settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))


def _walk(grammar, data, max_tokens):
    m = grammar.matcher(max_tokens=max_tokens)
    ids = []
    while not m.is_finished():
        forced = m.forced_tokens()
        if forced and data.draw(st.booleans()):
            for tid in forced:
                m.advance(tid)
            ids += forced
            continue
        allowed = np.flatnonzero(m.allowed_mask().numpy())
        assert len(allowed), "the mask may never be empty before EOS"
        tid = int(allowed[data.draw(st.integers(0, len(allowed) - 1))])
        m.advance(tid)
        ids.append(tid)
    assert ids[-1] in grammar.vocab.eos_ids
    if max_tokens is not None:
        assert len(ids) <= max_tokens
    return b"".join(grammar.vocab.token_bytes[i] for i in ids[:-1]).decode("utf-8")


def _check(schema, grammar, text):
    value = json.loads(text)
    # 2020-12 treats `format` as an annotation; jsonschema's date checker also rejects year 0000,
    # which RFC 3339 allows, so formats are not asserted here (test_compile covers them); a pattern
    # with a Unicode property escape is read as the record check reads it (Python's re cannot)
    validator = jsonschema.Draft202012Validator(with_python_patterns(schema)[0])
    errors = [e for e in validator.iter_errors(value) if not _post_checked(e, grammar.post_checks)]
    assert not errors, f"{text!r}: {errors[0].message}"


def _post_checked(error, post_checks):
    pointer = "/" + "/".join(str(p) for p in error.absolute_schema_path)
    return any(pointer.startswith(p) or error.validator == p.rsplit("/", 1)[-1] for p in post_checks)


@pytest.mark.parametrize("path", SCHEMAS, ids=[p.stem for p in SCHEMAS])
def test_walks_on_repo_schemas(path, tmp_path_factory):
    schema = json.loads(path.read_text())
    grammar = compile_schema(schema, smol_tokenizer())
    need = grammar.matcher().min_tokens_to_finish()

    @SETTINGS
    @given(data=st.data(), slack=st.integers(0, 30))
    def walk(data, slack):
        _check(schema, grammar, _walk(grammar, data, need + slack))

    walk()


def _suite_groups():
    if not SUITE.is_dir():
        return []
    return sorted(SUITE.glob("*.json"))


@pytest.mark.skipif(not SUITE.is_dir(), reason=f"JSON-Schema-Test-Suite not found at {SUITE}")
@pytest.mark.parametrize("path", _suite_groups(), ids=lambda p: p.stem)
def test_walks_on_suite_schemas(path):
    tok = smol_tokenizer()
    grammars = []
    for group in json.loads(path.read_text()):
        try:
            grammars.append((group["schema"], compile_schema(group["schema"], tok)))
        except UnsupportedSchema:
            continue
    if not grammars:
        return  # every group here is unsupported; test_compile covers that they raise cleanly

    @settings(max_examples=1, deadline=None, suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def walk(data):
        for schema, grammar in grammars:
            need = grammar.matcher().min_tokens_to_finish()
            text = _walk(grammar, data, need + data.draw(st.integers(0, 12)))
            _check(schema, grammar, text)

    walk()
