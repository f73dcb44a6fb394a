"""Paged attention for query rows that see few keys each (decode tokens, short jump-forward
appends), compiled with numba: keys and values are read straight from the KV pool through the
block table.

The torch route copies each sequence's blocks out of the pool into a padded batch and runs the
flash kernel on it; with one to a few queries per sequence the copy and the kernel's query tiling
cost several times the arithmetic (a decode step of 128 sequences x 14 own blocks, 3 KV heads:
~10 ms gathered + flash, ~3.4 ms here). Each query row is one parallel task that walks the blocks
of its sequence in place with an online softmax (block by block, K and V of a block read together)
and returns its normalised output with the log-sum-exp, so the caller can merge it with the
attention over a shared prefix (cpu_backend.with_shared).

The pool may be float32, bfloat16 (read as its uint16 bits: numpy has no bfloat16) or int8 with
per-(token, head) scales; each block's K and V are first widened into float32 tiles (load_tile), so
the arithmetic is the same float32 code for all three. The kernel is bound by memory bandwidth
(~10 GB/s per step here), so a bfloat16 pool halves its time.

numba is a dependency; where it cannot be imported `available()` is False and the torch route runs.
"""
from __future__ import annotations

import dataclasses
import functools

import numpy as np
import torch

from kvx.kernels.interface import LayerKV
from kvx.kernels.numba_env import import_numba, sync_threads


@dataclasses.dataclass
class PagedRows:
    """Row r attends the first keys[r] key positions of the blocks tables[seq[r]]."""

    tables: torch.Tensor  # [S, W] int64 block ids
    seq: torch.Tensor  # [R] int64 index into tables
    keys: torch.Tensor  # [R] int64, >= 1


def _tile_loaders(numba):
    """`load_tile(k, scale, blk, used, tile)`: the first `used` rows of pool block `blk` as float32
    [block, heads, dim], one implementation per pool format, chosen by numba from the pool's type."""
    from numba import types
    from numba.extending import overload

    def load_tile(src, scale, blk, used, tile):  # pragma: no cover - replaced by the overload
        raise NotImplementedError

    @overload(load_tile)
    def _load_tile(src, scale, blk, used, tile):  # pragma: no cover - compiled
        if src.dtype == types.uint16:  # bfloat16 bits are the high half of a float32's
            def widen(src, scale, blk, used, tile):
                bits = tile.view(np.uint32)
                for off in range(used):
                    for h in range(src.shape[2]):
                        for d in range(src.shape[3]):
                            bits[off, h, d] = np.uint32(src[blk, off, h, d]) << 16
            return widen
        if src.dtype == types.int8:  # one float32 scale per (token, head)
            def dequantize(src, scale, blk, used, tile):
                for off in range(used):
                    for h in range(src.shape[2]):
                        for d in range(src.shape[3]):
                            tile[off, h, d] = src[blk, off, h, d] * scale[blk, off, h]
            return dequantize

        def copy(src, scale, blk, used, tile):
            tile[:used] = src[blk, :used]
        return copy

    return load_tile


