"""Paged decode attention (one query token per sequence), flash-decoding style.

Stage 1: grid (seqs, kv_heads, splits). One program takes ALL query heads of one KV head (GQA: the
KV tile is read once for the whole group) over one slice of the sequence's context, and writes a
partial output plus its log-sum-exp. Stage 2: grid (seqs, q_heads) merges the splits by LSE.
Splitting the context keeps the GPU busy when batch x kv_heads alone is too few programs.
"""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from kvx.kernels.interface import AttentionMetadata, LayerKV
from kvx.kernels.triton_paged import attend_tile, check_inputs, dot_args, kv_launch_args

LOG2E = 1.4426950408889634


@triton.jit
def _split_range(SeqLens, b, split, NUM_SPLITS: tl.constexpr, BLOCK_N: tl.constexpr):
    """Token range [start, end) of one split; both stages derive it the same way."""
    seq_len = tl.load(SeqLens + b)
    split_len = tl.cdiv(tl.cdiv(seq_len, NUM_SPLITS), BLOCK_N) * BLOCK_N
    start = split * split_len
    return start, tl.minimum(start + split_len, seq_len)


@triton.jit
def _decode_split_kernel(
    Q, K, V, KS, VS, BlockTables, SeqLens, QStart, MidO, MidLse,
    sm_scale_log2,
    stride_qt, stride_qh,
    stride_kb, stride_kt, stride_kh, stride_vb, stride_vt, stride_vh, stride_sb, stride_st, stride_sh,
    stride_bt, stride_mb, stride_mh, stride_ms, stride_lb, stride_lh,
    GROUP: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr,
    BLOCK_N: tl.constexpr, PAGE: tl.constexpr, NUM_SPLITS: tl.constexpr,
    QUANT: tl.constexpr, PRECISION: tl.constexpr, DOT_F32: tl.constexpr,
):
    b = tl.program_id(0)
    kv_head = tl.program_id(1)
    split = tl.program_id(2)
    q_row = tl.load(QStart + b)
    if tl.load(QStart + b + 1) == q_row:
        return  # sequence has no query this step
    start, end = _split_range(SeqLens, b, split, NUM_SPLITS, BLOCK_N)
    if start >= end:
        return
    offs_h = tl.arange(0, BLOCK_H)
    h_mask = offs_h < GROUP
    heads = kv_head * GROUP + offs_h
    offs_d = tl.arange(0, BLOCK_D)
    d_mask = offs_d < HEAD_DIM
    q = tl.load(Q + q_row * stride_qt + heads[:, None] * stride_qh + offs_d[None, :],
                mask=h_mask[:, None] & d_mask[None, :], other=0)
    m_i = tl.full([BLOCK_H], -1e30, tl.float32)
    l_i = tl.zeros([BLOCK_H], tl.float32)
    acc = tl.zeros([BLOCK_H, BLOCK_D], tl.float32)
    table_row = BlockTables + b.to(tl.int64) * stride_bt
    for n0 in range(start, end, BLOCK_N):
        offs_n = n0 + tl.arange(0, BLOCK_N)
        n_mask = offs_n < end
        acc, m_i, l_i = attend_tile(
            q, acc, m_i, l_i, K, V, KS, VS, table_row, offs_n, n_mask,
            h_mask[:, None] & n_mask[None, :], kv_head, offs_d, d_mask,
            stride_kb, stride_kt, stride_kh, stride_vb, stride_vt, stride_vh, stride_sb, stride_st, stride_sh,
            sm_scale_log2, PAGE, QUANT, PRECISION, DOT_F32,
        )
    l_safe = tl.where(h_mask, l_i, 1.0)
    mid = MidO + b * stride_mb + heads[:, None] * stride_mh + split * stride_ms + offs_d[None, :]
    tl.store(mid, acc / l_safe[:, None], mask=h_mask[:, None] & d_mask[None, :])
    tl.store(MidLse + b * stride_lb + heads * stride_lh + split, m_i + tl.log2(l_safe), mask=h_mask)


