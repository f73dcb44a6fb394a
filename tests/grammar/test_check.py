"""`kvx schema check` logic: exit codes and one-line messages."""
import json

from grammar_fixtures import REPO, smol_tokenizer

from kvx.cli.schema import run_schema_check


def test_supported_schema_reports_figures(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("KVX_CACHE", str(tmp_path))
    code = run_schema_check(str(REPO / "schemas" / "ticket.json"), None, True, tokenizer=smol_tokenizer())
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["supported"] and report["dfa_states"] > 10
    assert report["compile_ms"] > 0 and report["first_mask_ms"] > 0
    assert report["grounded"] == ["/customer_name", "/order_id", "/product"]  # the nullable free-text fields
    assert report["cut_at_sentence"] == ["/customer_name", "/product", "/summary", "/tags/*"]  # bounded free text
    assert report["codes_from_text"] == ["/order_id"]  # the nullable string with a pattern
    assert report["digits_left_to_schema"] == ["/category", "/order_id", "/priority", "/sentiment"]  # enums, a pattern


def test_post_checked_keywords_are_said(capsys, tmp_path, monkeypatch):
    """oneOf is generated as anyOf and uniqueItems is left to jsonschema: check says both."""
    monkeypatch.setenv("KVX_CACHE", str(tmp_path))
    path = tmp_path / "union.json"
    path.write_text(json.dumps({"type": "object", "properties": {
        "pet": {"oneOf": [{"type": "object", "properties": {"kind": {"const": "cat"}}, "required": ["kind"]},
                          {"type": "object", "properties": {"kind": {"const": "dog"}}, "required": ["kind"]}]},
        "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}}}))
    assert run_schema_check(str(path), None, False, tokenizer=smol_tokenizer()) == 0
    out = capsys.readouterr().out
    assert "checked after generation: /properties/pet/oneOf, /properties/tags/uniqueItems" in out
    assert "exactly one branch holds" in out and "states in" in out


def test_unsupported_and_invalid_exit_2_with_one_line(capsys, tmp_path):
    cases = {
        "unique.json": {"type": "array", "items": {"not": {"uniqueItems": True}}},
        "invalid.json": {"type": "objekt"},
    }
    for name, schema in cases.items():
        path = tmp_path / name
        path.write_text(json.dumps(schema))
        assert run_schema_check(str(path), None, False, tokenizer=smol_tokenizer()) == 2
        out = capsys.readouterr().out.strip()
        assert out.startswith("unsupported:") and "\n" not in out
    assert "'not'" in run_and_capture(capsys, tmp_path / "unique.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"type":\n "object",,}')
    assert run_schema_check(str(bad), None, False, tokenizer=smol_tokenizer()) == 2
    assert ":2:" in capsys.readouterr().out
    assert run_schema_check(str(tmp_path / "missing.json"), None, False, tokenizer=smol_tokenizer()) == 2
    assert "cannot read" in capsys.readouterr().out


def run_and_capture(capsys, path):
    run_schema_check(str(path), None, True, tokenizer=smol_tokenizer())
    return json.loads(capsys.readouterr().out)["error"]


def test_check_builds_the_grammar_extract_would(capsys, tmp_path, monkeypatch):
    """`--extra-keys` as for extract: declared (the default) names the objects kept to their keys
    and builds a smaller automaton than schema (JSON Schema's default, no such warning)."""
    from kvx.grammar.options import GrammarOptions

    monkeypatch.setenv("KVX_CACHE", str(tmp_path))
    path = tmp_path / "open.json"
    path.write_text(json.dumps({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}}))
    reports = {}
    for mode in ("declared", "schema"):
        assert run_schema_check(str(path), None, True, tokenizer=smol_tokenizer(),
                                options=GrammarOptions(extra_keys=mode)) == 0
        reports[mode] = json.loads(capsys.readouterr().out)
    assert [w for w in reports["declared"]["warnings"] if "declared keys only" in w] and not reports["schema"]["warnings"]
    assert reports["declared"]["dfa_states"] < reports["schema"]["dfa_states"]


def test_compile_deadline_is_the_users_to_raise(capsys, tmp_path, monkeypatch):
    """A compile past `--compile-deadline` is refused with a line naming the flag; with time enough
    the same schema compiles, and the grammar cache keys it the same whatever the deadline."""
    from kvx.grammar import cache
    from kvx.grammar.options import GrammarOptions
    from kvx.grammar.tokens.vocab import vocab_for

    monkeypatch.setenv("KVX_CACHE", str(tmp_path))
    path = REPO / "schemas" / "ticket.json"
    short, default = GrammarOptions(compile_deadline=1e-6), GrammarOptions()
    assert run_schema_check(str(path), None, False, tokenizer=smol_tokenizer(), options=short) == 2
    out = capsys.readouterr().out.strip()
    assert out == ("unsupported: schema too large for the automaton at / (compile deadline of 1e-06 s passed; "
                   "--compile-deadline allows longer)")
    assert run_schema_check(str(path), None, False, tokenizer=smol_tokenizer(), options=default) == 0
    schema, vocab = json.loads(path.read_text()), vocab_for(smol_tokenizer())
    assert cache.cache_path(schema, short.program_key(), vocab) == cache.cache_path(schema, default.program_key(), vocab)


def test_a_compile_near_its_deadline_is_said(capsys, tmp_path, monkeypatch):
    """The report gives the compile's CPU (what the deadline counts); past half the deadline the
    check warns that another machine may refuse it. The compiling thread's CPU is faked here
    (0.4 s of a 0.55 s deadline; the deadline itself keeps the real clock)."""
    from kvx.grammar import compile as compile_module

    monkeypatch.setenv("KVX_CACHE", str(tmp_path))
    path = str(REPO / "schemas" / "ticket.json")
    assert run_schema_check(path, None, True, tokenizer=smol_tokenizer()) == 0
    report = json.loads(capsys.readouterr().out)
    assert 0 < report["compile_cpu_ms"] and report["near_deadline"] is False
    ticks = iter([100.0, 100.4])
    monkeypatch.setattr(compile_module.time, "thread_time", lambda: next(ticks, 100.4))
    assert run_schema_check(path, None, False, tokenizer=smol_tokenizer()) == 0
    out = capsys.readouterr().out
    assert ("warning: the compile took 0.4 s of CPU, near its 0.55 s deadline: a busier or slower machine "
            "may refuse it (--compile-deadline gives it longer)") in out


def test_the_cached_grammar_follows_the_formats_the_check_asserts(monkeypatch):
    """A negated format the record check leaves unread admits no string (schema/scalars.py), so a
    program depends on which format packages are installed: installing one must not serve the
    grammar compiled without it."""
    import jsonschema

    from kvx.grammar import cache
    from kvx.grammar.options import GrammarOptions
    from kvx.grammar.tokens.vocab import vocab_for

    schema, vocab = {"not": {"format": "date-time"}}, vocab_for(smol_tokenizer())
    key = GrammarOptions().program_key()
    cache._check_reading.cache_clear()
    before = cache.cache_path(schema, key, vocab)
    checkers = dict(jsonschema.Draft202012Validator.FORMAT_CHECKER.checkers)
    checkers["date-time"] = (lambda instance: True, ())  # as rfc3339-validator's install adds it
    monkeypatch.setattr(jsonschema.Draft202012Validator.FORMAT_CHECKER, "checkers", checkers)
    cache._check_reading.cache_clear()
    try:
        assert cache.cache_path(schema, key, vocab) != before
    finally:
        monkeypatch.undo()
        cache._check_reading.cache_clear()
    assert cache.cache_path(schema, key, vocab) == before
