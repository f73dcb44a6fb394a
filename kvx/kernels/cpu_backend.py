"""CPU attention backend: the torch reference's results, with the rows of a step batched and shared
prefixes read once.

The reference loops over sequences (one SDPA call per sequence and layer, K/V repeated to every
query head), which dominates a CPU step. Here each step is planned once (all layers reuse the plan):
  * the step's sequences fall in two groups (cpu_plan.py). Those with few new tokens (decode,
    jump-forward appends; with numba installed, otherwise decode only) run together: the leading
    blocks all of them share (same block ids: a common prompt prefix from the radix cache) are
    attended as one call over all their queries, and the rest of each sequence's blocks are read
    in place by the numba kernel (numba_paged.py), or gathered into a padded batch masked by length;
  * longer chunks (prefill) use the same cascade: the cached blocks they all share, which lie
    wholly before every new token, in one call without a mask; each sequence's own tail (its new
    tokens and what follows the shared blocks) causally by the flash kernel, one at a time;
  * the partial softmaxes are merged with their log-sum-exp. Queries are grouped per KV head
    (GQA) instead of copying K/V to every query head.
A bfloat16 pool (the default with bfloat16 weights) is attended in bfloat16 by the flash kernel
(queries rounded to it, float32 accumulation); the numba route rounds its queries the same way.
"""
from __future__ import annotations

import torch

from kvx.kernels import numba_paged
from kvx.kernels.cpu_plan import DecodePlan, ExtendPlan, PagedPlan, StepPlan
from kvx.kernels.interface import AttentionMetadata, LayerKV
from kvx.kernels.torch_backend import TorchBackend


def attend_dtype(kv: LayerKV) -> torch.dtype:
    """What attention over this pool computes in: a float32 or bfloat16 pool's own dtype (the
    flash kernel runs bfloat16 ~2.3x faster on AMX/avx512_bf16 and reads half the bytes), else
    float32 (int8 is dequantised, float16 has no fast CPU kernel)."""
    return kv.k.dtype if kv.k.dtype in (torch.float32, torch.bfloat16) else torch.float32


def gather_blocks(kv: LayerKV, blocks: torch.Tensor | slice) -> tuple[torch.Tensor, torch.Tensor]:
    """K, V of blocks [...] as [..., block_size, kv_heads, head_dim] in attend_dtype, dequantised
    if int8 (for a slice of a float32 or bfloat16 pool: views, no copy)."""
    k, v = kv.k[blocks], kv.v[blocks]
    if kv.quantized:
        return k.float() * kv.k_scale[blocks][..., None], v.float() * kv.v_scale[blocks][..., None]
    dtype = attend_dtype(kv)
    return k.to(dtype), v.to(dtype)


