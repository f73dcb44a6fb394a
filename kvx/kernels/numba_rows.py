"""Row-wise CPU kernels of the decoder layer, compiled with numba: RMS norm and rotary embedding.

torch runs each as a chain of small ops (pow, mean, rsqrt, mul; neg, cat, mul, add), every one a
dispatch and a fresh buffer: ~80 us per call for a decode step of 76 rows, and milliseconds for a
prefill chunk of 1,000, where one pass over the rows takes 15-90 us. Each row is one parallel task
and its arithmetic does not depend on the other rows, so a sequence's result is the same in any
batch (the engine's greedy outputs rely on that).

numba is a dependency; where it cannot compile `available()` is False and llama.py keeps torch.
"""
from __future__ import annotations

import functools

import numpy as np
import torch

from kvx.kernels.numba_env import import_numba, sync_threads


@functools.cache
def _kernels():
    """(rms, rope) compiled kernels, or None without a working numba (cached under $KVX_CACHE/numba)."""
    numba = import_numba()
    if numba is None:
        return None

    @numba.njit(parallel=True, fastmath=True, cache=True)
    def rms(x, weight, eps, out):  # pragma: no cover - compiled
        rows, dim = x.shape
        for r in numba.prange(rows):
            total = np.float32(0.0)
            for d in range(dim):
                total += x[r, d] * x[r, d]
            inv = np.float32(1.0) / np.sqrt(total / np.float32(dim) + np.float32(eps))
            for d in range(dim):
                out[r, d] = weight[d] * (x[r, d] * inv)

    @numba.njit(parallel=True, fastmath=True, cache=True)
    def rope(x, cos, sin, out):  # pragma: no cover - compiled
        rows, heads, dim = x.shape
        half = dim // 2
        for r in numba.prange(rows):
            for h in range(heads):
                for d in range(half):
                    a, b = x[r, h, d], x[r, h, d + half]
                    out[r, h, d] = a * cos[r, d] - b * sin[r, d]
                    out[r, h, d + half] = b * cos[r, d + half] + a * sin[r, d + half]

    try:  # compile now (or load the disk cache): a failure means torch, not a traceback later
        x = np.ones((1, 2), np.float32)
        rms(x, x[0], 1e-6, x.copy())
        rope(x[:, None], x, x, x[:, None].copy())
    except Exception:  # noqa: BLE001 - numba's errors have no common base class
        return None
    return numba, rms, rope


@functools.cache
def available() -> bool:
    return _kernels() is not None


def usable(x: torch.Tensor) -> bool:
    return x.device.type == "cpu" and x.dtype == torch.float32 and available()


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """weight * x / rms(x) over the last dim; x [..., D] float32 (any leading shape)."""
    numba, rms, _ = _kernels()
    sync_threads(numba)
    rows = x.reshape(-1, x.shape[-1])
    out = torch.empty(rows.shape, dtype=torch.float32)
    rms(rows.numpy(), weight.float().contiguous().numpy(), float(eps), out.numpy())
    return out.view(x.shape)


def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate-half rotary embedding: x [T, H, D] float32 (strided views welcome), cos/sin [T, 1, D]."""
    numba, _, rope_kernel = _kernels()
    sync_threads(numba)
    out = torch.empty(x.shape, dtype=torch.float32)
    rope_kernel(x.numpy(), cos[:, 0].numpy(), sin[:, 0].numpy(), out.numpy())
    return out
