"""Prompt-lookup speculation: drafts must never change a greedy output, only the number of steps."""
import random

import pytest

from engine_fakes import EOS, VOCAB, OddMatcher, config_for, reference_greedy, tiny_loaded
from kvx.engine import Engine, Request, SamplingParams
from kvx.engine.api import EngineConfig
from kvx.engine.sequence import Sequence
from kvx.engine.speculation import SpeculationConfig, checked_choices, draft_length, propose, row_masks


@pytest.fixture(scope="module")
def loaded():
    return tiny_loaded()


def repetitive_requests(seed: int, n: int, max_tokens: int = 40):
    """Prompts that repeat a motif, so the tiny model's continuations recur and drafts get accepted."""
    rng = random.Random(seed)
    reqs = []
    for i in range(n):
        motif = [rng.randrange(1, VOCAB) for _ in range(rng.randrange(2, 6))]
        prompt = [rng.randrange(1, VOCAB) for _ in range(rng.randrange(0, 6))] + motif * rng.randrange(3, 8)
        reqs.append(Request(f"r{i}", prompt, SamplingParams(max_tokens=rng.randrange(5, max_tokens))))
    return reqs


def run(loaded, reqs, **kw):
    engine = Engine(loaded, config_for(loaded, kw.pop("blocks", 400), **kw))
    out = {r.id: r for r in engine.generate(reqs)}
    assert engine.blocks.leaks() == []
    return out, engine.metrics.snapshot()


def alone(loaded, req, matcher=None):
    out = reference_greedy(loaded, req.prompt_ids, req.sampling.max_tokens, matcher=matcher)
    return out[:-1] if out and out[-1] == EOS else out


@pytest.mark.parametrize("blocks,batch_tokens,max_seqs", [
    (400, 256, 8),  # roomy: drafts every step
    (40, 24, 6),  # tiny pool and budget: drafts dropped when they do not fit, preemption with drafts
])
def test_speculation_keeps_greedy_output(loaded, blocks, batch_tokens, max_seqs):
    reqs = repetitive_requests(blocks, 24)
    spec, m = run(loaded, reqs, blocks=blocks, batch_tokens=batch_tokens, max_seqs=max_seqs, speculative_tokens=4)
    plain, m0 = run(loaded, reqs, blocks=blocks, batch_tokens=batch_tokens, max_seqs=max_seqs, speculative_tokens=0)
    for req in reqs:
        assert spec[req.id].token_ids == plain[req.id].token_ids == alone(loaded, req), req.id
        assert spec[req.id].usage.generated_tokens == plain[req.id].usage.generated_tokens
    assert m0["drafted_tokens"] == 0
    assert m["accepted_draft_tokens"] > 0, m
    assert m["drafted_tokens"] > m["accepted_draft_tokens"]  # some drafts were wrong and were cut back
    assert m["steps"] < m0["steps"]
    if blocks < 100:
        assert m["preemptions"] > 0


def test_speculation_with_grammar_and_forced_runs(loaded):
    prompts = [[7, 11, 13, 15, 3] * 4, [9, 5, 9, 5, 9, 5, 7], [1, 3, 1, 3, 1, 3]]
    reqs = [Request(f"g{i}", p, SamplingParams(max_tokens=30), constraint=OddMatcher) for i, p in enumerate(prompts)]
    spec, m = run(loaded, reqs, batch_tokens=64, speculative_tokens=6)
    for req in reqs:
        assert spec[req.id].token_ids == alone(loaded, req, OddMatcher()), req.id
    assert m["accepted_draft_tokens"] > 0 and m["forced_tokens"] > 0, m


def seq_of(tokens, prompt_len, max_tokens=20, stop=frozenset({EOS}), matcher=None, temperature=0.0):
    req = Request("x", tokens[:prompt_len], SamplingParams(max_tokens=max_tokens, temperature=temperature))
    seq = Sequence(req, 0, stop)
    for t in tokens[prompt_len:]:
        seq.append(t)
    seq.matcher = matcher
    return seq


