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


_FLASH = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor | None):
    """softmax(q k^T + bias) v and its log-sum-exp. q [B, H, n, D] (pre-scaled), k/v [B, H, L, D].

    torch's fused CPU flash kernel returns the LSE the cascade merge needs (about 2x faster than
    the matmul/softmax chain here); the chain remains for torch builds without it."""
    if _FLASH is not None:
        mask = None if bias is None else bias.expand(q.shape[0], 1, q.shape[2], k.shape[2])
        o, lse = _FLASH(q, k, v, 0.0, False, attn_mask=mask, scale=1.0)
        return o, lse.unsqueeze(-1)
    s = q @ k.transpose(-1, -2)
    if bias is not None:
        s = s + bias
    lse = torch.logsumexp(s, dim=-1, keepdim=True)
    return torch.exp(s - lse) @ v, lse


def shared_prefix_blocks(tables: torch.Tensor, seq_lens: list[int], block_size: int) -> int:
    """Leading block columns identical in every row, leaving each sequence >= 1 token outside them."""
    if tables.shape[0] < 2:
        return 0
    same = (tables == tables[:1]).all(dim=0).int().cumprod(0)
    return min(int(same.sum()), (min(seq_lens) - 1) // block_size)


@dataclasses.dataclass
class StepPlan:
    """What the attention of one step needs from the metadata alone: the same for all layers, so it
    is built once per step (the first layer) instead of once per layer."""

    decode_rows: torch.Tensor | None  # rows of q that are decode queries (None: use the reference)
    decode_tables: torch.Tensor | None  # [B, width] block ids past the shared prefix
    bias: torch.Tensor | None  # [B, 1, 1, width * block_size] 0 for key positions inside each sequence, -inf past it
    shared: torch.Tensor | None  # [c] block ids every decoding sequence shares (None if c == 0)
    ext_rows: torch.Tensor | None  # rows of extend queries
    ext_meta: AttentionMetadata | None  # the metadata with decode rows masked out

    @staticmethod
    def build(meta: AttentionMetadata, block_size: int) -> "StepPlan":
        qlens = meta.query_lens_cpu
        decode = [i for i, n in enumerate(qlens) if n == 1]
        if len(decode) < 2:
            return StepPlan(None, None, None, None, None, None)
        starts = meta.query_start_loc[:-1]
        ext_rows = ext_meta = None
        if len(decode) < len(qlens):  # extend rows: the reference path, decode rows masked out of it
            ext_lens = [0 if n == 1 else n for n in qlens]
            ext_rows = torch.cat([torch.arange(int(starts[i]), int(starts[i]) + n) for i, n in enumerate(qlens) if n > 1])
            ext_meta = dataclasses.replace(meta, query_lens_cpu=ext_lens, max_query_len=max(ext_lens))
        idx = torch.tensor(decode)
        tables = meta.block_tables[idx]
        lens = [meta.seq_lens_cpu[i] for i in decode]
        c = shared_prefix_blocks(tables, lens, block_size)
        width = (max(lens) + block_size - 1) // block_size - c
        past_end = torch.arange(width * block_size)[None, :] >= (torch.tensor(lens) - c * block_size)[:, None]
        bias = torch.zeros(past_end.shape).masked_fill_(past_end, float("-inf"))[:, None, None, :]
        shared = tables[0, :c].long() if c else None
        return StepPlan(starts[idx].long(), tables[:, c : c + width].long(), bias, shared, ext_rows, ext_meta)


def decode_attention(q: torch.Tensor, kv: LayerKV, plan: StepPlan, scale: float) -> torch.Tensor:
    """q [B, Hq, D] (one query per sequence, at its last position) -> [B, Hq, D]."""
    b, hq, d = q.shape
    hkv = kv.k.shape[2]
    g = hq // hkv
    qg = q.float().view(b, hkv, g, d) * scale  # [B, Hkv, G, D]
    ks, vs = gather_blocks(kv, plan.decode_tables)  # [B, W, bs, Hkv, D]
    ks = ks.flatten(1, 2).permute(0, 2, 1, 3)  # [B, Hkv, L, D]
    vs = vs.flatten(1, 2).permute(0, 2, 1, 3)
    o, lse = _attend(qg, ks, vs, plan.bias)
    if plan.shared is not None:
        kc, vc = gather_blocks(kv, plan.shared)  # [c, bs, Hkv, D]
        kc = kc.flatten(0, 1).permute(1, 0, 2)[None]  # [1, Hkv, Lc, D]
        vc = vc.flatten(0, 1).permute(1, 0, 2)[None]
        qc = qg.permute(1, 0, 2, 3).reshape(1, hkv, b * g, d)  # every query of a kv head in one call
        o2, lse2 = _attend(qc, kc, vc, None)
        o2, lse2 = (t[0].view(hkv, b, g, -1).permute(1, 0, 2, 3) for t in (o2, lse2))
        mx = torch.maximum(lse, lse2)
        w, w2 = torch.exp(lse - mx), torch.exp(lse2 - mx)
        o = (o * w + o2 * w2) / (w + w2)
    return o.reshape(b, hq, d).to(q.dtype)


class CpuBackend(TorchBackend):
    name = "cpu"

    def __init__(self):
        self._plan_meta: AttentionMetadata | None = None
        self._plan: StepPlan | None = None
        self._slots: torch.Tensor | None = None
        self._slots_direct = False

    def _plan_for(self, meta: AttentionMetadata, block_size: int) -> StepPlan:
        if meta is not self._plan_meta:  # a new step: every layer after the first reuses the plan
            self._plan_meta, self._plan = meta, StepPlan.build(meta, block_size)
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
        plan = self._plan_for(meta, kv.block_size)
        if plan.decode_rows is None:
            return paged_attention_ref(q, kv, meta, scale)
        out = torch.empty_like(q)
        if plan.ext_rows is not None:
            out[plan.ext_rows] = paged_attention_ref(q[plan.ext_rows], kv, plan.ext_meta, scale)
        out[plan.decode_rows] = decode_attention(q[plan.decode_rows], kv, plan, scale)
        return out
