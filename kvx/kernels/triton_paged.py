"""Triton building blocks shared by the paged attention kernels (decode and extend).

A KV tile is BLOCK_N consecutive token positions of one sequence; each position is looked up in
the block table on its own, so any pool block size works and partial blocks need no special case.
int8 pools keep one float32 scale per (token, head): K's scale multiplies the scores and V's scale
multiplies the probabilities, so the int8 tile itself is only widened (exactly) to the query dtype.
"""
import os

import torch
import triton
import triton.language as tl


@triton.jit
def paged_offsets(table_row, offs_n, n_mask, PAGE: tl.constexpr):
    """Pool (block, offset-in-block) of each token position in offs_n."""
    page = tl.load(table_row + offs_n // PAGE, mask=n_mask, other=0).to(tl.int64)
    return page, offs_n % PAGE


@triton.jit
def attend_tile(
    q, acc, m_i, l_i,  # q [M, D]; running output [M, D], row max [M], row sum [M] (log2 domain)
    K, V, KS, VS, table_row, offs_n, n_mask, visible, kv_head, offs_d, d_mask,
    stride_kb, stride_kt, stride_kh, stride_vb, stride_vt, stride_vh, stride_sb, stride_st, stride_sh,
    sm_scale_log2,
    PAGE: tl.constexpr, QUANT: tl.constexpr, PRECISION: tl.constexpr, DOT_F32: tl.constexpr,
):
    """One online-softmax step over a KV tile; `visible` [M, N] masks what each query row may see."""
    page, tok = paged_offsets(table_row, offs_n, n_mask, PAGE)
    load_mask = n_mask[:, None] & d_mask[None, :]
    k = tl.load(K + page[:, None] * stride_kb + tok[:, None] * stride_kt + kv_head * stride_kh + offs_d[None, :],
                mask=load_mask, other=0)
    v = tl.load(V + page[:, None] * stride_vb + tok[:, None] * stride_vt + kv_head * stride_vh + offs_d[None, :],
                mask=load_mask, other=0)
    if QUANT:
        k = k.to(q.dtype)
        v = v.to(q.dtype)
    if DOT_F32:  # the CPU interpreter's bf16 tl.dot is wrong; real GPUs never take this branch
        q, k, v = q.to(tl.float32), k.to(tl.float32), v.to(tl.float32)
    s = tl.dot(q, tl.trans(k), input_precision=PRECISION)
    if QUANT:
        s_off = page * stride_sb + tok * stride_st + kv_head * stride_sh
        s = s * tl.load(KS + s_off, mask=n_mask, other=0.0)[None, :]
    s = tl.where(visible, s * sm_scale_log2, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, axis=1))
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(s - m_new[:, None])
    l_i = l_i * alpha + tl.sum(p, axis=1)
    if QUANT:
        p = p * tl.load(VS + s_off, mask=n_mask, other=0.0)[None, :]
    acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
    return acc, m_new, l_i



def kv_launch_args(kv) -> tuple:
    """Pointers and strides of a LayerKV in the order attend_tile takes them (scales: dummies if float)."""
    if kv.quantized:
        assert kv.k_scale.stride() == kv.v_scale.stride(), "K and V scale views must share a layout"
        return (kv.k, kv.v, kv.k_scale, kv.v_scale), (*kv.k.stride()[:3], *kv.v.stride()[:3], *kv.k_scale.stride())
    return (kv.k, kv.v, kv.k, kv.v), (*kv.k.stride()[:3], *kv.v.stride()[:3], 0, 0, 0)


def dot_args(dtype: torch.dtype) -> dict:
    """float32 inputs keep full precision (no TF32) so the kernels match the torch twin to 1e-3.
    Under TRITON_INTERPRET=1 bf16 tiles are widened before tl.dot (the interpreter mis-multiplies bf16)."""
    interpreting = os.environ.get("TRITON_INTERPRET") == "1"
    return dict(PRECISION="ieee" if dtype == torch.float32 else "tf32",
                DOT_F32=interpreting and dtype == torch.bfloat16)


def check_inputs(q: torch.Tensor, kv, meta) -> None:
    assert q.dim() == 3 and q.stride(-1) == 1, "q must be [T, heads, head_dim] with unit last stride"
    assert kv.k.stride(-1) == 1 and kv.v.stride(-1) == 1, "pool rows must be contiguous"
    assert q.shape[1] % kv.k.shape[2] == 0, "query heads must be a multiple of KV heads"
    assert q.shape[2] == kv.k.shape[3], "q and pool head_dim differ"
    assert meta.block_tables.dtype == torch.int32 and meta.block_tables.stride(-1) == 1
