"""Decode steps replayed from CUDA graphs.

A decode step of a 1B model launches ~400 kernels. On an H200 its eager forward took 11.3 ms at
batch 256, almost all of it Python and launch overhead (the step's memory traffic takes ~2 ms), so
decode steps are captured once and replayed in one launch each. One graph per batch-size bucket is
captured at start-up (largest first, one shared memory pool); a step of n sequences replays the
smallest bucket >= n, its inputs copied into the static buffers the graph reads. Padding rows are
inert: query length 0 (the decode kernel skips them) and slot -1 (nothing is stored).

What a graph fixes at capture: the batch size, the decode kernel's split count (chosen for the
longest context, max_model_len; the kernel derives each split's range from the real length, so it
stays exact) and the rope table (built up to max_model_len by the warm-up run before capture).
Steps with a multi-token query (prefill chunks, jump-forward appends, drafts) run eagerly.
"""
from __future__ import annotations

import bisect
import warnings
from typing import Callable

import torch

from kvx.kernels.interface import AttentionMetadata, KVCache

Replay = Callable[[], None]
# capture(fn) -> (replay, fn's output): replay() re-runs what fn launched, writing the same output
Capture = Callable[[Callable[[], torch.Tensor]], tuple[Replay, torch.Tensor]]


def cuda_graph_capture(device: torch.device) -> Capture:
    """Capture into torch.cuda.CUDAGraph objects sharing one memory pool."""
    pool = torch.cuda.graph_pool_handle()

    def capture(fn: Callable[[], torch.Tensor]) -> tuple[Replay, torch.Tensor]:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.device(device), torch.cuda.graph(graph, pool=pool):
            out = fn()
        return graph.replay, out

    return capture


def batch_buckets(max_batch: int) -> list[int]:
    """1, 2, 4, then steps of 8 up to 64, of 16 up to 128 and of 32 beyond: a step pads by a third at most."""
    sizes = [1, 2, 4] + list(range(8, 64, 8)) + list(range(64, 128, 16)) + list(range(128, max_batch + 32, 32))
    return sorted({s for s in sizes if s < max_batch} | {max_batch})


class DecodeGraphs:
    """Static inputs + one captured forward per bucket; `run` replays the one a step fits."""

    def __init__(self, model: torch.nn.Module, kv_cache: KVCache, device: torch.device, max_batch: int,
                 max_model_len: int, capture: Capture):
        self.buckets = batch_buckets(max_batch)
        big = self.buckets[-1]
        width = -(-max_model_len // kv_cache.block_size)
        z = dict(device=device)
        self.input_ids = torch.zeros(big, dtype=torch.int64, **z)
        self.positions = torch.zeros(big, dtype=torch.int64, **z)
        self.slots = torch.full((big,), -1, dtype=torch.int64, **z)
        self.query_start = torch.arange(big + 1, dtype=torch.int32, **z)
        self.seq_lens = torch.ones(big, dtype=torch.int32, **z)
        self.block_tables = torch.zeros((big, width), dtype=torch.int32, **z)
        self.rows = torch.arange(big, dtype=torch.int64, **z)
        self.outputs: dict[int, torch.Tensor] = {}
        self.replays: dict[int, Replay] = {}
        self.replayed = 0  # decode steps served by a graph (for the benchmarks)
        for bs in reversed(self.buckets):
            meta = AttentionMetadata(
                query_start_loc=self.query_start[: bs + 1], seq_lens=self.seq_lens[:bs],
                block_tables=self.block_tables[:bs], slot_mapping=self.slots[:bs], max_query_len=1,
                max_seq_len=max_model_len, query_lens_cpu=[1] * bs, seq_lens_cpu=[max_model_len] * bs,
            )

            def forward(bs=bs, meta=meta) -> torch.Tensor:
                return model(self.input_ids[:bs], self.positions[:bs], meta, kv_cache, self.rows[:bs])

            forward()  # warm-up: compiles the kernels, grows the rope table; slots are -1, the pool is untouched
            self.replays[bs], self.outputs[bs] = capture(forward)

    def fits(self, query_lens: list[int]) -> bool:
        """A decode step (one new token per sequence) no larger than the biggest bucket."""
        return len(query_lens) <= self.buckets[-1] and all(n == 1 for n in query_lens)

    def run(self, input_ids: torch.Tensor, positions: torch.Tensor, meta: AttentionMetadata,
            logits_rows: torch.Tensor) -> torch.Tensor:
        """A decode step's logits rows (same contract as the model's forward); inputs on any device."""
        n = meta.num_seqs
        bs = self.buckets[bisect.bisect_left(self.buckets, n)]
        width = meta.block_tables.shape[1]
        self.input_ids[:n].copy_(input_ids, non_blocking=True)
        self.positions[:n].copy_(positions, non_blocking=True)
        self.slots[:n].copy_(meta.slot_mapping, non_blocking=True)
        self.slots[n:bs].fill_(-1)
        self.query_start[: n + 1].copy_(meta.query_start_loc, non_blocking=True)
        self.query_start[n + 1 : bs + 1].fill_(n)  # padding rows: no query
        self.seq_lens[:n].copy_(meta.seq_lens, non_blocking=True)
        self.block_tables[:n, :width].copy_(meta.block_tables, non_blocking=True)
        self.replays[bs]()
        self.replayed += 1
        return self.outputs[bs].index_select(0, logits_rows.to(self.rows.device))


def decode_graphs_for(model: torch.nn.Module, kv_cache: KVCache, device: torch.device, max_batch: int,
                      max_model_len: int) -> DecodeGraphs | None:
    """Capture on CUDA; a forward that cannot be captured is reported once and runs eagerly."""
    try:
        return DecodeGraphs(model, kv_cache, device, max_batch, max_model_len, cuda_graph_capture(device))
    except RuntimeError as e:
        warnings.warn(f"CUDA graphs off, decode steps run eagerly: {str(e).splitlines()[0]}", stacklevel=2)
        return None
