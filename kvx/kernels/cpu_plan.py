"""The CPU backend's plan of one step, made from the metadata alone once per step (the first
layer) and reused by every layer: which sequences have few new tokens and which long chunks, the
blocks each group shares, and for each sequence's own blocks either the inputs of the in-place
numba kernel (`PagedRows`) or the masks of the gathered torch route."""
from __future__ import annotations

import dataclasses

import torch

from kvx.kernels.interface import AttentionMetadata
from kvx.kernels.numba_paged import PagedRows

# sequences with at most this many new tokens (decode, jump-forward appends, short chunks) go to the
# numba kernel; longer chunks keep the flash kernel, whose tiles they fill
FEW_QUERIES = 16


def shared_blocks(table_row: torch.Tensor, c: int) -> torch.Tensor | slice | None:
    """The first c block ids of a table row; a slice when they are consecutive (the usual case: a
    prompt's blocks come off the free list in order), so the cascade reads a view of the pool
    instead of gathering a copy every layer."""
    if not c:
        return None
    ids = table_row[:c].long()
    if bool((ids.diff() == 1).all()):
        return slice(int(ids[0]), int(ids[0]) + c)
    return ids


def shared_prefix_blocks(tables: torch.Tensor, outside: list[int], block_size: int) -> int:
    """Leading block columns identical in every row, ending at or before each row's outside[i]
    (decode: its last token, which must stay in the row's own part; extend: its first new token)."""
    if tables.shape[0] == 0:
        return 0
    same = (tables == tables[:1]).all(dim=0).int().cumprod(0)
    return min(int(same.sum()), min(outside) // block_size)


@dataclasses.dataclass
class PagedPlan:
    """numba route: the sequences with at most FEW_QUERIES new tokens (decode tokens, jump-forward
    appends); every row reads its own blocks in place, the blocks all of them share are one cascade."""

    rows: torch.Tensor  # their rows of q, sequence by sequence
    paged: PagedRows  # over the blocks past the shared ones
    shared: torch.Tensor | slice | None  # [c] block ids every one of them has cached before its new tokens

    @staticmethod
    def build(meta: AttentionMetadata, seqs: list[int], starts: list[int], block_size: int) -> "PagedPlan":
        tables = meta.block_tables[torch.tensor(seqs)]
        qlens = [meta.query_lens_cpu[i] for i in seqs]
        lens = [meta.seq_lens_cpu[i] for i in seqs]
        # a lone sequence gains nothing from splitting its keys in two
        c = shared_prefix_blocks(tables, [n - q for n, q in zip(lens, qlens)], block_size) if len(seqs) > 1 else 0
        width = (max(lens) + block_size - 1) // block_size - c
        counts = torch.tensor(qlens)
        seq = torch.repeat_interleave(torch.arange(len(seqs)), counts)  # each row's sequence
        j = torch.arange(len(seq)) - torch.repeat_interleave(counts.cumsum(0) - counts, counts)  # its index there
        own = torch.tensor(lens) - c * block_size  # query j sees its own-part keys up to its position
        keys = own[seq] - counts[seq] + j + 1
        rows = torch.tensor([starts[i] for i in seqs])[seq] + j
        paged = PagedRows(tables[:, c : c + width].long(), seq, keys)
        return PagedPlan(rows, paged, shared_blocks(tables[0], c))


@dataclasses.dataclass
class DecodePlan:
    """torch route: decode rows, their own blocks gathered into a padded batch masked by length."""

    rows: torch.Tensor  # rows of q that are decode queries
    tables: torch.Tensor  # [B, width] block ids past the shared prefix
    bias: torch.Tensor  # [B, 1, 1, width * block_size]: 0 for key positions inside each sequence, -inf past it
    shared: torch.Tensor | slice | None  # [c] block ids every decoding sequence shares (None if c == 0)

    @staticmethod
    def build(meta: AttentionMetadata, seqs: list[int], starts: list[int], block_size: int,
              bias_dtype: torch.dtype) -> "DecodePlan":
        tables = meta.block_tables[torch.tensor(seqs)]
        lens = [meta.seq_lens_cpu[i] for i in seqs]
        # a lone decode row gains nothing from splitting its keys in two (an extend row does: its
        # cached part then needs no causal mask)
        c = shared_prefix_blocks(tables, [n - 1 for n in lens], block_size) if len(seqs) > 1 else 0
        width = (max(lens) + block_size - 1) // block_size - c
        past_end = torch.arange(width * block_size)[None, :] >= (torch.tensor(lens) - c * block_size)[:, None]
        bias = torch.zeros(past_end.shape, dtype=bias_dtype).masked_fill_(past_end, float("-inf"))[:, None, None, :]
        shared = shared_blocks(tables[0], c)
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
    """Flash route: extend sequences one at a time over their own blocks, plus the shared cascade."""

    rows: torch.Tensor  # rows of q that are extend queries, sequence by sequence
    shared: torch.Tensor | slice | None  # [c] block ids every extend sequence has cached before its new tokens
    parts: list[ExtendPart]

    @staticmethod
    def build(meta: AttentionMetadata, seqs: list[int], starts: list[int], block_size: int, group: int,
              bias_dtype: torch.dtype) -> "ExtendPlan":
        tables = meta.block_tables[torch.tensor(seqs)]
        qlens = [meta.query_lens_cpu[i] for i in seqs]
        lens = [meta.seq_lens_cpu[i] for i in seqs]
        c = shared_prefix_blocks(tables, [n - q for n, q in zip(lens, qlens)], block_size)
        parts = []
        for row, n, seq_len in zip(tables, qlens, lens):
            keys = seq_len - c * block_size
            qpos = torch.arange(keys - n, keys)[:, None]  # own-part coordinates
            bias = torch.zeros(n, keys, dtype=bias_dtype).masked_fill_(torch.arange(keys)[None, :] > qpos, float("-inf"))
            blocks = row[c : c + (keys + block_size - 1) // block_size].long()
            parts.append(ExtendPart(n, blocks, keys, bias.repeat(group, 1)[None, None]))
        rows = torch.cat([torch.arange(starts[i], starts[i] + n) for i, n in zip(seqs, qlens)])
        return ExtendPlan(rows, shared_blocks(tables[0], c), parts)


@dataclasses.dataclass
class StepPlan:
    """The step's sequences in (at most) two groups: those with few new tokens (with numba a
    PagedPlan, up to FEW_QUERIES of them; without, a DecodePlan of the one-token rows) and the
    longer chunks (ExtendPlan)."""

    few: PagedPlan | DecodePlan | None
    extend: ExtendPlan | None

    @staticmethod
    def build(meta: AttentionMetadata, block_size: int, group: int, paged: bool, bias_dtype: torch.dtype) -> "StepPlan":
        """paged: the numba kernel can read this pool (numba_paged.supports); bias_dtype: what the
        attention computes in, so the masks are made in it once per step, not cast every layer."""
        starts = meta.query_start_loc[:-1].tolist()
        limit = FEW_QUERIES if paged else 1
        short = [i for i, n in enumerate(meta.query_lens_cpu) if 0 < n <= limit]
        long = [i for i, n in enumerate(meta.query_lens_cpu) if n > limit]
        few = None
        if short:
            few = (PagedPlan.build(meta, short, starts, block_size) if paged
                   else DecodePlan.build(meta, short, starts, block_size, bias_dtype))
        return StepPlan(few, ExtendPlan.build(meta, long, starts, block_size, group, bias_dtype) if long else None)
