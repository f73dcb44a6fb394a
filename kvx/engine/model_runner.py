"""Turns a scheduled step into the model's inputs and runs the forward.

For each scheduled sequence the step computes token_ids[num_computed : num_computed + n]; their
rows are laid out back to back (the varlen layout of kvx.kernels.interface). Logits are requested only
for sequences whose chunk reaches the end of their tokens: those get a token sampled (a sequence
with a draft gets one more row per drafted token to confirm, Sequence.logit_positions); a scoring
request gets a row for every prompt token it scores, in each of its chunks.
"""
from __future__ import annotations

import torch

from kvx.kernels.interface import AttentionMetadata, KVCache, padded_tables
from kvx.engine.cuda_graphs import DecodeGraphs
from kvx.engine.scheduler import ScheduledStep


class ModelRunner:
    def __init__(self, model: torch.nn.Module, kv_cache: KVCache, device: torch.device,
                 graphs: DecodeGraphs | None = None):
        self.model = model
        self.kv_cache = kv_cache
        self.bs = kv_cache.block_size
        self.device = device
        self.graphs = graphs  # decode steps replayed from CUDA graphs (None: every step eagerly)

    def prepare(self, step: ScheduledStep, device: torch.device | str | None = None):
        """(input_ids, positions, meta, logits_indices, which step entries get logits, rows of each),
        tensors on `device` (default the model's)."""
        ids: list[int] = []
        positions: list[int] = []
        query_lens, seq_lens, tables, sampled, rows, counts = [], [], [], [], [], []
        for i, (seq, n) in enumerate(zip(step.seqs, step.num_tokens)):
            start = seq.num_computed
            wanted = None
            if seq.scoring:  # every chunk scores its tokens
                wanted = seq.score_positions(start, n)
                wanted = wanted if wanted or start + n == seq.num_tokens else None
            elif start + n == seq.num_tokens:
                wanted = seq.logit_positions()
            if wanted is not None:
                sampled.append(i)
                rows.extend(len(ids) + p - start for p in wanted)
                counts.append(len(wanted))
            ids.extend(seq.token_ids[start : start + n])
            positions.extend(range(start, start + n))
            query_lens.append(n)
            seq_lens.append(start + n)
            tables.append(seq.block_table)
        table = padded_tables(tables)
        pos = torch.tensor(positions, dtype=torch.int64)
        owner = torch.repeat_interleave(torch.arange(len(query_lens)), torch.tensor(query_lens))
        slots = table[owner, pos // self.bs].long() * self.bs + pos % self.bs
        logits_indices = torch.tensor(rows, dtype=torch.int64)
        dev = self.device if device is None else device
        meta = AttentionMetadata.build(query_lens, seq_lens, table, slots, dev)
        input_ids = torch.tensor(ids, dtype=torch.int64, device=dev)
        return input_ids, pos.to(dev), meta, logits_indices.to(dev), sampled, counts

    @torch.inference_mode()
    def run(self, step: ScheduledStep) -> tuple[torch.Tensor, list[int], list[int]]:
        """Forward one step; returns ([rows, vocab] float32 logits on the model's device: masking and
        argmax run there, so only token ids cross to the host), the sampled step entries, how many
        consecutive rows each of them owns)."""
        graphs = self.graphs
        if graphs is not None and not graphs.fits(step.num_tokens):
            graphs = None
        input_ids, positions, meta, logits_indices, sampled, counts = self.prepare(step, "cpu" if graphs else None)
        if step.copies:  # ranked-choice forks own a copy of their parent's partial block
            self.kv_cache.copy_blocks(step.copies)
        if graphs is not None:  # the graph copies the host inputs into its static buffers
            logits = graphs.run(input_ids, positions, meta, logits_indices)
        else:
            logits = self.model(input_ids, positions, meta, self.kv_cache, logits_indices)
        return logits.float(), sampled, counts
