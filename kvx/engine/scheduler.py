"""Which tokens of which sequences go into the next step.

Each step packs, under `batch_tokens` and `max_seqs`: first the running sequences (a decode token,
a jump-forward extend, or the next chunk of a long prefill), most important first; then newly
admitted waiting sequences' prefill chunks. So chunked prefill is mixed with decode.

Admission order (offline, the whole queue is known): a heap keyed by (-priority, recompute first,
token ids, arrival). Ordering equal-priority prompts by their token ids is the DFS order of the
prompt trie, so prompts sharing a prefix are admitted back to back and each push/pop is
O(log n) however many prompts wait (no per-step scan of the queue). A candidate that shares
uncached full blocks with the previously admitted, still-prefilling sequence waits one step, so the
shared prefix is computed once and then served from the radix cache.

When the pool runs dry, the least important running sequence (lowest priority, then newest) is
preempted: its blocks are released (full ones stay in the radix cache) and it is recomputed later.

A sequence waiting on a ranked choice (kvx/engine/choices.py) computes nothing itself: its forks,
one row per multi-token value, take its place in the step. Their blocks are taken like a growing
sequence's (preempting if needed); each fork's copy of the partial last block is listed in
`ScheduledStep.copies` for the runner to make before the forward.
"""
from __future__ import annotations

import bisect
import heapq
from dataclasses import dataclass, field

from kvx.engine.block_manager import BlockManager
from kvx.engine.choices import Fork
from kvx.engine.radix_cache import RadixCache
from kvx.engine.sequence import Sequence, Status, common_prefix
from kvx.metrics import EngineMetrics


@dataclass
class ScheduledStep:
    seqs: list[Sequence | Fork] = field(default_factory=list)
    num_tokens: list[int] = field(default_factory=list)  # tokens computed for each seq this step
    copies: list[tuple[int, int]] = field(default_factory=list)  # (from, to) blocks to copy first

    @property
    def total_tokens(self) -> int:
        return sum(self.num_tokens)

    def add(self, seq: Sequence, n: int) -> None:
        self.seqs.append(seq)
        self.num_tokens.append(n)


def _importance(seq: Sequence) -> tuple[int, int]:
    return (-seq.priority, seq.seq_no)  # sorts most important first


