"""Sampling reproducibility, the grammar hook (mask + jump-forward), and one-line errors."""
import pytest
import torch

from engine_fakes import EOS, VOCAB, OddMatcher, config_for, reference_greedy, tiny_loaded
from kvx.engine import Engine, Request, SamplingParams
from kvx.engine.sampler import filter_logits
from kvx.errors import CapacityError


@pytest.fixture(scope="module")
def loaded():
    return tiny_loaded()


def sampled(seed, i, temperature=1.0, top_p=0.9, top_k=20):
    p = SamplingParams(max_tokens=12, temperature=temperature, top_p=top_p, top_k=top_k, seed=seed, ignore_eos=True)
    return Request(f"s{i}", [3, 1, 4, 1, 5, 9, 2, 6][: 3 + i % 5], p)


def test_seeded_sampling_is_reproducible_across_batches(loaded):
    alone = {r.id: r.token_ids for r in Engine(loaded, config_for(loaded, 200)).generate([sampled(7, 0)])}
    mixed = [sampled(7, 0)] + [sampled(100 + i, i) for i in range(1, 8)]
    together = {r.id: r.token_ids for r in Engine(loaded, config_for(loaded, 200, max_seqs=3)).generate(mixed)}
    assert together["s0"] == alone["s0"]
    assert len({tuple(together[f"s{i}"]) for i in range(8)}) > 4  # different seeds do differ


def test_top_k_one_is_greedy(loaded):
    greedy = reference_greedy(loaded, [3, 1, 4, 1], 10, stop=set())
    res = next(Engine(loaded, config_for(loaded, 200)).generate([
        Request("k", [3, 1, 4, 1], SamplingParams(max_tokens=10, temperature=0.7, top_k=1, seed=1, ignore_eos=True))]))
    assert res.token_ids == greedy


def test_top_p_keeps_the_smallest_covering_set():
    row = torch.log(torch.tensor([0.5, 0.3, 0.15, 0.05]))
    kept = torch.isfinite(filter_logits(row, SamplingParams(temperature=1.0, top_p=0.75))).tolist()
    assert kept == [True, True, False, False]
    kept = torch.isfinite(filter_logits(row, SamplingParams(temperature=1.0, top_k=3))).tolist()
    assert kept == [True, True, True, False]


def test_grammar_mask_and_jump_forward(loaded):
    # vocab of the tokenizer (VOCAB - 3) smaller than the model's: padded rows must never be chosen
    prompts = [[1, 2, 3, 7], [9, 8, 7, 6, 5], [4, 4, 4]]
    reqs = [Request(f"g{i}", p, SamplingParams(max_tokens=25), constraint=lambda: OddMatcher())
            for i, p in enumerate(prompts)]
    model = loaded.model
    model.forward_calls.clear()
    results = {r.id: r for r in Engine(loaded, config_for(loaded, 200, batch_tokens=64)).generate(reqs)}
    total_forced = 0
    for req in reqs:
        ref = reference_greedy(loaded, req.prompt_ids, 25, matcher=OddMatcher())
        ref = ref[:-1] if ref[-1] == EOS else ref
        res = results[req.id]
        assert res.token_ids == ref
        assert all(t % 2 == 1 and t < VOCAB - 3 for t in res.token_ids)
        total_forced += res.usage.forced_tokens
        sevens = sum(1 for i, t in enumerate(res.token_ids[:-3]) if t == 7 and res.token_ids[i + 1 : i + 4] == [11, 13, 15])
        assert res.usage.forced_tokens >= 3 * sevens
    assert total_forced > 0, "no request reached the forcing token 7: pick other prompts"
    # forced tokens go through the model as one extend (query length 4 = sampled 7 + 3 forced)
    assert any(4 in call for call in model.forward_calls)


def test_too_long_prompt_is_an_error_result(loaded):
    engine = Engine(loaded, config_for(loaded, 400, max_model_len=64))
    reqs = [Request("long", list(range(1, 61)) + [1] * 10), Request("ok", [1, 2, 3], SamplingParams(max_tokens=3))]
    results = {r.id: r for r in engine.generate(reqs)}
    bad = results["long"]
    assert bad.finish_reason == "error" and "\n" not in bad.error
    assert "70 tokens" in bad.error and "64" in bad.error
    assert results["ok"].finish_reason in ("stop", "length")


def test_request_bigger_than_the_pool_is_an_error_result(loaded):
    engine = Engine(loaded, config_for(loaded, 4, block_size=4))  # 16 tokens of KV
    res = next(engine.generate([Request("big", [1] * 10, SamplingParams(max_tokens=20))]))
    assert res.finish_reason == "error" and "raise kv_memory" in res.error  # the option field, not a flag


def test_pool_below_one_block_raises_capacity_error(loaded):
    cfg = config_for(loaded, 1, block_size=4)
    cfg.kv_memory = 10
    with pytest.raises(CapacityError, match="kv_memory") as caught:
        Engine(loaded, cfg)
    assert caught.value.option == "kv_memory"
    assert caught.value.naming("--kv-memory").startswith("--kv-memory 10B holds no KV block")


def test_kv_pool_dtype_follows_the_weights_unless_set():
    """--kv-dtype auto: the pool takes the weights' dtype (bfloat16 weights: half the bytes a block,
    so twice the blocks for the same --kv-memory); an explicit --kv-dtype wins."""
    bf16 = tiny_loaded()
    bf16.dtype = torch.bfloat16  # what LoadedModel reports for bfloat16 weights ...
    bf16.model.act_dtype = torch.float32  # ... whose activations LlamaModel keeps float32 on a CPU
    float32_blocks = lambda **kw: config_for(tiny_loaded(), 64, **kw)  # noqa: E731 - 64 float32 blocks' bytes
    auto = Engine(bf16, float32_blocks())
    assert auto.kv_cache.dtype == torch.bfloat16 and auto.blocks.num_blocks == 128
    pinned = Engine(bf16, float32_blocks(kv_dtype="float32"))
    assert pinned.kv_cache.dtype == torch.float32 and pinned.blocks.num_blocks == 64
    # the bfloat16 pool really holds the sequence: greedy output equals the float32 pool's here
    req = Request("x", [3, 1, 4, 1, 5], SamplingParams(max_tokens=8, ignore_eos=True))
    outs = [next(iter(e.generate([req]))).token_ids for e in (auto, pinned)]
    assert outs[0] == outs[1] and len(outs[0]) == 8
