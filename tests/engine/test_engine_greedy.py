"""Many requests batched together (shared prefixes, a pool small enough to preempt and evict) must
give exactly the tokens of each request run alone through a plain single-sequence loop."""
import random

import pytest

from engine_fakes import EOS, VOCAB, config_for, reference_greedy, tiny_loaded
from kvx.engine import Engine, Request, SamplingParams


@pytest.fixture(scope="module")
def loaded():
    return tiny_loaded()


def make_requests(seed: int, n: int):
    rng = random.Random(seed)
    prefixes = [[rng.randrange(1, VOCAB) for _ in range(rng.randrange(8, 40))] for _ in range(4)]
    reqs = []
    for i in range(n):
        shared = prefixes[rng.randrange(4)] if rng.random() < 0.75 else []
        tail = [rng.randrange(1, VOCAB) for _ in range(rng.randrange(1, 25))]
        params = SamplingParams(max_tokens=rng.randrange(1, 30))
        reqs.append(Request(f"r{i}", shared + tail, params, priority=rng.randrange(3)))
    rng.shuffle(reqs)
    return reqs


def expected(loaded, req):
    out = reference_greedy(loaded, req.prompt_ids, req.sampling.max_tokens)
    return out[:-1] if out and out[-1] == EOS else out  # the engine drops the stop token


@pytest.mark.parametrize("seed,blocks,block_size,batch_tokens,max_seqs,attention", [
    (1, 40, 4, 24, 6, "torch"),  # tiny pool: preemption and eviction, chunked prefill
    (2, 30, 8, 64, 10, "cpu"),  # the batched CPU backend (shared-prefix cascade) under the same churn
    (3, 400, 4, 256, 32, "cpu"),  # roomy pool: sharing without pressure
])
def test_batched_equals_alone(loaded, seed, blocks, block_size, batch_tokens, max_seqs, attention):
    reqs = make_requests(seed, 40)
    cfg = config_for(loaded, blocks, block_size, attention, batch_tokens=batch_tokens, max_seqs=max_seqs)
    engine = Engine(loaded, cfg)
    results = {}
    for r in engine.generate(reqs):
        results[r.id] = r
    assert set(results) == {r.id for r in reqs}
    for req in reqs:
        res = results[req.id]
        assert res.token_ids == expected(loaded, req), req.id
        assert res.finish_reason in ("stop", "length")
        assert res.usage.generated_tokens == len(res.token_ids) + (res.finish_reason == "stop")
    m = engine.metrics.snapshot()
    assert m["cached_prompt_tokens"] > 0 and m["requests_done"] == len(reqs)
    if blocks < 100:
        assert m["preemptions"] > 0, m
        assert m["evicted_blocks"] > 0, m
    assert engine.blocks.leaks() == []
    assert m["kv_used_blocks"] == 0


def test_prefix_cache_off_same_output_no_hits(loaded):
    reqs = make_requests(4, 15)
    cfg = config_for(loaded, 60, 4, batch_tokens=32, max_seqs=4, enable_prefix_cache=False)
    engine = Engine(loaded, cfg)
    results = {r.id: r for r in engine.generate(reqs)}
    for req in reqs:
        assert results[req.id].token_ids == expected(loaded, req)
    assert engine.metrics.snapshot()["cached_prompt_tokens"] == 0
    assert engine.blocks.leaks() == []


def test_second_run_reuses_finished_sequences_blocks(loaded):
    prompt = [5, 6, 7, 8] * 10
    engine = Engine(loaded, config_for(loaded, 100, 4))
    first = next(engine.generate([Request("a", prompt, SamplingParams(max_tokens=5))]))
    again = next(engine.generate([Request("b", prompt, SamplingParams(max_tokens=5))]))
    assert again.token_ids == first.token_ids
    assert first.usage.cached_prompt_tokens == 0
    assert again.usage.cached_prompt_tokens == 36  # 9 full blocks; the last token is always computed


def test_results_stream_before_input_is_exhausted(loaded):
    pulled = []

    def source():
        for i in range(50):
            pulled.append(i)
            yield Request(str(i), [1 + i % 7, 2, 3], SamplingParams(max_tokens=2, ignore_eos=True))

    cfg = config_for(loaded, 200, 4, max_queued=5, max_seqs=4)
    first = next(Engine(loaded, cfg).generate(source()))
    assert first.token_ids and len(pulled) < 20
