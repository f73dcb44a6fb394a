"""CPU attention backend: the torch reference, with decode rows batched and shared prefixes read once.

The reference loops over sequences (one SDPA call per sequence and layer), which dominates a CPU
decode step of 100+ sequences. Here all decode rows (query length 1) of a step run together:
  * cascade: the leading blocks every decoding sequence shares (same block ids: a common prompt
    prefix from the radix cache) are attended as one matmul over all queries, read once;
  * the rest of each sequence's blocks are gathered into a padded batch and masked by length;
  * the two partial softmaxes are merged with their log-sum-exp.
Extend rows (prefill chunks, jump-forward) keep the reference per-sequence path.
"""
from __future__ import annotations

import dataclasses

import torch

from kernels.interface import AttentionMetadata, LayerKV
from kernels.torch_backend import TorchBackend, paged_attention_ref


def gather_blocks(kv: LayerKV, blocks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """K, V of blocks [...] as float32 [..., block_size, kv_heads, head_dim], dequantised if int8."""
    k, v = kv.k[blocks], kv.v[blocks]
    if kv.quantized:
        return k.float() * kv.k_scale[blocks][..., None], v.float() * kv.v_scale[blocks][..., None]
    return k.float(), v.float()


def _partial(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None):
    """Unnormalised softmax(q k^T) v with its row max and sum. q [..., n, D], k/v [..., L, D]."""
    s = q @ k.transpose(-1, -2)
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    m = s.amax(dim=-1, keepdim=True)
    p = torch.exp(s - m)
    return p @ v, m, p.sum(dim=-1, keepdim=True)


def shared_prefix_blocks(tables: torch.Tensor, seq_lens: list[int], block_size: int) -> int:
    """Leading block columns identical in every row, leaving each sequence >= 1 token outside them."""
    if tables.shape[0] < 2:
        return 0
    same = (tables == tables[:1]).all(dim=0).int().cumprod(0)
    return min(int(same.sum()), (min(seq_lens) - 1) // block_size)


def decode_attention(q: torch.Tensor, kv: LayerKV, tables: torch.Tensor, seq_lens: list[int], scale: float) -> torch.Tensor:
    """q [B, Hq, D] (one query per sequence, at its last position) -> [B, Hq, D]."""
    b, hq, d = q.shape
    bs, hkv = kv.block_size, kv.k.shape[2]
    g = hq // hkv
    qg = q.float().view(b, hkv, g, d) * scale  # [B, Hkv, G, D]
    c = shared_prefix_blocks(tables, seq_lens, bs)
    lens = torch.tensor(seq_lens)
    width = (max(seq_lens) + bs - 1) // bs - c
    ks, vs = gather_blocks(kv, tables[:, c : c + width].long())  # [B, W, bs, Hkv, D]
    ks = ks.flatten(1, 2).permute(0, 2, 1, 3)  # [B, Hkv, L, D]
    vs = vs.flatten(1, 2).permute(0, 2, 1, 3)
    valid = torch.arange(width * bs)[None, :] < (lens - c * bs)[:, None]  # [B, L]
    o, m, l = _partial(qg, ks, vs, valid[:, None, None, :])
    if c:
        kc, vc = gather_blocks(kv, tables[0, :c].long())  # [c, bs, Hkv, D]
        kc = kc.flatten(0, 1).permute(1, 0, 2)  # [Hkv, Lc, D]
        vc = vc.flatten(0, 1).permute(1, 0, 2)
        qc = qg.permute(1, 0, 2, 3).reshape(hkv, b * g, d)  # every query of a kv head in one matmul
        o2, m2, l2 = _partial(qc, kc, vc, None)
        o2, m2, l2 = (t.view(hkv, b, g, -1).permute(1, 0, 2, 3) for t in (o2, m2, l2))
        mx = torch.maximum(m, m2)
        a, a2 = torch.exp(m - mx), torch.exp(m2 - mx)
        o, l = o * a + o2 * a2, l * a + l2 * a2
    return (o / l).reshape(b, hq, d).to(q.dtype)


class CpuBackend(TorchBackend):
    name = "cpu"

    def store_kv(self, k, v, kv: LayerKV, slot_mapping):
        if kv.quantized or bool((slot_mapping < 0).any()):
            return super().store_kv(k, v, kv, slot_mapping)
        nb, bs = kv.k.shape[:2]
        kv.k.view(nb * bs, *kv.k.shape[2:]).index_copy_(0, slot_mapping, k.to(kv.k.dtype))
        kv.v.view(nb * bs, *kv.v.shape[2:]).index_copy_(0, slot_mapping, v.to(kv.v.dtype))

    def attention(self, q, kv: LayerKV, meta: AttentionMetadata, scale: float):
        qlens = meta.query_lens_cpu
        decode = [i for i, n in enumerate(qlens) if n == 1]
        if len(decode) < 2:
            return paged_attention_ref(q, kv, meta, scale)
        starts = meta.query_start_loc[:-1]
        out = torch.empty_like(q)
        if len(decode) < len(qlens):  # extend rows: the reference path, decode rows masked out of it
            ext_lens = [0 if n == 1 else n for n in qlens]
            rows = torch.cat([torch.arange(int(starts[i]), int(starts[i]) + n) for i, n in enumerate(qlens) if n > 1])
            sub = dataclasses.replace(meta, query_lens_cpu=ext_lens, max_query_len=max(ext_lens))
            out[rows] = paged_attention_ref(q[rows], kv, sub, scale)
        idx = torch.tensor(decode)
        rows = starts[idx].long()
        lens = [meta.seq_lens_cpu[i] for i in decode]
        out[rows] = decode_attention(q[rows], kv, meta.block_tables[idx], lens, scale)
        return out
