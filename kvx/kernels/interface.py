"""What the model forward hands to an attention backend, and the paged KV pool it works on.

Batch layout ("varlen"): the new tokens of all sequences in one step are flattened into T rows.
Sequence i owns rows query_start_loc[i]:query_start_loc[i+1]; its KV length after this step is
seq_lens[i] (cached prefix + new tokens), so its first new token sits at position
seq_lens[i] - query_len_i and attends causally to everything before it.

KV pool: one tensor [layers, 2, num_blocks, block_size, kv_heads, head_dim] (2 = K, V).
A token's slot is block_id * block_size + offset; slot -1 means "do not store".
With int8 KV the pool is int8 and a float32 scale pool (one scale per token and head) sits beside
it, stored [layers, 2, num_blocks, kv_heads, block_size] so that one head's scales for a block are
contiguous (a decode tile reads them in one transaction, not one 32-byte sector per scale), and
seen by every kernel as [num_blocks, block_size, kv_heads] views through their strides.
"""
from __future__ import annotations

import itertools
import math
import mmap
from dataclasses import dataclass

import numpy as np
import torch


def padded_tables(tables: list[list[int]]) -> torch.Tensor:
    """Block tables as one int32 [seqs, longest] tensor, zero-padded (filled by one numpy scatter:
    3x faster than torch.tensor over padded lists at 256 sequences)."""
    lens = np.fromiter(map(len, tables), np.int64, len(tables))
    flat = np.fromiter(itertools.chain.from_iterable(tables), np.int32, int(lens.sum()))
    out = np.zeros((len(tables), max(1, int(lens.max(initial=0)))), np.int32)
    out[np.arange(out.shape[1])[None, :] < lens[:, None]] = flat
    return torch.from_numpy(out)


@dataclass
class AttentionMetadata:
    query_start_loc: torch.Tensor  # [B+1] int32, cumulative query lengths
    seq_lens: torch.Tensor  # [B] int32, KV length of each sequence after this step
    block_tables: torch.Tensor  # [B, max_blocks] int32, unused entries padded with 0
    slot_mapping: torch.Tensor  # [T] int64, pool slot of each new token (-1 = skip)
    max_query_len: int
    max_seq_len: int
    query_lens_cpu: list[int]  # host copies so python-side backends avoid device syncs
    seq_lens_cpu: list[int]

    @property
    def num_seqs(self) -> int:
        return len(self.seq_lens_cpu)

    @property
    def is_decode_only(self) -> bool:
        return self.max_query_len == 1

    @staticmethod
    def build(
        query_lens: list[int],
        seq_lens: list[int],
        block_tables: list[list[int]] | torch.Tensor,
        slot_mapping: list[int] | torch.Tensor,
        device: torch.device | str = "cpu",
    ) -> "AttentionMetadata":
        """Build from the scheduler's view of one step (the engine's ModelRunner.prepare and tests):
        host lists, or the padded int32 table and int64 slots already made as tensors."""
        table = block_tables if isinstance(block_tables, torch.Tensor) else padded_tables(block_tables)
        slots = torch.as_tensor(slot_mapping, dtype=torch.int64)
        qsl = torch.tensor([0, *itertools.accumulate(query_lens)], dtype=torch.int32)
        return AttentionMetadata(
            query_start_loc=qsl.to(device),
            seq_lens=torch.tensor(seq_lens, dtype=torch.int32, device=device),
            block_tables=table.to(device),
            slot_mapping=slots.to(device),
            max_query_len=max(query_lens, default=0),
            max_seq_len=max(seq_lens, default=0),
            query_lens_cpu=list(query_lens),
            seq_lens_cpu=list(seq_lens),
        )


@dataclass
class LayerKV:
    """One layer's slice of the pool: views, never copies."""

    k: torch.Tensor  # [num_blocks, block_size, kv_heads, head_dim]
    v: torch.Tensor
    k_scale: torch.Tensor | None = None  # [num_blocks, block_size, kv_heads] for int8
    v_scale: torch.Tensor | None = None

    @property
    def block_size(self) -> int:
        return self.k.shape[1]

    @property
    def quantized(self) -> bool:
        return self.k.dtype == torch.int8


def zeroed(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device | str) -> torch.Tensor:
    """A zero tensor. On the host it is an anonymous mapping, which the OS hands out zero-filled and
    commits page by page as it is written: a multi-GiB pool costs nothing to create (torch.zeros
    writes every byte first: 17 s for a 7 GiB pool on a 2-core machine) and resident memory grows
    only with the blocks actually used. Zeros matter: padded key slots read by batched attention
    must hold finite values."""
    if torch.device(device).type != "cpu":
        return torch.zeros(shape, dtype=dtype, device=device)
    count = math.prod(shape)
    buf = mmap.mmap(-1, count * dtype.itemsize)  # the tensor keeps the mapping alive
    return torch.frombuffer(buf, dtype=dtype, count=count).view(shape)


class KVCache:
    """The preallocated pool for all layers."""

    def __init__(
        self,
        num_layers: int,
        num_blocks: int,
        block_size: int,
        num_kv_heads: int,
        head_dim: int,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str = "cpu",
    ):
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.dtype = dtype
        shape = (num_layers, 2, num_blocks, block_size, num_kv_heads, head_dim)
        self.data = zeroed(shape, dtype, device)
        scale_shape = (num_layers, 2, num_blocks, num_kv_heads, block_size)
        self.scale = zeroed(scale_shape, torch.float32, device) if dtype == torch.int8 else None

    @staticmethod
    def bytes_per_block(num_layers: int, block_size: int, num_kv_heads: int, head_dim: int, dtype: torch.dtype) -> int:
        per_token = 2 * num_kv_heads * head_dim * dtype.itemsize
        if dtype == torch.int8:
            per_token += 2 * num_kv_heads * 4  # float32 scales
        return num_layers * block_size * per_token

    def layer(self, i: int) -> LayerKV:
        if self.scale is None:
            return LayerKV(self.data[i, 0], self.data[i, 1])
        return LayerKV(self.data[i, 0], self.data[i, 1], self.scale[i, 0].transpose(1, 2), self.scale[i, 1].transpose(1, 2))

    def copy_blocks(self, pairs: list[tuple[int, int]]) -> None:
        """Copy every layer's K/V (and int8 scales) of block a into block b, for each (a, b)."""
        src = torch.tensor([a for a, _ in pairs], dtype=torch.int64, device=self.data.device)
        dst = torch.tensor([b for _, b in pairs], dtype=torch.int64, device=self.data.device)
        self.data[:, :, dst] = self.data[:, :, src]
        if self.scale is not None:
            self.scale[:, :, dst] = self.scale[:, :, src]

    def nbytes(self) -> int:
        n = self.data.numel() * self.data.element_size()
        if self.scale is not None:
            n += self.scale.numel() * self.scale.element_size()
        return n


class AttentionBackend:
    """Two operations per layer: put this step's K/V into the pool, then attend over the pool."""

    name = "base"

    def store_kv(self, k: torch.Tensor, v: torch.Tensor, kv: LayerKV, slot_mapping: torch.Tensor) -> None:
        """k, v: [T, kv_heads, head_dim]; writes row t to slot slot_mapping[t] (skips -1)."""
        raise NotImplementedError

    def attention(self, q: torch.Tensor, kv: LayerKV, meta: AttentionMetadata, scale: float) -> torch.Tensor:
        """q: [T, q_heads, head_dim] -> [T, q_heads, head_dim], causal over each sequence's pool KV."""
        raise NotImplementedError