@functools.cache
def _kernel():
    """(numba, compiled kernel), or None without numba (or if it cannot compile). Compiled on
    first use, cached on disk under $KVX_CACHE/numba."""
    numba = import_numba()
    if numba is None:
        return None
    load_tile = _tile_loaders(numba)

    @numba.njit(parallel=True, fastmath=True, cache=True)
    def attend(q, k, v, k_scale, v_scale, tables, seq, keys, out, lse):  # pragma: no cover - compiled
        rows, heads, group, dim = q.shape
        block = k.shape[1]
        for r in numba.prange(rows):  # every head of a row in one task: each block is read once
            b, n = seq[r], keys[r]
            top = np.full((heads, group), -np.inf, np.float32)  # running max, sum and output per query
            total = np.zeros((heads, group), np.float32)
            acc = np.zeros((heads, group, dim), np.float32)
            p = np.empty((block, heads, group), np.float32)
            kt = np.empty((block, heads, dim), np.float32)  # the block's K and V as float32
            vt = np.empty((block, heads, dim), np.float32)
            for j in range((n + block - 1) // block):  # one block at a time, online softmax
                blk, used = tables[b, j], min(block, n - j * block)
                load_tile(k, k_scale, blk, used, kt)
                load_tile(v, v_scale, blk, used, vt)
                for off in range(used):
                    for h in range(heads):
                        for g in range(group):
                            s = np.float32(0.0)
                            for d in range(dim):
                                s += q[r, h, g, d] * kt[off, h, d]
                            p[off, h, g] = s
                for h in range(heads):
                    for g in range(group):
                        new_top = top[h, g]
                        for off in range(used):
                            new_top = max(new_top, p[off, h, g])
                        rescale = np.exp(top[h, g] - new_top)
                        top[h, g] = new_top
                        total[h, g] *= rescale
                        for d in range(dim):
                            acc[h, g, d] *= rescale
                        for off in range(used):
                            p[off, h, g] = np.exp(p[off, h, g] - new_top)
                            total[h, g] += p[off, h, g]
                for off in range(used):
                    for h in range(heads):
                        for g in range(group):
                            w = p[off, h, g]
                            for d in range(dim):
                                acc[h, g, d] += w * vt[off, h, d]
            for h in range(heads):
                for g in range(group):
                    lse[r, h, g] = top[h, g] + np.log(total[h, g])
                    for d in range(dim):
                        out[r, h, g, d] = acc[h, g, d] / total[h, g]

    try:  # compile now (or load the disk cache): a failure means the torch route, not a traceback later
        q, kv = np.zeros((1, 1, 1, 1), np.float32), np.zeros((1, 1, 1, 1), np.float32)
        ones, idx = np.ones((1, 1, 1), np.float32), np.zeros(1, np.int64)
        attend(q, kv, kv, ones, ones, np.zeros((1, 1), np.int64), idx, idx + 1, q.copy(), ones.copy())
    except Exception:  # noqa: BLE001 - numba's errors have no common base class
        return None
    return numba, attend


_NO_SCALES = np.ones((1, 1, 1), np.float32)  # float pools: the kernel never reads it


_POOL_VIEWS = {torch.float32: None, torch.int8: None, torch.bfloat16: torch.int16}  # numpy has no bfloat16


@functools.cache
def available() -> bool:
    return _kernel() is not None


def supports(kv: LayerKV) -> bool:
    """numba installed (KVX_NUMBA=0 turns it off) and a host pool of a format the kernel reads."""
    return kv.k.device.type == "cpu" and kv.k.dtype in _POOL_VIEWS and available()


def _numpy(pool: torch.Tensor) -> np.ndarray:
    view = _POOL_VIEWS[pool.dtype]
    return pool.numpy() if view is None else pool.view(view).numpy().view(np.uint16)


def paged_attention_rows(q: torch.Tensor, kv: LayerKV, rows: PagedRows) -> tuple[torch.Tensor, torch.Tensor]:
    """q [R, Hkv, G, D] float32, pre-scaled -> o [R, Hkv, G, D], lse [R, Hkv, G, 1]."""
    numba, kernel = _kernel()
    sync_threads(numba)
    out = torch.empty(q.shape, dtype=torch.float32)
    lse = torch.empty(q.shape[:-1], dtype=torch.float32)
    scales = (kv.k_scale.numpy(), kv.v_scale.numpy()) if kv.quantized else (_NO_SCALES, _NO_SCALES)
    kernel(q.contiguous().numpy(), _numpy(kv.k), _numpy(kv.v), *scales, rows.tables.numpy(),
           rows.seq.numpy(), rows.keys.numpy(), out.numpy(), lse.numpy())
    return out, lse.unsqueeze(-1)