@triton.jit
def _decode_merge_kernel(
    MidO, MidLse, Out, SeqLens, QStart,
    stride_mb, stride_mh, stride_ms, stride_lb, stride_lh, stride_ot, stride_oh,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr,
    NUM_SPLITS: tl.constexpr, BLOCK_S: tl.constexpr,
):
    b = tl.program_id(0)
    head = tl.program_id(1)
    q_row = tl.load(QStart + b)
    if tl.load(QStart + b + 1) == q_row:
        return
    offs_s = tl.arange(0, BLOCK_S)
    start, end = _split_range(SeqLens, b, offs_s, NUM_SPLITS, BLOCK_N)
    s_mask = (offs_s < NUM_SPLITS) & (start < end)  # empty splits wrote nothing: never read them
    offs_d = tl.arange(0, BLOCK_D)
    d_mask = offs_d < HEAD_DIM
    lse = tl.load(MidLse + b * stride_lb + head * stride_lh + offs_s, mask=s_mask, other=float("-inf"))
    o = tl.load(MidO + b * stride_mb + head * stride_mh + offs_s[:, None] * stride_ms + offs_d[None, :],
                mask=s_mask[:, None] & d_mask[None, :], other=0.0)
    w = tl.exp2(lse - tl.max(lse, axis=0))
    out = tl.sum(w[:, None] * o, axis=0) / tl.sum(w, axis=0)
    tl.store(Out + q_row.to(tl.int64) * stride_ot + head * stride_oh + offs_d,
             out.to(Out.dtype.element_ty), mask=d_mask)


def _num_sms(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 4  # interpreter: small, but still exercises the split/merge path


def choose_num_splits(num_seqs: int, kv_heads: int, max_seq_len: int, block_n: int, device: torch.device) -> int:
    """Enough splits for ~4 programs per SM, never slices shorter than two KV tiles, at most 32."""
    want = math.ceil(4 * _num_sms(device) / max(1, num_seqs * kv_heads))
    most = max(1, math.ceil(max_seq_len / (2 * block_n)))
    return int(max(1, min(want, most, 32)))


def decode_attention(
    q: torch.Tensor, kv: LayerKV, meta: AttentionMetadata, scale: float,
    out: torch.Tensor | None = None, num_splits: int | None = None,
    block_n: int | None = None, num_warps: int = 4,
) -> torch.Tensor:
    """q: [T, q_heads, head_dim] with at most one row per sequence -> out (same shape and dtype).
    num_splits / block_n / num_warps: launch settings (None = chosen here; benchmarks sweep them)."""
    check_inputs(q, kv, meta)
    assert meta.max_query_len <= 1, "decode_attention takes one query token per sequence"
    out = torch.empty_like(q) if out is None else out
    num_seqs, (hq, head_dim), kv_heads = meta.num_seqs, q.shape[1:], kv.k.shape[2]
    if num_seqs == 0 or q.shape[0] == 0:
        return out
    group = hq // kv_heads
    # KV tile: on an H200 (batch 64 x 4k) 64 tokens is best for float pools (0.92 of copy bandwidth).
    # int8 pools measured faster with 128 (0.47 vs 0.34 of copy) but that launch has not yet been
    # checked against the twin on a GPU, so they keep 64 until a GPU run's tests cover it.
    block_n = block_n or (64 if q.is_cuda else 16)
    splits = num_splits or choose_num_splits(num_seqs, kv_heads, meta.max_seq_len, block_n, q.device)
    mid_o = torch.empty((num_seqs, hq, splits, head_dim), dtype=torch.float32, device=q.device)
    mid_lse = torch.empty((num_seqs, hq, splits), dtype=torch.float32, device=q.device)
    pools, kv_strides = kv_launch_args(kv)
    block_d = triton.next_power_of_2(head_dim)
    _decode_split_kernel[(num_seqs, kv_heads, splits)](
        q, *pools, meta.block_tables, meta.seq_lens, meta.query_start_loc, mid_o, mid_lse,
        scale * LOG2E, q.stride(0), q.stride(1), *kv_strides,
        meta.block_tables.stride(0), *mid_o.stride()[:3], *mid_lse.stride()[:2],
        GROUP=group, HEAD_DIM=head_dim, BLOCK_H=max(16, triton.next_power_of_2(group)), BLOCK_D=block_d,
        BLOCK_N=block_n, PAGE=kv.block_size, NUM_SPLITS=splits, QUANT=kv.quantized,
        **dot_args(q.dtype), num_warps=num_warps,
    )
    _decode_merge_kernel[(num_seqs, hq)](
        mid_o, mid_lse, out, meta.seq_lens, meta.query_start_loc,
        *mid_o.stride()[:3], *mid_lse.stride()[:2], out.stride(0), out.stride(1),
        HEAD_DIM=head_dim, BLOCK_D=block_d, BLOCK_N=block_n, NUM_SPLITS=splits,
        BLOCK_S=triton.next_power_of_2(splits), num_warps=1,
    )
    return out
