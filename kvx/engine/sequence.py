"""One request's state while the engine works on it.

`token_ids` holds prompt + generated tokens. The KV of the first `num_computed` of them sits in the
pool, in the blocks listed by `block_table`. Each step computes a chunk of the rest; once the chunk
reaches the end of `token_ids` the step's logits for the last token are sampled. Decode is the case
where one token is left; a jump-forward append (grammar-forced tokens) leaves several. A draft
(speculation.py) is a tentative tail of `token_ids`: computed with the rest, then cut back to what
the step's logits confirm.
"""
from __future__ import annotations

import enum
from typing import Any

import torch

from kvx.engine.api import ChoiceTrace, Constraint, Request, Usage


class Status(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


class Sequence:
    __slots__ = (
        "request", "seq_no", "token_ids", "num_prompt", "num_computed", "block_table",
        "num_cached_blocks", "cache_node", "status", "usage", "matcher", "generator", "stop_ids",
        "finish_reason", "error", "admitted", "recomputes", "draft", "draft_masks", "lookup", "lookup_upto",
        "choice", "choices_made", "scored_upto", "prompt_logprob",
    )

    def __init__(self, request: Request, seq_no: int, stop_ids: frozenset[int]):
        self.request = request
        self.seq_no = seq_no  # arrival order: "newest" for preemption, tie-break for admission
        self.token_ids: list[int] = list(request.prompt_ids)
        self.num_prompt = len(self.token_ids)
        self.num_computed = 0
        self.block_table: list[int] = []
        self.num_cached_blocks = 0  # leading blocks already published to the radix cache
        self.cache_node: Any = None  # radix node of block_table[num_cached_blocks - 1] (or the root)
        self.status = Status.WAITING
        self.usage = Usage(prompt_tokens=self.num_prompt)
        self.matcher: Constraint | None = None
        self.generator: torch.Generator | None = None
        self.stop_ids = stop_ids
        self.finish_reason: str | None = None
        self.error: str | None = None
        self.admitted = False  # counted once in the prompt-cache metrics, not again on recompute
        self.recomputes = 0
        self.draft: list[bool] = []  # per drafted tail token: True if the step's logits must confirm it
        self.draft_masks: list[torch.Tensor] = []  # the grammar's mask at each of those logits rows (with a matcher)
        self.lookup: dict[int, int] = {}  # token -> latest position (speculation's prompt lookup)
        self.lookup_upto = 0
        self.choice: Any = None  # a PendingChoice while its values are scored (kvx/engine/choices.py)
        self.choices_made: list[ChoiceTrace] = []
        # a scoring request: the next prompt token to score, the sum so far (kept over a recompute,
        # so a token is counted once)
        self.scored_upto: int | None = request.sampling.score_from
        self.prompt_logprob = 0.0

    # --- views -------------------------------------------------------------------------------
    @property
    def priority(self) -> int:
        return self.request.priority

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def num_generated(self) -> int:
        return len(self.token_ids) - self.num_prompt

    @property
    def output_ids(self) -> list[int]:
        return self.token_ids[self.num_prompt :]

    @property
    def num_uncomputed(self) -> int:
        return len(self.token_ids) - self.num_computed

    @property
    def in_prefill(self) -> bool:
        """Still computing prompt (or recomputed) tokens, i.e. more than a decode/extend is left."""
        return self.num_computed < self.num_prompt

    def logit_positions(self) -> list[int]:
        """Positions whose logits the step that reaches the end must return: the last one, and with a
        draft also the position before each drafted token the logits confirm."""
        first = self.num_tokens - len(self.draft) - 1
        return [first + j for j, check in enumerate(self.draft) if check] + [self.num_tokens - 1]

    @property
    def scoring(self) -> bool:
        return self.scored_upto is not None

    def cacheable_tokens(self) -> int:
        """Leading tokens the radix cache may serve: all but the last (its logits are sampled), and
        for a scoring request none it has not scored yet (their logits are summed)."""
        return (self.num_tokens if self.scored_upto is None else self.scored_upto) - 1

    def score_positions(self, start: int, n: int) -> list[int]:
        """A scoring request's chunk [start, start + n): the positions whose logits score a prompt
        token not yet scored (position p scores token p + 1)."""
        first = max(start, self.scored_upto - 1)
        return list(range(first, min(start + n, self.num_tokens - 1)))

    def add_scores(self, rows: torch.Tensor) -> None:
        """rows [m, vocab]: the logits of the chunk's score_positions (model probabilities, no mask).
        They start at scored_upto - 1: the cache never serves a scoring request's unscored tokens."""
        m = rows.shape[0]
        if m:
            first = self.scored_upto
            nxt = torch.tensor(self.token_ids[first:first + m], dtype=torch.int64, device=rows.device)
            logp = torch.log_softmax(rows.float(), dim=-1)
            self.prompt_logprob += float(logp.gather(1, nxt[:, None]).sum())
            self.scored_upto = first + m

    @property
    def max_new(self) -> int:
        return self.request.sampling.max_tokens

    def blocks_needed(self, num_tokens: int, block_size: int) -> int:
        """Blocks the table must hold for the first num_tokens tokens."""
        return (num_tokens + block_size - 1) // block_size - len(self.block_table)

    # --- transitions -------------------------------------------------------------------------
    def append(self, token: int) -> None:
        self.token_ids.append(token)
        self.usage.generated_tokens += 1

    def take_draft(self) -> list[int]:
        """Remove the drafted tail from token_ids and return it (its KV, if computed, is left to overwrite)."""
        keep = len(self.token_ids) - len(self.draft)
        tail = self.token_ids[keep:]
        del self.token_ids[keep:]
        self.draft, self.draft_masks = [], []
        self.num_computed = min(self.num_computed, len(self.token_ids))
        return tail

    def finish(self, reason: str, error: str | None = None) -> None:
        self.status = Status.FINISHED
        self.finish_reason = reason
        self.error = error

    def reset_for_recompute(self) -> None:
        """Preempted: the KV is gone; generated tokens and the matcher state are kept and recomputed."""
        self.take_draft()
        self.num_computed = 0
        self.block_table = []
        self.num_cached_blocks = 0
        self.cache_node = None
        self.status = Status.WAITING
        self.recomputes += 1


def common_prefix(a: list[int], b: list[int], limit: int) -> int:
    """Length of the common prefix of a and b, at most limit."""
    n = min(len(a), len(b), limit)
    if a[:n] == b[:n]:  # fast path in C: the whole range is shared
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo], a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo

