"""The KV pool's blocks: how many there are, which are free, and who holds each one.

A block is in one of three states: free (on the free list), held (ref count > 0: some running
sequence's block table lists it) or cached (ref count 0 but kept by the radix cache for reuse;
evicted on demand when the free list runs short). The ref counts and the free list live here
only: the cache learns of ref-count changes through the `BlockCache` hook and hands evicted
blocks back through `reclaim`.
"""
from __future__ import annotations

import os
from typing import Protocol

import torch

from kvx.kernels.interface import KVCache
from kvx.errors import CapacityError


class BlockCache(Protocol):
    """What the pool asks of a cache that keeps idle blocks for reuse (kvx/engine/radix_cache.py)."""

    num_idle: int  # blocks the cache keeps whose ref count is 0 (reclaimable)

    @property
    def num_blocks(self) -> int: ...  # blocks the cache keeps, held or idle

    def holds(self, block: int) -> bool: ...

    def on_idle(self, block: int) -> None: ...  # a kept block's ref count fell to 0

    def on_held(self, block: int) -> None: ...  # a kept idle block is in use again

    def evict(self, n: int) -> int: ...  # reclaim up to n idle blocks; returns how many


def format_bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return f"{n}B"


def available_memory(device: torch.device) -> int:
    """Bytes the pool may come out of: free device memory on CUDA, MemAvailable on the host."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")


def check_pool_fits(kv_memory: int, device: torch.device) -> None:
    """CapacityError if a pool of `kv_memory` bytes cannot come out of the free memory (it would be
    killed for memory, or fail to map, later)."""
    free = available_memory(device)
    if kv_memory > free:
        raise CapacityError(f"{{option}} {format_bytes(kv_memory)} is more than the free memory "
                            f"({format_bytes(free)} on {device.type}); ask for less", option="kv_memory")


def pool_num_blocks(
    kv_memory: int | None,
    kv_memory_fraction: float,
    bytes_per_block: int,
    device: torch.device,
) -> int:
    """Blocks that fit in kv_memory bytes (or the fraction of free memory); CapacityError if none."""
    if kv_memory is not None:
        check_pool_fits(kv_memory, device)
        budget, what = kv_memory, f"{{option}} {format_bytes(kv_memory)}"
    else:
        budget = int(available_memory(device) * kv_memory_fraction)
        what = f"{kv_memory_fraction:.0%} of free memory ({format_bytes(budget)})"
    n = budget // bytes_per_block
    if n < 1:
        raise CapacityError(
            f"{what} holds no KV block (one block takes {format_bytes(bytes_per_block)}); raise {{option}}",
            option="kv_memory",
        )
    return n


class BlockManager:
    def __init__(self, num_blocks: int, block_size: int):
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.ref = [0] * num_blocks
        self.free: list[int] = list(range(num_blocks - 1, -1, -1))  # pop() hands out low ids first
        self.cache: BlockCache | None = None  # set by RadixCache when prefix caching is on

    @classmethod
    def for_model(cls, config, model_cfg, kv_dtype: torch.dtype, device: torch.device) -> tuple["BlockManager", int]:
        """Size the pool from an EngineConfig and a ModelConfig; returns (manager, bytes per block)."""
        bpb = KVCache.bytes_per_block(
            model_cfg.num_layers, config.block_size, model_cfg.num_kv_heads, model_cfg.head_dim, kv_dtype
        )
        n = pool_num_blocks(config.kv_memory, config.kv_memory_fraction, bpb, device)
        return cls(n, config.block_size), bpb

    # --- counts ------------------------------------------------------------------------------
    @property
    def num_free(self) -> int:
        return len(self.free)

    @property
    def num_cached_idle(self) -> int:
        """Blocks only the radix cache holds (reclaimable by eviction)."""
        return self.cache.num_idle if self.cache is not None else 0

    @property
    def num_held(self) -> int:
        return self.num_blocks - self.num_free - self.num_cached_idle

    def can_allocate(self, n: int) -> bool:
        return n <= self.num_free + self.num_cached_idle

    # --- operations --------------------------------------------------------------------------
    def allocate(self, n: int) -> list[int] | None:
        """n fresh blocks with ref count 1, evicting idle cached blocks if needed; None if impossible."""
        if n > len(self.free) and self.cache is not None:
            self.cache.evict(n - len(self.free))
        if n > len(self.free):
            return None
        blocks = [self.free.pop() for _ in range(n)]
        for b in blocks:
            self.ref[b] = 1
        return blocks

    def incref(self, block: int) -> None:
        if self.ref[block] == 0 and self.cache is not None:
            self.cache.on_held(block)
        self.ref[block] += 1

    def decref(self, block: int) -> None:
        self.ref[block] -= 1
        assert self.ref[block] >= 0, f"block {block} released twice"
        if self.ref[block] == 0:
            if self.cache is not None and self.cache.holds(block):
                self.cache.on_idle(block)
            else:
                self.free.append(block)

    def is_idle(self, block: int) -> bool:
        return self.ref[block] == 0

    def reclaim(self, block: int) -> None:
        """A cached idle block the cache evicted goes back on the free list."""
        assert self.ref[block] == 0, f"block {block} evicted while held"
        self.free.append(block)

    def release(self, blocks: list[int]) -> None:
        # Reverse order: a table's tail blocks become idle (and LRU-evictable) before its head.
        for b in reversed(blocks):
            self.decref(b)

    def leaks(self) -> list[str]:
        """Problems with the pool when no sequence runs: held blocks, blocks neither free nor cached."""
        problems = [f"block {b} still has ref count {r}" for b, r in enumerate(self.ref) if r]
        cached = self.cache.num_blocks if self.cache is not None else 0
        if len(set(self.free)) != len(self.free):
            problems.append("free list holds duplicates")
        if len(self.free) + cached != self.num_blocks:
            problems.append(f"{self.num_blocks - len(self.free) - cached} blocks are neither free nor cached")
        return problems
