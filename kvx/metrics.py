"""Per-run engine metrics, readable at any time with snapshot().

The engine bumps the counters; readers (the CLI's progress line, --stats, benchmarks) only call
snapshot(), which returns plain numbers so it can go straight into JSON.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

# snapshot() keys that add up over several engines (a Ray fleet's totals, kvx/cluster/fleet.py)
ADDING_UP = ("requests_done", "requests_failed", "prompt_tokens", "cached_prompt_tokens", "computed_tokens",
             "generated_tokens", "forced_tokens", "drafted_tokens", "accepted_draft_tokens", "ranked_choices",
             "choices_overruling_greedy", "choice_fork_tokens", "vetoed_tokens", "steps", "preemptions",
             "evicted_blocks", "model_seconds", "sample_seconds")


@dataclass
class EngineMetrics:
    batch_tokens: int = 0  # the step token budget, the denominator of batch utilisation
    total_blocks: int = 0
    started: float = field(default_factory=time.perf_counter)
    requests_done: int = 0
    requests_failed: int = 0
    prompt_tokens: int = 0  # first admission only: a recomputed sequence is not counted again
    cached_prompt_tokens: int = 0
    computed_tokens: int = 0  # tokens that went through the model (prefill + decode + recompute)
    generated_tokens: int = 0
    forced_tokens: int = 0
    drafted_tokens: int = 0  # speculation: tokens proposed, and those the model confirmed
    accepted_draft_tokens: int = 0
    ranked_choices: int = 0  # values chosen by their total log-probability (kvx/engine/choices.py)
    choices_overruling_greedy: int = 0  # of those, where the first token's argmax started another value
    choice_fork_tokens: int = 0  # tokens teacher-forced in fork rows to score values
    vetoed_tokens: int = 0  # greedy tokens a request's TokenVeto refused (e.g. copies of an example)
    steps: int = 0
    step_tokens_sum: int = 0
    preemptions: int = 0
    evicted_blocks: int = 0
    used_blocks: int = 0  # held by running sequences right now
    cached_blocks: int = 0  # idle, kept by the prefix cache
    peak_used_blocks: int = 0
    model_seconds: float = 0.0  # time inside the model forward
    sample_seconds: float = 0.0

    def reset(self) -> None:
        """Start a new run in place (readers may hold a reference to this object)."""
        self.__dict__.update(EngineMetrics(batch_tokens=self.batch_tokens, total_blocks=self.total_blocks).__dict__)

    def on_step(self, num_tokens: int, peak_blocks: int, model_s: float, sample_s: float,
                used_blocks: int, cached_blocks: int, evicted_blocks: int) -> None:
        """One engine step: tokens computed, blocks held at its peak (after the forward, before
        finished sequences gave theirs back) and at its end, seconds in the model and after it."""
        self.steps += 1
        self.step_tokens_sum += num_tokens
        self.computed_tokens += num_tokens
        self.peak_used_blocks = max(self.peak_used_blocks, peak_blocks)
        self.model_seconds += model_s
        self.sample_seconds += sample_s
        self.used_blocks = used_blocks
        self.cached_blocks = cached_blocks
        self.evicted_blocks = evicted_blocks

    def on_admit(self, prompt_tokens: int, cached_tokens: int) -> None:
        self.prompt_tokens += prompt_tokens
        self.cached_prompt_tokens += cached_tokens

    def snapshot(self) -> dict:
        """The figures (ADDING_UP: those that several engines' snapshots sum to a fleet's)."""
        elapsed = max(time.perf_counter() - self.started, 1e-9)
        steps = max(self.steps, 1)
        return {
            "elapsed_s": round(elapsed, 3),
            "requests_done": self.requests_done,
            "requests_failed": self.requests_failed,
            "prompt_tokens": self.prompt_tokens,
            "cached_prompt_tokens": self.cached_prompt_tokens,
            "cache_hit_rate": self.cached_prompt_tokens / self.prompt_tokens if self.prompt_tokens else 0.0,
            "computed_tokens": self.computed_tokens,
            "generated_tokens": self.generated_tokens,
            "forced_tokens": self.forced_tokens,
            "drafted_tokens": self.drafted_tokens,
            "accepted_draft_tokens": self.accepted_draft_tokens,
            "ranked_choices": self.ranked_choices,
            "choices_overruling_greedy": self.choices_overruling_greedy,
            "choice_fork_tokens": self.choice_fork_tokens,
            "vetoed_tokens": self.vetoed_tokens,
            "output_tokens_per_s": self.generated_tokens / elapsed,
            "computed_tokens_per_s": self.computed_tokens / elapsed,
            "steps": self.steps,
            "batch_utilisation": self.step_tokens_sum / (steps * self.batch_tokens) if self.batch_tokens else 0.0,
            "kv_pool_pressure": self.used_blocks / self.total_blocks if self.total_blocks else 0.0,
            "peak_kv_pool_pressure": self.peak_used_blocks / self.total_blocks if self.total_blocks else 0.0,
            "kv_used_blocks": self.used_blocks,
            "kv_cached_blocks": self.cached_blocks,
            "kv_total_blocks": self.total_blocks,
            "preemptions": self.preemptions,
            "evicted_blocks": self.evicted_blocks,
            "model_seconds": round(self.model_seconds, 3),
            "sample_seconds": round(self.sample_seconds, 3),
        }
