"""Ranked choices (SamplingParams.rank_choices): where the grammar allows a closed set of whole values,
each value is scored by its total log-probability given the prefix and the best one is appended
whole, instead of letting the first token decide (greedy picks `credit` and then whichever
continuation is likelier; a value that starts with a rarer token never gets a say).

1. At a sampling point the matcher lists the values (Matcher.complete_values). The step's logits
   row scores every value's first token, and the open rest where there is one (null against a free
   string: the summed probability of the tokens that start an open value).
2. Values of more than one token are teacher-forced in the next step, one `Fork` row each. A fork's
   block table is its parent's full blocks (shared, read only) plus a copy of the parent's partial
   last block and fresh blocks: the only blocks it writes into are its own, so the prefix's KV is
   never copied whole and never changed. Its logits score the value's later tokens.
3. When every fork is back, the request's ChoiceHook may adjust the scores (contextual calibration,
   kvx/engine/calibration.py), the best value wins, its fork's blocks become the parent's (their KV
   is the parent's next tokens), the other forks' blocks are freed, and the value is appended like
   a jump-forward run.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import torch

from kvx.engine.api import ChoiceHook
from kvx.engine.sequence import Sequence
from kvx.grammar.tokens.choices import PointKey, ValueChoice, ValueOption

OPEN = b""  # the label of the open rest (a closed value is never empty)


@dataclass
class Fork:
    """One multi-token value teacher-forced on a fork of its parent's block table (a step row)."""

    scoring: ClassVar[bool] = False  # a step row like a Sequence's, never a scoring request's
    parent: Sequence
    option: int  # index into the parent's PendingChoice.options
    value: tuple[int, ...]  # the value's tokens
    token_ids: list[int]  # the parent's tokens, then the value's tokens but its last
    start: int  # the parent's length: the first position this fork computes
    block_table: list[int]
    own: list[int]  # the blocks this fork holds: the copy of the partial block, then fresh ones
    num_computed: int = 0
    logprob: float | None = None  # the value's later tokens, once the fork has run

    def __post_init__(self) -> None:
        self.num_computed = self.start

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def num_uncomputed(self) -> int:
        return self.num_tokens - self.num_computed

    def logit_positions(self) -> list[int]:
        """Every computed position: its logits score the value's next token."""
        return list(range(self.start, self.num_tokens))

    def score(self, rows: torch.Tensor) -> None:
        """rows [m - 1, vocab]: the logits at the value's tokens but its last (model probabilities,
        no grammar mask: the value is fixed, only its likelihood is asked)."""
        later = torch.tensor(self.value[1:], dtype=torch.int64, device=rows.device)
        logp = torch.log_softmax(rows.float(), dim=-1)
        self.logprob = float(logp.gather(1, later[:, None]).sum())


@dataclass
class PendingChoice:
    """A sequence's decision point while its multi-token values are being scored."""

    key: PointKey
    options: tuple[ValueOption, ...]
    first: list[float]  # log-probability of each value's first token (and of the open rest, last)
    open_token: int | None  # the likeliest token that starts an open value (None: no open rest)
    open_logits: torch.Tensor | None  # the row with only those tokens left (a TokenVeto may pass over some)
    greedy_token: int  # what the first-token argmax would have taken
    forks: list[Fork] = field(default_factory=list)

    @classmethod
    def start(cls, choice: ValueChoice, row: torch.Tensor) -> "PendingChoice":
        """row: the masked logits at the decision point (the step's row of this sequence)."""
        logp = torch.log_softmax(row.float(), dim=-1)
        first = [float(logp[o.tokens[0]]) for o in choice.options]
        open_token = open_logits = None
        if choice.open_mask is not None:
            n = min(choice.open_mask.shape[0], row.shape[0])  # ids past the model's rows never come
            mask = choice.open_mask[:n].to(row.device)
            first.append(float(torch.logsumexp(logp[:n][mask], dim=0)))
            open_logits = torch.full_like(row, float("-inf"))
            open_logits[:n] = torch.where(mask, row[:n], float("-inf"))
            open_token = int(open_logits.argmax())
        return cls(choice.key, choice.options, first, open_token, open_logits, int(row.argmax()))

    @property
    def labels(self) -> list[bytes]:
        return [o.text for o in self.options] + ([OPEN] if self.open_token is not None else [])

    def multi_token(self) -> list[int]:
        """Options whose later tokens need a fork."""
        return [i for i, o in enumerate(self.options) if len(o.tokens) > 1]

    @property
    def ready(self) -> bool:
        return len(self.forks) == len(self.multi_token()) and all(f.logprob is not None for f in self.forks)

    def logprobs(self) -> list[float]:
        total = list(self.first)
        for f in self.forks:
            total[f.option] += f.logprob or 0.0
        return total

    def winner(self, hook: ChoiceHook | None) -> int:
        """Index of the best option (len(options) = the open rest)."""
        scores = self.logprobs()
        if hook is not None:
            scores = hook.scores(self.key, self.labels, scores)
        return max(range(len(scores)), key=scores.__getitem__)

    def overrules_greedy(self, winner: int) -> bool:
        """Whether the first-token argmax would have started another value than the winner."""
        if winner == len(self.options):
            return any(o.tokens[0] == self.greedy_token for o in self.options)
        return self.greedy_token != self.options[winner].tokens[0]
