"""Scatter this step's K/V rows into the paged pool by slot mapping; int8 pools quantise on the way.

Grid (T,): one program per new token writes all its KV heads; slot -1 rows are skipped. The int8
rounding is round-half-to-even so it matches torch.round in the twin (quantize_int8) bit for bit.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from kvx.kernels.interface import LayerKV


@triton.jit
def _round_half_even(x):
    f = tl.floor(x)
    frac = x - f
    odd = f - 2.0 * tl.floor(f * 0.5)  # 1.0 when f is odd
    return tl.where(frac > 0.5, f + 1.0, tl.where(frac < 0.5, f, f + odd))


@triton.jit
def _store_row(X, Pool, Scale, t, blk, off, stride_xt, stride_xh, stride_pb, stride_pt, stride_ph,
               stride_sb, stride_st, stride_sh, offs_h, offs_d, h_mask, mask, QUANT: tl.constexpr):
    x = tl.load(X + t * stride_xt + offs_h[:, None] * stride_xh + offs_d[None, :], mask=mask, other=0.0)
    dst = Pool + blk * stride_pb + off * stride_pt + offs_h[:, None] * stride_ph + offs_d[None, :]
    if QUANT:
        x = x.to(tl.float32)
        scale = tl.maximum(tl.max(tl.abs(x), axis=1), 1e-8) / 127.0
        xq = tl.minimum(tl.maximum(_round_half_even(x / scale[:, None]), -127.0), 127.0)
        tl.store(dst, xq.to(tl.int8), mask=mask)
        tl.store(Scale + blk * stride_sb + off * stride_st + offs_h * stride_sh, scale, mask=h_mask)
    else:
        tl.store(dst, x.to(Pool.dtype.element_ty), mask=mask)


@triton.jit
def _store_kv_kernel(
    K, V, KPool, VPool, KScale, VScale, Slots,
    stride_kt, stride_kh, stride_vt, stride_vh,
    stride_kpb, stride_kpt, stride_kph, stride_vpb, stride_vpt, stride_vph, stride_sb, stride_st, stride_sh,
    HEADS: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr,
    PAGE: tl.constexpr, QUANT: tl.constexpr,
):
    t = tl.program_id(0).to(tl.int64)
    slot = tl.load(Slots + t)
    if slot < 0:
        return
    blk = slot // PAGE
    off = slot % PAGE
    offs_h = tl.arange(0, BLOCK_H)
    offs_d = tl.arange(0, BLOCK_D)
    h_mask = offs_h < HEADS
    mask = h_mask[:, None] & (offs_d < HEAD_DIM)[None, :]
    _store_row(K, KPool, KScale, t, blk, off, stride_kt, stride_kh, stride_kpb, stride_kpt, stride_kph,
               stride_sb, stride_st, stride_sh, offs_h, offs_d, h_mask, mask, QUANT)
    _store_row(V, VPool, VScale, t, blk, off, stride_vt, stride_vh, stride_vpb, stride_vpt, stride_vph,
               stride_sb, stride_st, stride_sh, offs_h, offs_d, h_mask, mask, QUANT)


def store_kv(k: torch.Tensor, v: torch.Tensor, kv: LayerKV, slot_mapping: torch.Tensor) -> None:
    """k, v: [T, kv_heads, head_dim]; row t goes to pool slot slot_mapping[t] (skipped when -1)."""
    assert k.shape == v.shape and k.shape[1:] == kv.k.shape[2:], "k/v do not match the pool's heads x head_dim"
    assert k.stride(-1) == 1 and v.stride(-1) == 1 and kv.k.stride(-1) == 1
    if k.shape[0] == 0:
        return
    heads, head_dim = k.shape[1:]
    if kv.quantized:
        assert kv.k_scale.stride() == kv.v_scale.stride()
        scales, s_strides = (kv.k_scale, kv.v_scale), kv.k_scale.stride()
    else:
        scales, s_strides = (kv.k, kv.v), (0, 0, 0)
    _store_kv_kernel[(k.shape[0],)](
        k, v, kv.k, kv.v, *scales, slot_mapping.to(torch.int64),
        k.stride(0), k.stride(1), v.stride(0), v.stride(1),
        *kv.k.stride()[:3], *kv.v.stride()[:3], *s_strides,
        HEADS=heads, HEAD_DIM=head_dim, BLOCK_H=triton.next_power_of_2(heads),
        BLOCK_D=triton.next_power_of_2(head_dim), PAGE=kv.block_size, QUANT=kv.quantized, num_warps=1,
    )