def as_heads(k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Gathered blocks [..., W, bs, Hkv, D] -> [..., Hkv, W * bs, D] views (the kernel takes strides)."""
    return tuple(t.flatten(-4, -3).transpose(-3, -2) for t in (k, v))


_FLASH = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor | None):
    """softmax(q k^T + bias) v and its log-sum-exp, both float32. q [B, H, n, D] (pre-scaled),
    k/v [B, H, L, D]; q is rounded to k's dtype (bias is made in it by the plan), the kernel
    accumulates in float32.

    torch's fused CPU flash kernel returns the LSE the cascade merge needs (about 2x faster than
    the matmul/softmax chain here); the chain remains for torch builds without it."""
    if _FLASH is not None:
        mask = None if bias is None else bias.expand(q.shape[0], 1, q.shape[2], k.shape[2])
        o, lse = _FLASH(q.to(k.dtype), k, v, 0.0, False, attn_mask=mask, scale=1.0)
        return o.float(), lse.unsqueeze(-1)
    q, k, v = q.float(), k.float(), v.float()
    s = q @ k.transpose(-1, -2)
    if bias is not None:
        s = s + bias
    lse = torch.logsumexp(s, dim=-1, keepdim=True)
    return torch.exp(s - lse) @ v, lse


def merge(o: torch.Tensor, lse: torch.Tensor, o2: torch.Tensor, lse2: torch.Tensor) -> torch.Tensor:
    """Combine two softmax-normalised partial attentions over disjoint key sets."""
    mx = torch.maximum(lse, lse2)
    w, w2 = torch.exp(lse - mx), torch.exp(lse2 - mx)
    return (o * w + o2 * w2) / (w + w2)


def with_shared(o: torch.Tensor, lse: torch.Tensor, qs: torch.Tensor, kv: LayerKV, shared: torch.Tensor | slice | None):
    """Fold attention over the shared blocks into the partial (o, lse) [T, Hkv, G, *] of the rows'
    own keys: every query of qs [T, Hq, D] (pre-scaled) attends those blocks in one call."""
    if shared is None:
        return o
    t, hkv = qs.shape[0], kv.k.shape[2]
    kc, vc = as_heads(*(x[None] for x in gather_blocks(kv, shared)))  # [1, Hkv, Lc, D]; views for a slice
    o2, lse2 = _attend(group_queries(qs, hkv), kc, vc, None)
    return merge(o, lse, ungroup(o2, t), ungroup(lse2, t))


def group_queries(q: torch.Tensor, hkv: int) -> torch.Tensor:
    """q [T, Hq, D] -> [1, Hkv, G*T, D], row g*T + t: every query a KV head serves, in one batch row."""
    t, hq, d = q.shape
    return q.view(t, hkv, hq // hkv, d).permute(1, 2, 0, 3).reshape(1, hkv, -1, d)


def ungroup(x: torch.Tensor, t: int) -> torch.Tensor:
    """Inverse of group_queries for outputs [1, Hkv, G*T, X] -> [T, Hkv, G, X]."""
    hkv, x_dim = x.shape[1], x.shape[-1]
    return x[0].view(hkv, -1, t, x_dim).permute(2, 0, 1, 3)


def few_attention(q: torch.Tensor, kv: LayerKV, plan: PagedPlan | DecodePlan, scale: float) -> torch.Tensor:
    """q [T, Hq, D]: the new tokens of the sequences with few of them (decode tokens, appends),
    back to back -> [T, Hq, D]. Own blocks in place (numba) or gathered (torch), then the cascade."""
    t, hq, d = q.shape
    hkv = kv.k.shape[2]
    # [T, Hkv, G, D] in the dtype the flash kernel computes in, so both routes see the same queries
    qg = (q.float().view(t, hkv, hq // hkv, d) * scale).to(attend_dtype(kv))
    if isinstance(plan, PagedPlan):
        o, lse = numba_paged.paged_attention_rows(qg.float(), kv, plan.paged)
    else:
        o, lse = _attend(qg, *as_heads(*gather_blocks(kv, plan.tables)), plan.bias)
    return with_shared(o, lse, qg.view(t, hq, d), kv, plan.shared).reshape(t, hq, d).to(q.dtype)


def extend_attention(q: torch.Tensor, kv: LayerKV, plan: ExtendPlan, scale: float) -> torch.Tensor:
    """q [T, Hq, D]: the new tokens of the extend sequences, back to back -> [T, Hq, D]."""
    t, hq, d = q.shape
    hkv = kv.k.shape[2]
    qs = q.float() * scale
    outs, lses, start = [], [], 0
    for part in plan.parts:
        k, v = gather_blocks(kv, part.blocks[None])
        k, v = (x.flatten(1, 2)[:, : part.keys].transpose(1, 2) for x in (k, v))  # [1, Hkv, keys, D]
        o, lse = _attend(group_queries(qs[start : start + part.count], hkv), k, v, part.bias)
        outs.append(ungroup(o, part.count))
        lses.append(ungroup(lse, part.count))
        start += part.count
    o = with_shared(torch.cat(outs), torch.cat(lses), qs, kv, plan.shared)  # [T, Hkv, G, D]
    return o.reshape(t, hq, d).to(q.dtype)


class CpuBackend(TorchBackend):
    """Plans each step once (cpu_plan.py); every layer then runs the plan."""

    name = "cpu"

    def __init__(self):
        self._plan_meta: AttentionMetadata | None = None
        self._plan: StepPlan | None = None
        self._slots: torch.Tensor | None = None
        self._slots_direct = False

    def _plan_for(self, meta: AttentionMetadata, kv: LayerKV, group: int) -> StepPlan:
        if meta is not self._plan_meta:  # a new step: every layer after the first reuses the plan
            self._plan_meta = meta
            self._plan = StepPlan.build(meta, kv.block_size, group, numba_paged.supports(kv), attend_dtype(kv))
        return self._plan

    def store_kv(self, k, v, kv: LayerKV, slot_mapping):
        if slot_mapping is not self._slots:  # a new step: check for skipped (-1) slots once, not per layer
            self._slots, self._slots_direct = slot_mapping, not bool((slot_mapping < 0).any())
        if kv.quantized or not self._slots_direct:
            return super().store_kv(k, v, kv, slot_mapping)
        nb, bs = kv.k.shape[:2]
        kv.k.view(nb * bs, *kv.k.shape[2:]).index_copy_(0, slot_mapping, k.to(kv.k.dtype))
        kv.v.view(nb * bs, *kv.v.shape[2:]).index_copy_(0, slot_mapping, v.to(kv.v.dtype))

    def attention(self, q, kv: LayerKV, meta: AttentionMetadata, scale: float):
        plan = self._plan_for(meta, kv, q.shape[1] // kv.k.shape[2])
        groups = [(run, part) for run, part in ((few_attention, plan.few), (extend_attention, plan.extend))
                  if part is not None]
        if not groups:  # a step with no query rows
            return torch.empty_like(q)
        if len(groups) == 1:  # its rows are all the rows of q, in order: no gather, no scatter
            run, part = groups[0]
            return run(q, kv, part, scale)
        out = torch.empty_like(q)
        for run, part in groups:
            out[part.rows] = run(q[part.rows], kv, part, scale)
        return out
