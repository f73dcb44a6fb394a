"""Random paged-KV batches for the kernel tests, and the plain dense attention they are checked by.

Each sequence's K/V is drawn contiguous first (the dense truth), then scattered into a pool whose
blocks are shuffled; every pool slot no sequence owns (whole spare blocks and the tail of partial
blocks) is poisoned with NaN, so a kernel that reads past a sequence's end shows it.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from kvx.kernels.interface import AttentionMetadata, KVCache, LayerKV
from kvx.kernels.torch_backend import quantize_int8


@dataclass
class PagedCase:
    q: torch.Tensor  # [T, q_heads, head_dim]
    keys: list[torch.Tensor]  # per sequence [seq_len, kv_heads, head_dim] float32 (dense truth)
    values: list[torch.Tensor]
    kv: LayerKV
    meta: AttentionMetadata
    scale: float


def rel_err(got: torch.Tensor, want: torch.Tensor) -> float:
    got, want = got.double().cpu(), want.double().cpu()
    assert torch.isfinite(got).all(), "output has NaN/inf"
    return ((got - want).abs().max() / want.abs().max().clamp(min=1e-12)).item()


def make_case(
    seqs: list[tuple[int, int]],  # (cached prefix length, new query tokens) per sequence
    q_heads: int, kv_heads: int, head_dim: int, block_size: int,
    dtype: torch.dtype = torch.float32, kv_dtype: torch.dtype | None = None,
    device: str = "cpu", seed: int = 0,
) -> PagedCase:
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(sum(n for _, n in seqs), q_heads, head_dim, generator=gen).to(dtype).to(device)
    kv_dtype = kv_dtype or dtype
    seq_lens = [p + n for p, n in seqs]
    need = [(s + block_size - 1) // block_size for s in seq_lens]
    num_blocks = sum(need) + 3  # spare blocks stay poisoned
    order = torch.randperm(num_blocks, generator=gen).tolist()
    tables, slots, keys, values = [], [], [], []
    cache = KVCache(1, num_blocks, block_size, kv_heads, head_dim, dtype=kv_dtype)
    kv = cache.layer(0)
    if kv.quantized:  # poison from its own generator: int8 and float cases of one seed share K/V
        junk = torch.Generator().manual_seed(seed + 1)
        kv.k.copy_(torch.randint(-128, 128, kv.k.shape, generator=junk, dtype=torch.int8))
        kv.v.copy_(torch.randint(-128, 128, kv.v.shape, generator=junk, dtype=torch.int8))
        kv.k_scale.fill_(float("nan"))
        kv.v_scale.fill_(float("nan"))
    else:
        cache.data.fill_(float("nan"))
    for (prefix, n), seq_len, nb in zip(seqs, seq_lens, need):
        table, order = order[:nb], order[nb:]
        tables.append(table)
        pos = torch.arange(seq_len)
        seq_slots = torch.tensor(table, dtype=torch.int64)[pos // block_size] * block_size + pos % block_size
        slots += seq_slots[prefix:].tolist()
        k = torch.randn(seq_len, kv_heads, head_dim, generator=gen)
        v = torch.randn(seq_len, kv_heads, head_dim, generator=gen)
        _write(kv, seq_slots, k, v)
        if kv.quantized:  # the dense truth is what the int8 pool holds
            k, v = _dequant(*quantize_int8(k)), _dequant(*quantize_int8(v))
        else:  # ... or the float pool, rounded to its dtype
            k, v = k.to(kv_dtype).float(), v.to(kv_dtype).float()
        keys.append(k.to(dtype).float())
        values.append(v.to(dtype).float())
    cache.data = cache.data.to(device)
    if cache.scale is not None:
        cache.scale = cache.scale.to(device)
    kv = cache.layer(0)
    meta = AttentionMetadata.build([n for _, n in seqs], seq_lens, tables, slots, device=device)
    return PagedCase(q, keys, values, kv, meta, head_dim**-0.5)


def _write(kv: LayerKV, slots: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    blk, off = slots // kv.block_size, slots % kv.block_size
    if kv.quantized:
        (kq, ks), (vq, vs) = quantize_int8(k), quantize_int8(v)
        kv.k[blk, off], kv.v[blk, off], kv.k_scale[blk, off], kv.v_scale[blk, off] = kq, vq, ks, vs
    else:
        kv.k[blk, off] = k.to(kv.k.dtype)
        kv.v[blk, off] = v.to(kv.v.dtype)


def _dequant(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return q.float() * scale[..., None]


def dense_attention(case: PagedCase) -> torch.Tensor:
    """Plain causal softmax attention in float64 over each sequence's contiguous K/V."""
    q = case.q.double().cpu()
    out = torch.zeros_like(q)
    hq = q.shape[1]
    for i, (k, v) in enumerate(zip(case.keys, case.values)):
        a, b = case.meta.query_start_loc[i].item(), case.meta.query_start_loc[i + 1].item()
        seq_len = k.shape[0]
        group = hq // k.shape[1]
        kk = k.double().repeat_interleave(group, dim=1)  # [L, Hq, D]
        vv = v.double().repeat_interleave(group, dim=1)
        scores = torch.einsum("qhd,khd->hqk", q[a:b], kk) * case.scale
        qpos = torch.arange(seq_len - (b - a), seq_len)[:, None]
        scores = scores.masked_fill(torch.arange(seq_len)[None, :] > qpos, float("-inf"))
        out[a:b] = torch.einsum("hqk,khd->qhd", scores.softmax(-1), vv)
    return out
