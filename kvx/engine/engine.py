"""The offline engine: requests in, results out as sequences finish (contract in kvx/engine/api.py).

The step loop: pull requests lazily (at most max_queued waiting), schedule a step, run the model,
sample (grammar mask first, jump-forward appends after; a draft is cut back to what the logits
confirm; a ranked choice scores its values, choices.py; a scoring request sums its prompt's
log-probabilities), publish full blocks to the radix cache,
draft for the next step (speculation.py) and yield the sequences that finished.
"""
from __future__ import annotations

import time
from typing import Iterable, Iterator, Protocol

import torch

from kvx import kernels
from kvx.kernels.interface import AttentionBackend, KVCache
from kvx.engine.api import PAUSE, ChoiceTrace, EngineConfig, Pause, Request, Result, Usage
from kvx.engine.block_manager import BlockManager
from kvx.engine.cuda_graphs import decode_graphs_for
from kvx.engine.choices import Fork, PendingChoice
from kvx.engine.host_memory import keep_freed_buffers
from kvx.engine.model_runner import ModelRunner
from kvx.engine.radix_cache import RadixCache
from kvx.engine.masking import LogitMasker
from kvx.engine.sampler import make_generator, sample
from kvx.engine.scheduler import Scheduler
from kvx.engine.sequence import Sequence
from kvx.engine.speculation import (SpeculationConfig, checked_choices, draft_length, propose, row_masks,
                                    settle_draft)
from kvx.errors import CapacityError, ConfigError
from kvx.metrics import EngineMetrics

MAX_VETOES = 16  # vetoed tokens skipped at one position at most
_KV_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16, "int8": torch.int8}


def resolve_kv_dtype(name: str, model_dtype: torch.dtype) -> torch.dtype:
    if name == "auto":
        return model_dtype
    if name not in _KV_DTYPES:
        raise ConfigError(f"{{option}} {name!r}: expected auto, {', '.join(_KV_DTYPES)}", option="kv_dtype")
    return _KV_DTYPES[name]


def model_device(model: torch.nn.Module) -> torch.device:
    """Where the model's weights live: LlamaModel states it (its weights are plain tensors, not
    nn.Parameters); other modules (test fakes) by their first parameter; CPU if they hold none."""
    dev = getattr(model, "device", None)
    if dev is not None:
        return torch.device(dev)
    return next(model.parameters(), torch.empty(0)).device


def resolve_attention(name: str, device: torch.device) -> str:
    """EngineConfig.attention -> backend name for a model on `device` (kernels.backend_name)."""
    return kernels.backend_name(name, device.type)


class PagedModel(Protocol):
    """What the engine needs of a model family (kvx/models): its layers call `backend`'s kernels."""

    backend: AttentionBackend


def attach_backend(model: PagedModel, name: str, device: torch.device | None = None) -> None:
    """Point the model's attention at kernels.get_backend(name) (EngineConfig.attention).

    "auto" follows the model's device (resolve_attention): triton on CUDA, else the batched CPU
    backend (kernels.cpu_backend), not the reference."""
    name = resolve_attention(name, device if device is not None else model_device(model))
    try:
        backend = kernels.get_backend(name)
    except ValueError as e:
        raise ConfigError(f"{{option}}: {e}", option="attention") from None
    model.backend = backend


