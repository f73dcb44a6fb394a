"""Paged extend (prefill with a cached prefix) attention over a varlen batch.

Grid (query tiles, seqs, q_heads). The new tokens' K/V are already in the pool (store_kv runs
first), so prefix and new tokens are one paged range: query row j of a sequence sits at position
prefix + j and sees keys 0..prefix+j. Each program stops at the last key its tile can see.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from kvx.kernels.interface import AttentionMetadata, LayerKV
from kvx.kernels.triton_decode_attention import LOG2E
from kvx.kernels.triton_paged import attend_tile, check_inputs, dot_args, kv_launch_args


@triton.jit
def _extend_kernel(
    Q, K, V, KS, VS, BlockTables, SeqLens, QStart, Out,
    sm_scale_log2,
    stride_qt, stride_qh, stride_ot, stride_oh,
    stride_kb, stride_kt, stride_kh, stride_vb, stride_vt, stride_vh, stride_sb, stride_st, stride_sh,
    stride_bt,
    GROUP: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr, PAGE: tl.constexpr, QUANT: tl.constexpr, PRECISION: tl.constexpr, DOT_F32: tl.constexpr,
):
    tile = tl.program_id(0)
    b = tl.program_id(1)
    head = tl.program_id(2)
    q0 = tl.load(QStart + b)
    q_len = tl.load(QStart + b + 1) - q0
    if tile * BLOCK_M >= q_len:
        return
    seq_len = tl.load(SeqLens + b)
    prefix = seq_len - q_len
    offs_m = tile * BLOCK_M + tl.arange(0, BLOCK_M)
    m_mask = offs_m < q_len
    q_pos = prefix + offs_m
    offs_d = tl.arange(0, BLOCK_D)
    d_mask = offs_d < HEAD_DIM
    rows = (q0 + offs_m).to(tl.int64)
    q = tl.load(Q + rows[:, None] * stride_qt + head * stride_qh + offs_d[None, :],
                mask=m_mask[:, None] & d_mask[None, :], other=0)
    kv_head = head // GROUP
    m_i = tl.full([BLOCK_M], -1e30, tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    table_row = BlockTables + b.to(tl.int64) * stride_bt
    kv_end = tl.minimum(seq_len, prefix + (tile + 1) * BLOCK_M)
    for n0 in range(0, kv_end, BLOCK_N):
        offs_n = n0 + tl.arange(0, BLOCK_N)
        n_mask = offs_n < kv_end
        visible = n_mask[None, :] & (offs_n[None, :] <= q_pos[:, None])
        acc, m_i, l_i = attend_tile(
            q, acc, m_i, l_i, K, V, KS, VS, table_row, offs_n, n_mask, visible, kv_head, offs_d, d_mask,
            stride_kb, stride_kt, stride_kh, stride_vb, stride_vt, stride_vh, stride_sb, stride_st, stride_sh,
            sm_scale_log2, PAGE, QUANT, PRECISION, DOT_F32,
        )
    out = acc / tl.where(m_mask, l_i, 1.0)[:, None]
    tl.store(Out + rows[:, None] * stride_ot + head * stride_oh + offs_d[None, :],
             out.to(Out.dtype.element_ty), mask=m_mask[:, None] & d_mask[None, :])


def extend_attention(
    q: torch.Tensor, kv: LayerKV, meta: AttentionMetadata, scale: float, out: torch.Tensor | None = None,
) -> torch.Tensor:
    """q: [T, q_heads, head_dim] (varlen rows, see AttentionMetadata) -> out (same shape and dtype)."""
    check_inputs(q, kv, meta)
    out = torch.empty_like(q) if out is None else out
    hq, head_dim = q.shape[1:]
    if meta.num_seqs == 0 or q.shape[0] == 0:
        return out
    block_m = 64 if q.is_cuda else 16
    block_n = 64 if q.is_cuda else 16
    if q.is_cuda and head_dim > 128:
        block_m, block_n = 32, 32  # keep the fp32 accumulator in registers
    pools, kv_strides = kv_launch_args(kv)
    grid = (triton.cdiv(meta.max_query_len, block_m), meta.num_seqs, hq)
    _extend_kernel[grid](
        q, *pools, meta.block_tables, meta.seq_lens, meta.query_start_loc, out,
        scale * LOG2E, q.stride(0), q.stride(1), out.stride(0), out.stride(1), *kv_strides,
        meta.block_tables.stride(0),
        GROUP=hq // kv.k.shape[2], HEAD_DIM=head_dim, BLOCK_M=block_m, BLOCK_N=block_n,
        BLOCK_D=triton.next_power_of_2(head_dim), PAGE=kv.block_size, QUANT=kv.quantized,
        **dot_args(q.dtype), num_warps=4,
    )
    return out