class Scheduler:
    def __init__(
        self,
        blocks: BlockManager,
        cache: RadixCache | None,
        metrics: EngineMetrics,
        batch_tokens: int,
        max_seqs: int,
    ):
        self.blocks = blocks
        self.cache = cache
        self.metrics = metrics
        self.bs = blocks.block_size
        self.batch_tokens = batch_tokens
        self.max_seqs = max_seqs
        self.waiting: list[tuple] = []  # heap, see module docstring
        self.running: list[Sequence] = []  # sorted by _importance
        self._last_admitted: Sequence | None = None
        self.watermark = max(1, blocks.num_blocks // 100)  # headroom so admission does not force preemption
        self.queue_ops = 0  # pushes + pops + peeks of the waiting heap: the admission work done

    # --- queue -------------------------------------------------------------------------------
    def add(self, seq: Sequence) -> None:
        seq.status = Status.WAITING
        recompute = 0 if seq.recomputes else 1
        heapq.heappush(self.waiting, (-seq.priority, recompute, seq.token_ids, seq.seq_no, seq))
        self.queue_ops += 1

    @property
    def num_waiting(self) -> int:
        return len(self.waiting)

    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    # --- one step ----------------------------------------------------------------------------
    def schedule(self) -> ScheduledStep:
        step = ScheduledStep()
        budget = self.batch_tokens
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            if seq.choice is not None:
                if self._fork(seq, step):
                    budget = self._add_forks(seq, step, budget)
                    i += 1
                continue  # else seq itself was preempted; running[i] is the next one
            if seq.draft and not self._draft_fits(seq, budget):
                seq.take_draft()  # a draft is checked whole in one step, and never costs a preemption
            n = min(seq.num_uncomputed, budget)
            if self._grow(seq, seq.num_computed + n):
                step.add(seq, n)
                budget -= n
                i += 1
            # else: seq itself was preempted (it was the least important); running[i] is the next one
        while budget > 0 and self.waiting and len(self.running) < self.max_seqs:
            n = self._admit(budget)
            if n == 0:
                break
            step.add(self._last_admitted, n)
            budget -= n
        return step

    def _draft_fits(self, seq: Sequence, budget: int) -> bool:
        return seq.num_uncomputed <= budget and seq.blocks_needed(seq.num_tokens, self.bs) <= self.blocks.num_free

    def _grow(self, seq: Sequence, num_tokens: int) -> bool:
        """Give seq blocks for num_tokens tokens, preempting less important sequences if needed.

        Returns False when seq itself had to be preempted."""
        got = self._blocks_for(seq, seq.blocks_needed(num_tokens, self.bs))
        if got is not None:
            seq.block_table.extend(got)
        return got is not None

    def _blocks_for(self, seq: Sequence, need: int) -> list[int] | None:
        """need fresh blocks for seq, preempting the least important sequences while the pool is
        dry; None when that came to seq itself (it was preempted)."""
        while need > 0:
            got = self.blocks.allocate(need)
            if got is not None:
                return got
            victim = self.running[-1]
            self.preempt(victim)
            if victim is seq:
                return None
        return []

    def _fork(self, seq: Sequence, step: ScheduledStep) -> bool:
        """Forks for every multi-token value of seq's pending choice not forked yet; False when
        seq was preempted for their blocks."""
        choice, length = seq.choice, seq.num_tokens
        full = length // self.bs
        forked = {f.option for f in choice.forks}
        for i in choice.multi_token():
            if i in forked:
                continue
            value = choice.options[i].tokens
            got = self._blocks_for(seq, -(-(length + len(value) - 1) // self.bs) - full)
            if got is None:
                return False
            if length % self.bs:  # copy-on-write: the fork writes its first tokens after the prefix's last ones
                step.copies.append((seq.block_table[full], got[0]))
            choice.forks.append(Fork(seq, i, value, seq.token_ids + list(value[:-1]), length,
                                     seq.block_table[:full] + got, got))
        return True

    def _add_forks(self, seq: Sequence, step: ScheduledStep, budget: int) -> int:
        for fork in seq.choice.forks:
            n = fork.num_uncomputed
            if 0 < n <= budget:
                step.add(fork, n)
                budget -= n
        return budget

    def settle_choice(self, seq: Sequence, option: int | None) -> None:
        """seq's choice is made (before its value is appended): the fork of `option` (None: no fork
        won) hands its blocks to seq in place of seq's partial last block; the others are freed."""
        choice, seq.choice = seq.choice, None
        full = seq.num_tokens // self.bs
        for fork in choice.forks:
            if fork.option == option:
                self.blocks.release(seq.block_table[full:])
                seq.block_table = seq.block_table[:full] + fork.own
            else:
                self.blocks.release(fork.own)

    def _drop_choice(self, seq: Sequence) -> None:
        if seq.choice is not None:
            for fork in seq.choice.forks:
                self.blocks.release(fork.own)
            seq.choice = None

    def _admit(self, budget: int) -> int:
        """Admit the head of the queue with a first chunk of at most budget tokens; 0 if it must wait."""
        self.queue_ops += 1
        seq: Sequence = self.waiting[0][-1]
        cached, node = self._match(seq)
        if self._should_wait_for(seq, len(cached)):
            return 0
        for b in cached:  # hold them before allocation can evict them
            self.blocks.incref(b)
        seq.block_table = list(cached)
        seq.num_computed = len(cached) * self.bs
        n = min(seq.num_uncomputed, budget)
        need = seq.blocks_needed(seq.num_computed + n, self.bs)
        got = None
        if self.blocks.can_allocate(need + self.watermark) or not self.running:
            got = self.blocks.allocate(need)
        if got is None:
            self.blocks.release(seq.block_table)
            seq.block_table, seq.num_computed = [], 0
            return 0
        heapq.heappop(self.waiting)
        seq.block_table.extend(got)
        seq.num_cached_blocks = len(cached)
        seq.cache_node = node
        seq.status = Status.RUNNING
        if not seq.admitted:
            seq.admitted = True
            seq.usage.cached_prompt_tokens = min(seq.num_computed, seq.num_prompt)
            self.metrics.on_admit(seq.num_prompt, seq.usage.cached_prompt_tokens)
        bisect.insort(self.running, seq, key=_importance)
        self._last_admitted = seq
        return n

    def _match(self, seq: Sequence):
        if self.cache is None:
            return [], None
        return self.cache.match(seq.token_ids, seq.cacheable_tokens() // self.bs)

    def _should_wait_for(self, seq: Sequence, cached_blocks: int) -> bool:
        prev = self._last_admitted
        if self.cache is None or prev is None or prev.status is not Status.RUNNING or not prev.in_prefill:
            return False
        if cached_blocks >= seq.cacheable_tokens() // self.bs:
            return False  # nothing more of seq could come from the cache
        limit = (cached_blocks + 1) * self.bs
        return common_prefix(seq.token_ids, prev.token_ids, limit) >= limit

    # --- transitions -------------------------------------------------------------------------
    def preempt(self, seq: Sequence) -> None:
        self.running.remove(seq)
        self._drop_choice(seq)  # decided again after the recompute, from the same grammar state
        self.blocks.release(seq.block_table)
        seq.reset_for_recompute()
        self.metrics.preemptions += 1
        self.add(seq)

    def finish(self, seq: Sequence) -> None:
        """Drop a finished sequence from the running set and release its blocks (they stay cached)."""
        self.running.remove(seq)
        self._drop_choice(seq)
        self.blocks.release(seq.block_table)
        seq.block_table = []

    def advance(self, step: ScheduledStep) -> None:
        """The step's tokens are computed (a verified draft may then take some back)."""
        for seq, n in zip(step.seqs, step.num_tokens):
            seq.num_computed += n

    def publish(self, step: ScheduledStep) -> None:
        """Publish the step's newly full, computed blocks to the radix cache (after draft checks, so
        a rejected draft token is never shared)."""
        if self.cache is None:
            return
        for seq in step.seqs:
            if isinstance(seq, Fork):
                continue  # a fork's value is tentative; the winner's blocks are published as its parent's
            full = min(seq.num_computed, seq.num_tokens) // self.bs
            if full > seq.num_cached_blocks:
                seq.cache_node = self.cache.publish(
                    seq.cache_node, seq.token_ids, seq.block_table, seq.num_cached_blocks, full
                )
                seq.num_cached_blocks = full
