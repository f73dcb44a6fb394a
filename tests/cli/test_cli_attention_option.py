"""`--attention torch|triton` travels from the command line to EngineConfig.attention (and the backend), `--compile-deadline` to the grammar compile."""
import pytest
from kvx_cli_helpers import REPO, TICKET_SCHEMA

import kvx.engine
import kvx.grammar
import kvx.models
from kvx.job import runtime
from kvx.cli.main import main

SAMPLES = REPO / "samples" / "tickets.jsonl"


class Stop(Exception):
    pass


class FakeLoaded:
    tokenizer = None


@pytest.mark.parametrize("choice", ["torch", "triton", "auto"])
def test_attention_option_reaches_engine_config(monkeypatch, tmp_path, choice):
    seen = {}

    def fake_engine(loaded, config):
        seen["attention"] = config.attention
        raise Stop  # the job itself is not what this test is about

    monkeypatch.delenv("KVX_RUNTIME_FACTORY", raising=False)
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # triton without a GPU only runs interpreted (tests)
    monkeypatch.setattr(kvx.models, "load_model", lambda spec, dtype="auto": FakeLoaded())
    monkeypatch.setattr(kvx.grammar, "compile_schema", lambda *a, **k: None)
    monkeypatch.setattr(kvx.engine, "Engine", fake_engine)
    args = ["extract", str(SAMPLES), "--schema", str(TICKET_SCHEMA), "-o", str(tmp_path / "o.jsonl"), "-q"]
    if choice != "auto":
        args += ["--attention", choice]
    with pytest.raises(Stop):
        main(args)
    assert seen["attention"] == choice


def test_real_runtime_passes_attention(monkeypatch):
    seen = {}
    monkeypatch.setattr(kvx.models, "load_model", lambda spec, dtype="auto": FakeLoaded())
    monkeypatch.setattr(kvx.grammar, "compile_schema", lambda *a, **k: None)

    def fake_engine(loaded, config):
        seen["attention"] = config.attention
        raise Stop

    monkeypatch.setattr(kvx.engine, "Engine", fake_engine)
    with pytest.raises(Stop):
        runtime.real_runtime({}, runtime.EngineOptions(attention="triton"))
    assert seen["attention"] == "triton"


def test_compile_deadline_reaches_the_grammar_compile(monkeypatch, tmp_path):
    """`--compile-deadline` travels to the GrammarOptions the schema is compiled with."""
    seen = {}

    def fake_compile(schema, tokenizer, options):
        seen["deadline"] = options.compile_deadline
        raise Stop

    monkeypatch.delenv("KVX_RUNTIME_FACTORY", raising=False)
    monkeypatch.setattr(kvx.models, "load_model", lambda spec, dtype="auto": FakeLoaded())
    monkeypatch.setattr(kvx.grammar, "compile_schema", fake_compile)
    args = ["extract", str(SAMPLES), "--schema", str(TICKET_SCHEMA), "-o", str(tmp_path / "o.jsonl"), "-q"]
    with pytest.raises(Stop):
        main(args + ["--compile-deadline", "3.5"])
    assert seen["deadline"] == 3.5
