"""Rotary position embeddings: inverse frequencies (plain, linear, llama3) and a cos/sin table.

The table is indexed by each token's absolute position, so a varlen batch needs no per-sequence work.
"""
from __future__ import annotations

import math
from typing import Any

import torch

from kvx.errors import ModelError
from kvx.kernels import numba_rows

SUPPORTED_ROPE_TYPES = ("default", "linear", "llama3", "freq_factors")


def inverse_frequencies(head_dim: int, theta: float, scaling: dict[str, Any] | None) -> torch.Tensor:
    """[head_dim // 2] float32, the same formulas transformers uses (modeling_rope_utils)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    rope_type = (scaling or {}).get("rope_type", "default")
    if rope_type == "default":
        return inv_freq
    if rope_type == "linear":
        return inv_freq / float(scaling["factor"])
    if rope_type == "llama3":
        return _llama3_scale(inv_freq, scaling)
    if rope_type == "freq_factors":  # GGUF's rope_freqs tensor: llama.cpp bakes llama3 scaling into it
        return inv_freq / torch.tensor(scaling["factors"], dtype=torch.float32)
    raise ModelError(f"rope scaling {rope_type!r} is not supported (expected one of {', '.join(SUPPORTED_ROPE_TYPES)})")


def _llama3_scale(inv_freq: torch.Tensor, s: dict[str, Any]) -> torch.Tensor:
    # Llama 3.1: long wavelengths are divided by `factor`, short ones kept, the band between interpolated.
    factor = float(s["factor"])
    low, high = float(s.get("low_freq_factor", 1.0)), float(s.get("high_freq_factor", 4.0))
    old_ctx = float(s["original_max_position_embeddings"])
    low_wavelen, high_wavelen = old_ctx / low, old_ctx / high
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
    smooth = (old_ctx / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
    return torch.where(medium, smoothed, scaled)


class RopeTable:
    """cos/sin rows [positions, head_dim] in the model dtype, grown on demand (doubling)."""

    def __init__(self, inv_freq: torch.Tensor, dtype: torch.dtype, initial: int = 4096, device: torch.device | None = None):
        self.inv_freq = inv_freq.float()
        self.dtype = dtype
        self.device = device or torch.device("cpu")
        self.cos = self.sin = torch.empty(0)
        self._build(initial)

    def _build(self, n: int) -> None:
        pos = torch.arange(n, dtype=torch.int64).float()
        freqs = pos[:, None] * self.inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        self.cos, self.sin = emb.cos().to(self.device, self.dtype), emb.sin().to(self.device, self.dtype)

    def lookup(self, positions: torch.Tensor, max_position: int) -> tuple[torch.Tensor, torch.Tensor]:
        """positions [T] -> cos, sin [T, 1, head_dim] (broadcast over heads)."""
        if max_position >= self.cos.shape[0]:
            self._build(max(2 * self.cos.shape[0], max_position + 1))
        return self.cos[positions].unsqueeze(1), self.sin[positions].unsqueeze(1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [T, heads, head_dim], rotate-half convention (HF layout; GGUF q/k are un-permuted at load)."""
    if cos.dtype == torch.float32 and numba_rows.usable(x):  # one pass instead of neg, cat, mul, add
        return numba_rows.rope(x, cos, sin)
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin
