"""Triton token-bitmask apply: grid (rows, vocab tiles); each program unpacks BLOCK/32 words and
writes -inf only where a token is disallowed (allowed logits are not rewritten)."""
from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _bitmask_kernel(Logits, Bitmask, vocab, words, stride_l, stride_b, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    tile = tl.program_id(1)
    offs_w = tile * (BLOCK // 32) + tl.arange(0, BLOCK // 32)
    packed = tl.load(Bitmask + row * stride_b + offs_w, mask=offs_w < words, other=0)
    banned = ((packed[:, None] >> tl.arange(0, 32)[None, :]) & 1) == 0
    banned = tl.reshape(banned, [BLOCK])
    offs = tile * BLOCK + tl.arange(0, BLOCK)
    tl.store(Logits + row * stride_l + offs, tl.full([BLOCK], float("-inf"), Logits.dtype.element_ty),
             mask=banned & (offs < vocab))


def apply_token_bitmask_triton(logits: torch.Tensor, bitmask: torch.Tensor) -> torch.Tensor:
    """logits [B, V] or [V] (unit last stride), bitmask int32 [B, W] or [W]; in place, returns logits."""
    rows = logits if logits.dim() == 2 else logits[None]
    masks = bitmask if bitmask.dim() == 2 else bitmask[None]
    assert masks.dtype == torch.int32 and rows.shape[0] == masks.shape[0], "one int32 bitmask row per logits row"
    assert rows.stride(-1) == 1 and masks.stride(-1) == 1
    block = 4096 if logits.is_cuda else 1024
    grid = (rows.shape[0], triton.cdiv(rows.shape[1], block))
    _bitmask_kernel[grid](rows, masks, rows.shape[1], masks.shape[1], rows.stride(0), masks.stride(0),
                          BLOCK=block, num_warps=4)
    return logits