def test_propose_copies_what_followed_the_latest_occurrence():
    seq = seq_of([5, 6, 7, 9, 5, 6, 8, 2, 5], 9)
    propose(seq, 3, 512)
    assert seq.token_ids[9:] == [6, 8, 2] and seq.draft == [True] * 3  # after the later 5, not the first
    assert seq.logit_positions() == [8, 9, 10, 11]
    assert seq.take_draft() == [6, 8, 2] and seq.token_ids == [5, 6, 7, 9, 5, 6, 8, 2, 5]


def test_propose_limits():
    seq = seq_of([4, 2, EOS, 3, 4], 5)  # a stop token ends the draft
    propose(seq, 4, 512)
    assert seq.token_ids[5:] == [2]
    seq = seq_of([4, 2, 3, 1, 4], 3, max_tokens=3)  # 2 of 3 new tokens are out: room for one more
    propose(seq, 4, 512)
    assert seq.token_ids[5:] == [2]
    seq = seq_of([4, 2, 3, 1, 4], 5, temperature=0.8)  # sampled requests never draft
    propose(seq, 4, 512)
    assert seq.draft == []
    seq = seq_of([1, 2, 3], 3)  # no earlier occurrence
    propose(seq, 4, 512)
    assert seq.draft == []


def test_propose_follows_the_grammar():
    # 9 was followed by 7; after 7 the matcher forces 11, 13, 15 (never seen after 7), then the lookup
    # resumes after the latest 15 (3 is odd: drafted) and stops at the even 2
    seq = seq_of([15, 3, 2, 9, 7, 1, 9], 7, matcher=OddMatcher(n=1))
    propose(seq, 6, 512)
    assert seq.token_ids[7:] == [7, 11, 13, 15, 3]
    assert seq.draft == [True, False, False, False, True]
    assert seq.logit_positions() == [6, 10, 11]
    masks = row_masks(seq, 3)  # before 7 (1 token out), before 3 (5 out), after the draft (6 out)
    assert [bool(m[EOS]) for m in masks] == [False, False, True]
    assert seq.matcher.n == 1  # the real matcher did not move


def test_checked_choices():
    drafted, checked = [7, 11, 13, 3, 5], [True, False, False, True, True]
    assert checked_choices(drafted, checked, [7, 3, 5, 9]) == ([7, 3, 5], None)
    assert checked_choices(drafted, checked, [7, 4, 5, 9]) == ([7], 1)
    assert checked_choices(drafted, checked, [8, 3, 5, 9]) == ([], 0)


def test_draft_length_follows_the_row_budget():
    cfg = SpeculationConfig(max_draft=4, max_rows=48)
    assert draft_length(cfg, 2) == 4 and draft_length(cfg, 12) == 3 and draft_length(cfg, 24) == 1
    assert draft_length(cfg, 48) == 0 and draft_length(SpeculationConfig(0, 48), 1) == 0
    assert EngineConfig().speculative_tokens == 4


def test_rejected_drafts_never_reach_the_prefix_cache(loaded, monkeypatch):
    """Every draft's token list is later sent as a prompt to the same engine: if a block holding a
    rejected draft token had been published (and then overwritten by the real token's KV), those
    prompts would be served wrong KV from the cache and their outputs would differ from a plain run."""
    import kvx.engine.engine as engine_module

    drafts = []

    def spy(seq, k, max_model_len):
        n = engine_module_propose(seq, k, max_model_len)
        if n:
            drafts.append(list(seq.token_ids))
        return n

    engine_module_propose = engine_module.propose
    monkeypatch.setattr(engine_module, "propose", spy)
    engine = Engine(loaded, config_for(loaded, 2000, block_size=4, batch_tokens=256, max_seqs=8))
    first = repetitive_requests(7, 16)
    list(engine.generate(first))
    monkeypatch.setattr(engine_module, "propose", engine_module_propose)
    probes = [Request(f"p{i}", d, SamplingParams(max_tokens=6)) for i, d in enumerate(drafts)]
    assert len(probes) > 20
    results = {r.id: r for r in engine.generate(probes)}
    assert engine.metrics.snapshot()["cached_prompt_tokens"] > 0
    for req in probes:
        assert results[req.id].token_ids == alone(loaded, req), req.id
