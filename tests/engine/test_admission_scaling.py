"""A 100k-request queue is admitted without quadratic work, counted (not timed) on a null model."""
from pathlib import Path

import torch

from kvx.engine import Engine, EngineConfig, Request, SamplingParams
from kvx.models.base import LoadedModel, ModelConfig, ModelSource


class NullModel(torch.nn.Module):
    """Logits all zero: greedy picks token 0 (EOS), so every request is one prefill step."""

    def forward(self, input_ids, positions, meta, kv_cache, logits_indices):
        return torch.zeros(len(logits_indices), 1000)


class Tok:
    eos_token_ids = [0]

    def decode(self, ids):
        return ""


class CountingPriority(int):
    """Counts comparisons of admission-queue keys: each heap key comparison compares the priority first."""

    compares = 0

    def __neg__(self):
        return CountingPriority(-int(self))

    def __eq__(self, other):
        CountingPriority.compares += 1
        return int(self) == int(other)

    def __lt__(self, other):
        CountingPriority.compares += 1
        return int(self) < int(other)

    __hash__ = int.__hash__


def run(n: int) -> tuple[int, int, int]:
    cfg = ModelConfig("llama", 1000, 8, 8, 1, 1, 1, 4, max_position_embeddings=64, eos_token_ids=[0])
    loaded = LoadedModel(cfg, NullModel(), Tok(), ModelSource("null", Path("."), "fake"), torch.float32)
    engine = Engine(loaded, EngineConfig(block_size=4, kv_memory=4096 * 64, max_seqs=256, max_queued=200_000,
                                         batch_tokens=4096, attention="torch"))
    def requests():
        for i in range(n):
            # 5 shared one-block prefixes, then a unique pair: distinct prompts, the same sharing at any n
            prompt = [1 + (i % 5)] * 4 + [1 + (i // 999) % 999, 1 + i % 999]
            yield Request(str(i), prompt, SamplingParams(max_tokens=1), priority=CountingPriority(0))

    CountingPriority.compares = 0
    done = sum(1 for _ in engine.generate(requests()))
    assert done == n
    assert engine.blocks.leaks() == []
    return CountingPriority.compares, engine.scheduler.queue_ops, engine.metrics.steps


def test_admission_work_grows_n_log_n_not_n_squared():
    small = run(10_000)
    big = run(100_000)
    cmp_ratio = big[0] / small[0]
    # n log n predicts 10 * log(1e5)/log(1e4) = 12.5; quadratic would be 100
    assert cmp_ratio < 16, (small, big)
    assert big[1] / small[1] < 11  # heap touches per request stay constant
    assert big[2] / small[2] < 11  # steps grow linearly
    assert big[0] / 100_000 < 3 * 17  # at most ~3 key comparisons per heap level per request
