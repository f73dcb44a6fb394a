"""Scoring requests (SamplingParams.score_from): the engine sums log p(prompt[i] | prompt[:i]) for
i >= score_from over chunked prefill, batching, the prefix cache and preemption; the reference is
one fresh whole-sequence forward pass per prompt (test_ranked_choices.plain_logprobs)."""
from __future__ import annotations

import pytest
import torch

from kvx.engine import Engine, EngineConfig, Request, SamplingParams
from test_ranked_choices import default_model, plain_logprobs, tiny_model, tiny_prompts  # noqa: F401


def reference_score(loaded, prompt: list[int], score_from: int) -> float:
    logp = plain_logprobs(loaded, prompt)
    return float(sum(logp[i - 1, prompt[i]] for i in range(score_from, len(prompt))))


def scoring(i: int, prompt: list[int], score_from: int) -> Request:
    return Request(f"s{i}", prompt, SamplingParams(max_tokens=0, score_from=score_from))


def run(engine: Engine, requests: list[Request]) -> dict[str, object]:
    return {r.id: r for r in engine.generate(requests)}


@pytest.mark.parametrize("batch_tokens", [8192, 24])  # one step each / chunks of a few tokens
def test_scores_match_a_plain_forward_pass(tiny_model, batch_tokens):  # noqa: F811
    prompts = tiny_prompts(6, seed=3)
    froms = [1, 5, 21, len(prompts[3]) - 1, 17, 30 % len(prompts[5])]
    engine = Engine(tiny_model, EngineConfig(kv_memory=16 << 20, block_size=16, batch_tokens=batch_tokens))
    for round_ in range(2):  # the second round finds the prompts' blocks in the prefix cache
        got = run(engine, [scoring(i, p, max(f, 1)) for i, (p, f) in enumerate(zip(prompts, froms))])
        for i, (p, f) in enumerate(zip(prompts, froms)):
            r = got[f"s{i}"]
            assert r.finish_reason == "stop" and r.token_ids == [] and r.usage.generated_tokens == 0
            assert r.prompt_logprob == pytest.approx(reference_score(tiny_model, p, max(f, 1)), rel=1e-4, abs=1e-3)
        if round_:
            assert engine.metrics.snapshot()["cache_hit_rate"] > 0  # the cache served the prefixes


def test_scores_survive_preemption_and_sit_beside_generation(tiny_model):  # noqa: F811
    """Chunked prefill; every third step the scoring sequence furthest along is preempted (its KV
    is dropped and recomputed, up to what the cache kept): each token is still counted once."""
    prompts = [p * 3 for p in tiny_prompts(8, seed=5)]
    engine = Engine(tiny_model, EngineConfig(kv_memory=16 << 20, block_size=16, batch_tokens=48, max_seqs=8))
    engine_ref = Engine(tiny_model, EngineConfig(kv_memory=16 << 20, block_size=16))
    gen = Request("g", prompts[0], SamplingParams(max_tokens=12, ignore_eos=True))
    alone = next(iter(engine_ref.generate([gen]))).token_ids
    schedule, calls = engine.scheduler.schedule, [0]

    def preempting_schedule():
        calls[0] += 1
        scoring_seqs = [s for s in engine.scheduler.running if s.scoring and s.scored_upto > 2]
        if calls[0] % 3 == 0 and scoring_seqs:
            engine.scheduler.preempt(max(scoring_seqs, key=lambda s: s.num_computed))
        return schedule()

    engine.scheduler.schedule = preempting_schedule
    reqs = [scoring(i, p, 2) for i, p in enumerate(prompts)]
    got = run(engine, [Request("g", prompts[0], SamplingParams(max_tokens=12, ignore_eos=True))] + reqs)
    assert engine.metrics.snapshot()["preemptions"] > 0
    assert got["g"].token_ids == alone  # scoring rows beside it change nothing
    for i, p in enumerate(prompts):
        assert got[f"s{i}"].prompt_logprob == pytest.approx(reference_score(tiny_model, p, 2), rel=1e-4, abs=1e-3)
    assert engine.blocks.leaks() == []


def test_default_model_scores(default_model):  # noqa: F811
    tok = default_model.tokenizer
    prefix = tok.encode("A consumer complaint about mortgage:\n")
    texts = ["My servicer lost my escrow payment and charged a late fee.",
             "TransUnion reports an account that is not mine."]
    engine = Engine(default_model, EngineConfig(kv_memory=32 << 20, block_size=16))
    prompts = [prefix + tok.encode(" " + t) for t in texts]
    got = run(engine, [scoring(i, p, len(prefix)) for i, p in enumerate(prompts)])
    for i, p in enumerate(prompts):
        assert got[f"s{i}"].prompt_logprob == pytest.approx(reference_score(default_model, p, len(prefix)), rel=1e-3)


@pytest.mark.parametrize("score_from", [0, 9, 40])
def test_a_score_from_outside_the_prompt_is_an_error_row(tiny_model, score_from):  # noqa: F811
    engine = Engine(tiny_model, EngineConfig(kv_memory=8 << 20, block_size=16))
    (r,) = list(engine.generate([scoring(0, list(range(9)), score_from)]))
    assert r.finish_reason == "error" and "score_from" in r.error and r.prompt_logprob is None


def test_torch_reference_is_not_trivial(tiny_model):  # noqa: F811
    """The reference itself depends on the prompt (a scorer returning a constant would fail above)."""
    p = tiny_prompts(2, seed=9)
    assert reference_score(tiny_model, p[0], 3) != pytest.approx(reference_score(tiny_model, p[1], 3))
    assert torch.isfinite(plain_logprobs(tiny_model, p[0])).all()
