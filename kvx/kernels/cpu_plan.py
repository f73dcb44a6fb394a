"""The CPU backend's plan of one step, made from the metadata alone once per step (the first
layer) and reused by every layer: which query rows are decode and extend rows, the blocks their
sequences share, and for each sequence's own blocks either the inputs of the in-place numba kernel
(`PagedRows`) or the masks of the gathered torch route."""
from __future__ import annotations

import dataclasses

import torch

from kvx.kernels.interface import AttentionMetadata
from kvx.kernels.numba_paged import PagedRows

# extend sequences with at most this many new tokens (jump-forward appends, short chunks) go to the
# numba kernel with the decode rows; longer chunks keep the flash kernel, whose tiles they fill
FEW_QUERIES = 16


def shared_prefix_blocks(tables: torch.Tensor, outside: list[int], block_size: int) -> int:
    """Leading block columns identical in every row, ending at or before each row's outside[i]
    (decode: its last token, which must stay in the row's own part; extend: its first new token)."""
    if tables.shape[0] == 0:
        return 0
    same = (tables == tables[:1]).all(dim=0).int().cumprod(0)
    return min(int(same.sum()), min(outside) // block_size)


def length_bias(keys: torch.Tensor, width: int) -> torch.Tensor:
    """[B, 1, 1, width]: 0 for the first keys[b] positions of row b, -inf past them."""
    past_end = torch.arange(width)[None, :] >= keys[:, None]
    return torch.zeros(past_end.shape).masked_fill_(past_end, float("-inf"))[:, None, None, :]


@dataclasses.dataclass
class DecodePlan:
    rows: torch.Tensor  # rows of q that are decode queries
    tables: torch.Tensor  # [B, width] block ids past the shared prefix
    own: torch.Tensor  # [B] key positions each sequence has in those blocks
    bias: torch.Tensor | None  # torch route: length_bias of own over the gathered width
    shared: torch.Tensor | None  # [c] block ids every decoding sequence shares (None if c == 0)

    @property
    def paged(self) -> PagedRows:
        return PagedRows(self.tables, torch.arange(len(self.own)), self.own)

    @staticmethod
    def build(meta: AttentionMetadata, seqs: list[int], starts: list[int], block_size: int, paged: bool) -> "DecodePlan":
        tables = meta.block_tables[torch.tensor(seqs)]
        lens = [meta.seq_lens_cpu[i] for i in seqs]
        # a lone decode row gains nothing from splitting its keys in two (an extend row does: its
        # cached part then needs no causal mask)
        c = shared_prefix_blocks(tables, [n - 1 for n in lens], block_size) if len(seqs) > 1 else 0
        width = (max(lens) + block_size - 1) // block_size - c
        own = torch.tensor(lens) - c * block_size
        bias = None if paged else length_bias(own, width * block_size)
        shared = tables[0, :c].long() if c else None
        rows = torch.tensor([starts[i] for i in seqs])
        return DecodePlan(rows, tables[:, c : c + width].long(), own, bias, shared)


@dataclasses.dataclass
class ExtendPart:
    """One extend sequence's own part, for the flash route: its blocks past the shared ones."""

    start: int  # its first row among the extend rows
    count: int  # its query rows
    blocks: torch.Tensor  # [w] block ids
    keys: int  # key positions used in those blocks
    bias: torch.Tensor  # [1, 1, G * count, keys]: query j (row g*count + j) sees own keys up to its position


@dataclasses.dataclass
class ExtendPlan:
    rows: torch.Tensor  # rows of q that are extend queries, sequence by sequence
    shared: torch.Tensor | None  # [c] block ids every extend sequence has cached before its new tokens
    parts: list[ExtendPart]  # the flash route's sequences
    few_rows: torch.Tensor | None  # extend rows (among rows) of the numba kernel's sequences
    few: PagedRows | None

    @staticmethod
    def build(meta: AttentionMetadata, seqs: list[int], starts: list[int], block_size: int, group: int,
              paged: bool) -> "ExtendPlan":
        tables = meta.block_tables[torch.tensor(seqs)]
        qlens = [meta.query_lens_cpu[i] for i in seqs]
        lens = [meta.seq_lens_cpu[i] for i in seqs]
        c = shared_prefix_blocks(tables, [n - q for n, q in zip(lens, qlens)], block_size)
        parts, few_rows, few_tables, few_seq, few_keys, start = [], [], [], [], [], 0
        for row, n, seq_len in zip(tables, qlens, lens):
            keys = seq_len - c * block_size
            blocks = row[c : c + (keys + block_size - 1) // block_size].long()
            if paged and n <= FEW_QUERIES:  # query j sees its own-part keys up to its position
                few_rows.append(torch.arange(start, start + n))
                few_keys.append(torch.arange(keys - n + 1, keys + 1))
                few_seq.append(torch.full((n,), len(few_tables)))
                few_tables.append(row[c:].long())
            else:
                qpos = torch.arange(keys - n, keys)[:, None]  # own-part coordinates
                bias = torch.zeros(n, keys).masked_fill_(torch.arange(keys)[None, :] > qpos, float("-inf"))
                parts.append(ExtendPart(start, n, blocks, keys, bias.repeat(group, 1)[None, None]))
            start += n
        rows = torch.cat([torch.arange(starts[i], starts[i] + n) for i, n in zip(seqs, qlens)])
        few = PagedRows(torch.stack(few_tables), torch.cat(few_seq), torch.cat(few_keys)) if few_rows else None
        return ExtendPlan(rows, tables[0, :c].long() if c else None, parts,
                          torch.cat(few_rows) if few_rows else None, few)


@dataclasses.dataclass
class StepPlan:
    decode: DecodePlan | None
    extend: ExtendPlan | None

    @staticmethod
    def build(meta: AttentionMetadata, block_size: int, group: int, paged: bool) -> "StepPlan":
        """paged: the numba kernel can read this pool (numba_paged.supports)."""
        starts = meta.query_start_loc[:-1].tolist()
        decode = [i for i, n in enumerate(meta.query_lens_cpu) if n == 1]
        extend = [i for i, n in enumerate(meta.query_lens_cpu) if n > 1]
        return StepPlan(DecodePlan.build(meta, decode, starts, block_size, paged) if decode else None,
                        ExtendPlan.build(meta, extend, starts, block_size, group, paged) if extend else None)
