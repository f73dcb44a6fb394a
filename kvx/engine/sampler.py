"""Next-token choice from a step's logits: greedy, or temperature / top-k / top-p with a per-request seed.

Greedy rows (the extraction default) are one batched argmax. Sampled rows each draw from their own
torch.Generator, so a request's output depends only on its seed, never on what it was batched with.
A per-row boolean mask (the grammar hook) is applied first; masked tokens get -inf.
"""
from __future__ import annotations

import random

import torch

from kvx.engine.api import SamplingParams

_seed_source = random.SystemRandom()


def make_generator(seed: int | None) -> torch.Generator:
    g = torch.Generator()
    g.manual_seed(seed if seed is not None else _seed_source.getrandbits(63))
    return g


def apply_mask(row: torch.Tensor, allowed: torch.Tensor) -> None:
    """row [V] float, allowed [N] bool over the tokenizer's vocabulary: rows past N are padding, never
    allowed; ids past V (a tokenizer with more tokens than the model has rows) can never be chosen."""
    n = min(allowed.shape[0], row.shape[0])
    row[:n].masked_fill_(~allowed[:n].to(row.device), float("-inf"))
    if n < row.shape[0]:
        row[n:] = float("-inf")


def filter_logits(row: torch.Tensor, p: SamplingParams) -> torch.Tensor:
    """Temperature, then top-k, then top-p (nucleus) on one row of float32 logits."""
    row = row / p.temperature
    if 0 < p.top_k < row.shape[0]:
        kth = torch.topk(row, p.top_k).values[-1]
        row = row.masked_fill(row < kth, float("-inf"))
    if p.top_p < 1.0:
        sorted_logits, order = torch.sort(row, descending=True)
        cum = torch.softmax(sorted_logits, dim=-1).cumsum(-1)
        # drop a token when the tokens ranked above it already cover top_p (keeps at least one)
        drop = (cum - torch.softmax(sorted_logits, dim=-1)) >= p.top_p
        row = row.scatter(0, order, sorted_logits.masked_fill(drop, float("-inf")))
    return row


def sample(
    logits: torch.Tensor,
    params: list[SamplingParams],
    generators: list[torch.Generator | None],
) -> list[int]:
    """logits [S, V] float32 (already masked) -> S token ids."""
    out = logits.argmax(dim=-1).tolist()
    for i, p in enumerate(params):
        if p.temperature <= 0.0:
            continue
        probs = torch.softmax(filter_logits(logits[i].float(), p), dim=-1)
        out[i] = int(torch.multinomial(probs, 1, generator=generators[i]).item())
    return out
