"""CPU attention backend: the torch reference's results, with the rows of a step batched and shared
prefixes read once.

The reference loops over sequences (one SDPA call per sequence and layer, K/V repeated to every
query head), which dominates a CPU step. Here each step is planned once (all layers reuse the plan):
  * decode rows (query length 1) run together: the leading blocks every decoding sequence shares
    (same block ids: a common prompt prefix from the radix cache) are attended as one call over all
    queries; the rest of each sequence's blocks are gathered into a padded batch masked by length;
  * extend rows (prefill chunks, jump-forward appends) use the same cascade: the cached blocks all
    extend rows share, which lie wholly before every new token, are attended without a mask in one
    call over all their queries; each sequence's own tail (its new tokens and what follows the
    shared blocks) is attended causally on its own;
  * the partial softmaxes are merged with their log-sum-exp. Queries are grouped per KV head
    (GQA) instead of copying K/V to every query head.
"""
from __future__ import annotations

import dataclasses

import torch

from kvx.kernels.interface import AttentionMetadata, LayerKV
from kvx.kernels.torch_backend import TorchBackend


def gather_blocks(kv: LayerKV, blocks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """K, V of blocks [...] as float32 [..., block_size, kv_heads, head_dim], dequantised if int8."""
    k, v = kv.k[blocks], kv.v[blocks]
    if kv.quantized:
        return k.float() * kv.k_scale[blocks][..., None], v.float() * kv.v_scale[blocks][..., None]
    return k.float(), v.float()


def as_heads(k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Gathered blocks [..., W, bs, Hkv, D] -> [..., Hkv, W * bs, D] views (the kernel takes strides)."""
    return tuple(t.flatten(-4, -3).transpose(-3, -2) for t in (k, v))


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


def merge(o: torch.Tensor, lse: torch.Tensor, o2: torch.Tensor, lse2: torch.Tensor) -> torch.Tensor:
    """Combine two softmax-normalised partial attentions over disjoint key sets."""
    mx = torch.maximum(lse, lse2)
    w, w2 = torch.exp(lse - mx), torch.exp(lse2 - mx)
    return (o * w + o2 * w2) / (w + w2)


def with_shared(o: torch.Tensor, lse: torch.Tensor, qs: torch.Tensor, kv: LayerKV, shared: torch.Tensor | None):
    """Fold attention over the shared blocks into the partial (o, lse) [T, Hkv, G, *] of the rows'
    own keys: every query of qs [T, Hq, D] (pre-scaled) attends those blocks in one call."""
    if shared is None:
        return o
    t, hkv = qs.shape[0], kv.k.shape[2]
    kc, vc = as_heads(*gather_blocks(kv, shared[None]))  # [1, Hkv, Lc, D]
    o2, lse2 = _attend(group_queries(qs, hkv), kc, vc, None)
    return merge(o, lse, ungroup(o2, t), ungroup(lse2, t))


def shared_prefix_blocks(tables: torch.Tensor, outside: list[int], block_size: int) -> int:
    """Leading block columns identical in every row, ending at or before each row's outside[i]
    (decode: its last token, which must stay in the row's own part; extend: its first new token)."""
    if tables.shape[0] == 0:
        return 0
    same = (tables == tables[:1]).all(dim=0).int().cumprod(0)
    return min(int(same.sum()), min(outside) // block_size)


def group_queries(q: torch.Tensor, hkv: int) -> torch.Tensor:
    """q [T, Hq, D] -> [1, Hkv, G*T, D], row g*T + t: every query a KV head serves, in one batch row."""
    t, hq, d = q.shape
    return q.view(t, hkv, hq // hkv, d).permute(1, 2, 0, 3).reshape(1, hkv, -1, d)


def ungroup(x: torch.Tensor, t: int) -> torch.Tensor:
    """Inverse of group_queries for outputs [1, Hkv, G*T, X] -> [T, Hkv, G, X]."""
    hkv, x_dim = x.shape[1], x.shape[-1]
    return x[0].view(hkv, -1, t, x_dim).permute(2, 0, 1, 3)


@dataclasses.dataclass
class DecodePlan:
    rows: torch.Tensor  # rows of q that are decode queries
    tables: torch.Tensor  # [B, width] block ids past the shared prefix
    bias: torch.Tensor  # [B, 1, 1, width * block_size]: 0 for key positions inside each sequence, -inf past it
    shared: torch.Tensor | None  # [c] block ids every decoding sequence shares (None if c == 0)

    @staticmethod
    def build(meta: AttentionMetadata, seqs: list[int], starts: list[int], block_size: int) -> "DecodePlan":
        tables = meta.block_tables[torch.tensor(seqs)]
        lens = [meta.seq_lens_cpu[i] for i in seqs]
        # a lone decode row gains nothing from splitting its keys in two (an extend row does: its
        # cached part then needs no causal mask)
        c = shared_prefix_blocks(tables, [n - 1 for n in lens], block_size) if len(seqs) > 1 else 0
        width = (max(lens) + block_size - 1) // block_size - c
        past_end = torch.arange(width * block_size)[None, :] >= (torch.tensor(lens) - c * block_size)[:, None]
        bias = torch.zeros(past_end.shape).masked_fill_(past_end, float("-inf"))[:, None, None, :]
        shared = tables[0, :c].long() if c else None
        rows = torch.tensor([starts[i] for i in seqs])
        return DecodePlan(rows, tables[:, c : c + width].long(), bias, shared)


@dataclasses.dataclass
class ExtendPart:
    """One extend sequence's own part: its blocks past the shared ones and its causal bias."""

    count: int  # its query rows
    blocks: torch.Tensor  # [w] block ids
    keys: int  # key positions used in those blocks
    bias: torch.Tensor  # [1, 1, G * count, keys]: query j (row g*count + j) sees own keys up to its position


@dataclasses.dataclass
class ExtendPlan:
    rows: torch.Tensor  # rows of q that are extend queries, sequence by sequence
    shared: torch.Tensor | None  # [c] block ids every extend sequence has cached before its new tokens
    parts: list[ExtendPart]

    @staticmethod
    def build(meta: AttentionMetadata, seqs: list[int], starts: list[int], block_size: int, group: int) -> "ExtendPlan":
        tables = meta.block_tables[torch.tensor(seqs)]
        qlens = [meta.query_lens_cpu[i] for i in seqs]
        lens = [meta.seq_lens_cpu[i] for i in seqs]
        c = shared_prefix_blocks(tables, [n - q for n, q in zip(lens, qlens)], block_size)
        parts = []
        for row, n, seq_len in zip(tables, qlens, lens):
            keys = seq_len - c * block_size
            qpos = torch.arange(keys - n, keys)[:, None]  # own-part coordinates
            bias = torch.zeros(n, keys).masked_fill_(torch.arange(keys)[None, :] > qpos, float("-inf"))
            blocks = row[c : c + (keys + block_size - 1) // block_size].long()
            parts.append(ExtendPart(n, blocks, keys, bias.repeat(group, 1)[None, None]))
        rows = torch.cat([torch.arange(starts[i], starts[i] + n) for i, n in zip(seqs, qlens)])
        return ExtendPlan(rows, tables[0, :c].long() if c else None, parts)


@dataclasses.dataclass
class StepPlan:
    """What the attention of one step needs from the metadata alone: built once per step (the first
    layer) instead of once per layer."""

    decode: DecodePlan | None
    extend: ExtendPlan | None

    @staticmethod
    def build(meta: AttentionMetadata, block_size: int, group: int) -> "StepPlan":
        starts = meta.query_start_loc[:-1].tolist()
        decode = [i for i, n in enumerate(meta.query_lens_cpu) if n == 1]
        extend = [i for i, n in enumerate(meta.query_lens_cpu) if n > 1]
        return StepPlan(DecodePlan.build(meta, decode, starts, block_size) if decode else None,
                        ExtendPlan.build(meta, extend, starts, block_size, group) if extend else None)


def decode_attention(q: torch.Tensor, kv: LayerKV, plan: DecodePlan, scale: float) -> torch.Tensor:
    """q [B, Hq, D] (one query per sequence, at its last position) -> [B, Hq, D]."""
    b, hq, d = q.shape
    hkv = kv.k.shape[2]
    qg = q.float().view(b, hkv, hq // hkv, d) * scale  # [B, Hkv, G, D]
    o, lse = _attend(qg, *as_heads(*gather_blocks(kv, plan.tables)), plan.bias)
    return with_shared(o, lse, qg.view(b, hq, d), kv, plan.shared).reshape(b, hq, d).to(q.dtype)


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
    name = "cpu"

    def __init__(self):
        self._plan_meta: AttentionMetadata | None = None
        self._plan: StepPlan | None = None
        self._slots: torch.Tensor | None = None
        self._slots_direct = False

    def _plan_for(self, meta: AttentionMetadata, block_size: int, group: int) -> StepPlan:
        if meta is not self._plan_meta:  # a new step: every layer after the first reuses the plan
            self._plan_meta, self._plan = meta, StepPlan.build(meta, block_size, group)
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
        plan = self._plan_for(meta, kv.block_size, q.shape[1] // kv.k.shape[2])
        if plan.decode is None and plan.extend is None:  # a step with no query rows
            return torch.empty_like(q)
        if plan.extend is None:  # one kind of row: its rows are all of q, in order (no gather, no scatter)
            return decode_attention(q, kv, plan.decode, scale)
        if plan.decode is None:
            return extend_attention(q, kv, plan.extend, scale)
        out = torch.empty_like(q)
        out[plan.decode.rows] = decode_attention(q[plan.decode.rows], kv, plan.decode, scale)
        out[plan.extend.rows] = extend_attention(q[plan.extend.rows], kv, plan.extend, scale)
        return out