class Engine:
    def __init__(self, model, config: EngineConfig | None = None):
        self.config = config = config or EngineConfig()
        if isinstance(model, str):
            from kvx.models import load_model

            model = load_model(model, dtype=config.dtype)
        self.loaded = model
        self.tokenizer = model.tokenizer
        mc = model.config
        self.vocab_size = mc.vocab_size
        self.max_model_len = config.max_model_len or mc.max_position_embeddings
        self.eos_ids = frozenset(mc.eos_token_ids or getattr(self.tokenizer, "eos_token_ids", []))
        self.device = device = model_device(model.model)
        if device.type == "cpu":
            keep_freed_buffers()
        attach_backend(model.model, config.attention, device)
        kv_dtype = resolve_kv_dtype(config.kv_dtype, model.dtype)
        self.blocks, self.bytes_per_block = BlockManager.for_model(config, mc, kv_dtype, device)
        self.cache = RadixCache(self.blocks) if config.enable_prefix_cache else None
        self.kv_cache = KVCache(
            mc.num_layers, self.blocks.num_blocks, config.block_size, mc.num_kv_heads, mc.head_dim, kv_dtype, device
        )
        self.metrics = EngineMetrics(batch_tokens=config.batch_tokens, total_blocks=self.blocks.num_blocks)
        self.scheduler = Scheduler(self.blocks, self.cache, self.metrics, config.batch_tokens, config.max_seqs)
        graphs = None
        if config.cuda_graphs and device.type == "cuda" and resolve_attention(config.attention, device) == "triton":
            graphs = decode_graphs_for(model.model, self.kv_cache, device, config.max_seqs, self.max_model_len)
        self.runner = ModelRunner(model.model, self.kv_cache, device, graphs)
        self.speculation = SpeculationConfig(config.speculative_tokens, config.speculative_rows)
        self.mask_logits = LogitMasker(self.vocab_size)
        self._seq_no = 0
        self._evicted_before = 0

    # --- request intake ----------------------------------------------------------------------
    def _stop_ids(self, req: Request) -> frozenset[int]:
        p = req.sampling
        ids = frozenset(p.stop_token_ids) if p.stop_token_ids is not None else self.eos_ids
        return ids - self.eos_ids if p.ignore_eos else ids

    def _check(self, req: Request) -> str | None:
        """One-line reason why req cannot run, or None."""
        n = len(req.prompt_ids)
        if n == 0:
            return f"request {req.id}: empty prompt"
        if n >= self.max_model_len:
            return f"request {req.id}: prompt has {n} tokens but the model context is {self.max_model_len}"
        if min(req.prompt_ids) < 0 or max(req.prompt_ids) >= self.vocab_size:
            return f"request {req.id}: prompt holds a token id outside the vocabulary (0..{self.vocab_size - 1})"
        score_from = req.sampling.score_from
        if score_from is not None and not 1 <= score_from < n:
            return f"request {req.id}: score_from is {score_from}; a prompt of {n} tokens scores from 1 to {n - 1}"
        need_tokens = min(n + req.sampling.max_tokens, self.max_model_len)
        need = -(-need_tokens // self.blocks.block_size)
        if need > self.blocks.num_blocks:
            return str(CapacityError(
                f"request {req.id}: needs {need} KV blocks ({n} prompt + {req.sampling.max_tokens} new tokens) "
                f"but the pool holds {self.blocks.num_blocks}; raise kv_memory or lower the max tokens"
            ))
        return None

    def _error_result(self, req: Request, message: str) -> Result:
        self.metrics.requests_failed += 1
        usage = Usage(prompt_tokens=len(req.prompt_ids))
        return Result(req.id, [], "", "error", usage, error=message, user_data=req.user_data)

    # --- the loop ----------------------------------------------------------------------------
    def generate(self, requests: Iterable[Request | Pause], reset_metrics: bool = True) -> Iterator[Result]:
        """Results as sequences finish. The metrics start afresh unless `reset_metrics` is False (a job's
        later rounds: its retries, its records after the calibration run, add to the same figures)."""
        if reset_metrics:
            self.metrics.reset()
        self._evicted_before = self.cache.evicted_blocks if self.cache is not None else 0
        source = iter(requests)
        exhausted = False
        while True:
            while not exhausted and self.scheduler.num_waiting < self.config.max_queued:
                req = next(source, None)
                if req is None:
                    exhausted = True
                    break
                if req is PAUSE:  # nothing to add now: step what is held, then ask again
                    break
                problem = self._check(req)
                if problem:
                    yield self._error_result(req, problem)
                    continue
                self.scheduler.add(Sequence(req, self._seq_no, self._stop_ids(req)))
                self._seq_no += 1
            if not self.scheduler.has_work():
                if exhausted:
                    break
                continue  # the source paused with nothing held: ask it again
            yield from self.step()

    @torch.inference_mode()
    def step(self) -> list[Result]:
        """Run one scheduled step; returns the results of the sequences it finished."""
        step = self.scheduler.schedule()
        if not step.seqs:
            raise RuntimeError("scheduler produced an empty step with work pending (KV pool accounting bug)")
        t0 = time.perf_counter()
        logits, sampled, counts = self.runner.run(step)
        t1 = time.perf_counter()
        self.scheduler.advance(step)
        peak = self.blocks.num_held
        done = self._route([step.seqs[i] for i in sampled], counts, logits)  # mask, sample, accept, propose
        self.scheduler.publish(step)
        results = [self._finish(seq) for seq in done]
        evicted = self.cache.evicted_blocks - self._evicted_before if self.cache is not None else 0
        self.metrics.on_step(step.total_tokens, peak, t1 - t0, time.perf_counter() - t1,
                             self.blocks.num_held, self.blocks.num_cached_idle, evicted)
        return results

    def _route(self, owners: list[Sequence | Fork], counts: list[int], logits: torch.Tensor) -> list[Sequence]:
        """Sequences' rows are sampled; forks' rows score their values, and choices whose forks are
        all back are settled; scoring requests' rows add to their sums (done once all is computed)."""
        if not any(isinstance(o, Fork) or o.scoring for o in owners):
            return self._sample(owners, counts, logits)
        rows, seqs, seq_counts, settled, scored, first = [], [], [], [], [], 0
        for owner, n in zip(owners, counts):
            if isinstance(owner, Fork):
                owner.score(logits[first:first + n])
                self.metrics.choice_fork_tokens += n
                if owner.parent.choice.ready:
                    settled.append(owner.parent)
            elif owner.scoring:
                owner.add_scores(logits[first:first + n])
                if owner.num_computed >= owner.num_tokens:
                    owner.finish("stop")
                    scored.append(owner)
            else:
                rows.extend(range(first, first + n))
                seqs.append(owner)
                seq_counts.append(n)
            first += n
        done = (self._sample(seqs, seq_counts, logits[rows]) if seqs else []) + scored
        for seq in settled:
            self._settle(seq)
            if seq.finish_reason is not None:
                done.append(seq)
        return done

    def _sample(self, seqs: list[Sequence], counts: list[int], logits: torch.Tensor) -> list[Sequence]:
        """counts[j] consecutive logits rows belong to seqs[j] (more than one: rows that check its draft)."""
        masks: list[torch.Tensor | None] = []
        for seq, n in zip(seqs, counts):
            if seq.request.constraint is not None and seq.matcher is None:
                seq.matcher = seq.request.constraint()
            if seq.generator is None and seq.request.sampling.temperature > 0:
                seq.generator = make_generator(seq.request.sampling.seed)
            masks.extend(row_masks(seq, n))
        self.mask_logits(logits, masks)
        owners = [seq for seq, n in zip(seqs, counts) for _ in range(n)]
        tokens = sample(logits, [s.request.sampling for s in owners], [s.generator for s in owners])
        done, first = [], 0
        for seq, n in zip(seqs, counts):
            self._take(seq, tokens[first:first + n], masks[first:first + n], logits[first:first + n])
            first += n
            if seq.finish_reason is not None:
                done.append(seq)
        k = draft_length(self.speculation, len(self.scheduler.running) - len(done))
        for seq in seqs if k else ():
            if seq.finish_reason is None:
                self.metrics.drafted_tokens += propose(seq, k, self.max_model_len)
        return done

    def _take(self, seq: Sequence, choices: list[int], masks: list[torch.Tensor | None], rows: torch.Tensor) -> None:
        """Append the step's choices for seq: its confirmed draft tokens, then the model's next token
        (or, at a ranked choice, the start of its scoring)."""
        computed, checked = seq.num_computed, seq.draft
        drafted = seq.take_draft()
        base = seq.num_tokens
        agreed, row = checked_choices(drafted, checked, choices)
        for j, tok in enumerate(agreed):
            self._choose(seq, tok, masks[j])
            if seq.finish_reason is not None:
                break
        if seq.finish_reason is None:
            if row is None and seq.num_tokens == base + len(drafted):  # the draft ended at a choice: the last row makes it
                row = len(choices) - 1
            if row is not None and not self._rank(seq, rows[row]):
                self._choose(seq, self._unvetoed(seq, choices[row], rows[row]), masks[row])
        if drafted:
            self.metrics.accepted_draft_tokens += settle_draft(seq, drafted, base, computed)

    def _choose(self, seq: Sequence, tok: int, allowed: torch.Tensor | None) -> None:
        # the masked argmax lands on a forbidden token only when the grammar allows none (O(1), not any())
        if allowed is not None and not (tok < allowed.shape[0] and bool(allowed[tok])):
            seq.finish("error", f"request {seq.request.id}: the grammar allows no next token")
        else:
            self._accept(seq, tok)

    # --- ranked choices (choices.py) --------------------------------------------------------
    def _rank(self, seq: Sequence, row: torch.Tensor) -> bool:
        """At a closed set of values, start ranking them from the masked logits row; False where
        the token is chosen as usual (no choice here, or the request does not rank)."""
        p = seq.request.sampling
        if not p.rank_choices or p.temperature > 0 or seq.matcher is None:
            return False
        point = seq.matcher.complete_values()
        if point is None or max(len(o.tokens) for o in point.options) > self.config.batch_tokens:
            return False
        seq.choice = PendingChoice.start(point, row)
        if not seq.choice.multi_token():
            self._settle(seq)  # every value is one token: the row alone scores them
        return True

    def _settle(self, seq: Sequence) -> None:
        """Append the winning value of seq's choice (or the likeliest token of the open rest)."""
        choice: PendingChoice = seq.choice
        win = choice.winner(seq.request.choice_hook)
        seq.choices_made.append(ChoiceTrace(choice.key, choice.labels, choice.logprobs(), len(seq.output_ids)))
        self.metrics.ranked_choices += 1
        self.metrics.choices_overruling_greedy += choice.overrules_greedy(win)
        if win == len(choice.options):
            self.scheduler.settle_choice(seq, None)
            return self._accept(seq, self._unvetoed(seq, choice.open_token, choice.open_logits))
        value = choice.options[win].tokens
        computed = seq.num_tokens + len(value) - 1 if len(value) > 1 else seq.num_computed
        self.scheduler.settle_choice(seq, win)
        self._accept(seq, *value)
        seq.num_computed = computed  # the winning fork computed all of the value's KV but its last token's
        return None

    def _unvetoed(self, seq: Sequence, tok: int, row: torch.Tensor | None) -> int:
        """The greedy token, or the best one the request's TokenVeto lets through (a few tries)."""
        veto = seq.request.token_veto
        if veto is None or row is None or seq.request.sampling.temperature > 0:
            return tok
        row, output = row.clone(), seq.output_ids  # output_ids copies the tail: once per position
        only = veto.allowed(output)
        if only:  # the veto names the few tokens it lets through: the likeliest the grammar allows
            ids = torch.tensor(only, dtype=torch.long, device=row.device)
            best = int(ids[row[ids].argmax()])
            if row[best] != float("-inf"):
                kept = torch.full_like(row, float("-inf"))
                kept[ids] = row[ids]
                row, tok = kept, best
        first = tok
        for _ in range(MAX_VETOES):
            if not veto.vetoes(output, tok):
                return tok
            self.metrics.vetoed_tokens += 1
            row[tok] = float("-inf")
            tok = int(row.argmax())
            if row[tok] == float("-inf"):
                break
        else:
            if not veto.vetoes(output, tok):  # the last try's candidate is checked as well
                return tok
        return first  # every candidate tried was vetoed: the veto gives way to the likeliest

    def _accept(self, seq: Sequence, *chosen: int) -> None:
        """Append the chosen tokens (sampled, or a ranked value), then the grammar-forced ones
        (jump-forward: computed next step as one multi-token extend, never sampled), checking the
        stop rules after each."""
        pending, forced = list(chosen), False
        while pending:
            for t in pending:
                seq.append(t)
                self.metrics.generated_tokens += 1
                if forced:
                    seq.usage.forced_tokens += 1
                    self.metrics.forced_tokens += 1
                if seq.matcher is not None:
                    seq.matcher.advance(t)
                if t in seq.stop_ids:
                    return seq.finish("stop")
                if seq.num_generated >= seq.max_new or seq.num_tokens >= self.max_model_len:
                    return seq.finish("length")
            pending = seq.matcher.forced_tokens() if seq.matcher is not None else []
            forced = True
        return None

    def _finish(self, seq: Sequence) -> Result:
        self.scheduler.finish(seq)
        out = seq.output_ids
        if seq.finish_reason == "stop" and out and out[-1] in seq.stop_ids:
            out = out[:-1]  # the stop token ends the output; it is counted in usage, not returned
        self.metrics.requests_done += 1
        if seq.finish_reason == "error":
            self.metrics.requests_failed += 1
        text = self.tokenizer.decode(out) if out else ""
        return Result(seq.request.id, out, text, seq.finish_reason, seq.usage, seq.error, seq.request.user_data,
                      seq.choices_made, seq.prompt_logprob if seq.scoring else None)
