"""Torch attention backend: runs on any device and is the reference the Triton kernels are checked against."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from kvx.kernels.interface import AttentionBackend, AttentionMetadata, LayerKV


def quantize_int8(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Vector-wise int8: one scale per (token, head) over head_dim. x: [T, H, D] -> (int8 [T,H,D], f32 [T,H])."""
    x = x.float()
    scale = x.abs().amax(dim=-1).clamp(min=1e-8) / 127.0
    q = torch.round(x / scale[..., None]).clamp(-127, 127).to(torch.int8)
    return q, scale


def store_kv_ref(k: torch.Tensor, v: torch.Tensor, kv: LayerKV, slot_mapping: torch.Tensor) -> None:
    keep = slot_mapping >= 0
    slots = slot_mapping[keep]
    k, v = k[keep], v[keep]
    bs = kv.block_size
    blk, off = slots // bs, slots % bs
    if kv.quantized:
        kq, ks = quantize_int8(k)
        vq, vs = quantize_int8(v)
        kv.k[blk, off] = kq
        kv.v[blk, off] = vq
        kv.k_scale[blk, off] = ks
        kv.v_scale[blk, off] = vs
    else:
        kv.k[blk, off] = k.to(kv.k.dtype)
        kv.v[blk, off] = v.to(kv.v.dtype)


def gather_seq_kv(kv: LayerKV, block_table: torch.Tensor, seq_len: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """One sequence's K and V as contiguous [seq_len, kv_heads, head_dim], dequantised if int8."""
    bs = kv.block_size
    blocks = block_table[: (seq_len + bs - 1) // bs].long()
    k = kv.k[blocks].flatten(0, 1)[:seq_len]
    v = kv.v[blocks].flatten(0, 1)[:seq_len]
    if kv.quantized:  # dequantise in float32, then round once to the compute dtype
        k = k.float() * kv.k_scale[blocks].flatten(0, 1)[:seq_len, :, None]
        v = v.float() * kv.v_scale[blocks].flatten(0, 1)[:seq_len, :, None]
    return k.to(dtype), v.to(dtype)


def paged_attention_ref(q: torch.Tensor, kv: LayerKV, meta: AttentionMetadata, scale: float) -> torch.Tensor:
    """Varlen causal attention over the paged pool, one sequence at a time (decode and extend alike)."""
    out = torch.empty_like(q)
    hq = q.shape[1]
    start = 0
    for i, (n, seq_len) in enumerate(zip(meta.query_lens_cpu, meta.seq_lens_cpu)):
        if n == 0:
            continue
        k, v = gather_seq_kv(kv, meta.block_tables[i], seq_len, q.dtype)
        group = hq // k.shape[1]
        qi = q[start : start + n].transpose(0, 1)  # [Hq, n, D]
        ki = k.transpose(0, 1).repeat_interleave(group, dim=0)  # [Hq, L, D]
        vi = v.transpose(0, 1).repeat_interleave(group, dim=0)
        mask = None
        if n > 1:
            # query j sits at position seq_len - n + j and sees keys 0..that position
            qpos = torch.arange(seq_len - n, seq_len, device=q.device)[:, None]
            mask = torch.arange(seq_len, device=q.device)[None, :] <= qpos
        # 4-D inputs take torch's fused CPU flash kernel (~3x faster here than the 3-D path)
        o = F.scaled_dot_product_attention(qi[None], ki[None], vi[None], attn_mask=mask, scale=scale)[0]
        out[start : start + n] = o.transpose(0, 1)
        start += n
    return out


class TorchBackend(AttentionBackend):
    name = "torch"

    def store_kv(self, k, v, kv: LayerKV, slot_mapping):
        store_kv_ref(k, v, kv, slot_mapping)

    def attention(self, q, kv: LayerKV, meta: AttentionMetadata, scale: float):
        return paged_attention_ref(q, kv, meta, scale)
