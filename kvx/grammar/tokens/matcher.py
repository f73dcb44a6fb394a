"""One sequence's position in a grammar: which tokens may come next, and the length budget.

The budget counts every advance() (EOS included) against max_tokens. A non-EOS token is allowed
only if, after it, the remaining tokens still suffice to reach an accepting state and emit EOS, so
a tight budget still yields complete JSON. If the budget is already too small at construction the
matcher steers along the shortest completion instead of dead-ending.
"""
from __future__ import annotations

import copy

import torch

from kvx.grammar.tokens.choices import ValueChoice, value_choice
from kvx.grammar.tokens.stacks import TokenPDA


class DisallowedToken(ValueError):
    """advance() got a token the mask forbids (an engine bug, not a user error)."""


class Matcher:
    def __init__(self, pda: TokenPDA, max_tokens: int | None = None):
        self.pda = pda
        self.state = pda.start  # a configuration id (kvx/grammar/tokens/stacks.py)
        self.max_tokens = max_tokens
        self.num_advanced = 0
        self.finished = False  # EOS consumed
        self._eos = set(pda.vocab.eos_ids)
        self._empty = torch.zeros(pda.vocab.vocab_size, dtype=torch.bool)

    def _max_next_dist(self, state: int | None = None, used: int = 0) -> int | None:
        """Largest allowed dist of the next configuration under the budget (None: unlimited)."""
        if self.max_tokens is None:
            return None
        state = self.state if state is None else state
        left = self.max_tokens - self.num_advanced - used
        # after this token (1) and the rest of the path (dist) there must be room for EOS (1)
        return max(left - 2, self.pda.dist(state) - 1)

    def allowed_mask(self) -> torch.Tensor:
        """Bool [vocab_size]; a cached tensor shared between calls: callers must not modify it."""
        if self.finished:
            return self._empty
        return self.pda.mask(self.state, self._max_next_dist())

    def is_allowed(self, token_id: int) -> bool:
        if self.finished:
            return False
        if token_id in self._eos:
            return self.pda.accepting(self.state)
        nxt = self.pda.next(self.state, token_id)
        if nxt < 0:
            return False
        limit = self._max_next_dist()
        return limit is None or self.pda.dist(nxt) <= limit

    def advance(self, token_id: int) -> None:
        if not self.is_allowed(token_id):
            raise DisallowedToken(f"token {token_id} is not allowed in grammar state {self.state}")
        self.num_advanced += 1
        if token_id in self._eos:
            self.finished = True
        else:
            self.state = self.pda.next(self.state, token_id)

    def fork(self) -> "Matcher":
        """An independent copy at the same position (speculation walks a draft on one)."""
        return copy.copy(self)  # the state is plain ints; the automaton and the cached masks are shared

    def forced_tokens(self) -> list[int]:
        """Tokens the grammar forces next (keys, punctuation, the rest of an enum value); pure.

        Cut short where a forced token would not fit the length budget (sampling takes over)."""
        if self.finished:
            return []
        tokens = self.pda.forced_tokens(self.state)
        if self.max_tokens is None:
            return list(tokens)
        out, state = [], self.state
        for tid in tokens:
            nxt = self.pda.next(state, tid)
            if self.pda.dist(nxt) > self._max_next_dist(state, len(out)):
                break
            out.append(tid)
            state = nxt
        return out

    def complete_values(self) -> ValueChoice | None:
        """The complete values allowed next when they are a small closed set (an enum, true/false,
        null against an open value, ...; see kvx/grammar/tokens/choices.py), or None. Values the
        length budget cannot fit are left out, and so is the open value if none of its tokens fits."""
        choice = None if self.finished else value_choice(self.pda, self.state)
        if choice is None or self.max_tokens is None:
            return choice
        options = tuple(o for o in choice.options if self._fits(o.tokens))
        open_mask = choice.open_mask
        if open_mask is not None:
            open_mask = open_mask & self.allowed_mask()
            open_mask = open_mask if bool(open_mask.any()) else None
        if len(options) + (open_mask is not None) < 2:
            return None
        return ValueChoice(choice.key, options, open_mask)

    def _fits(self, tokens: tuple[int, ...]) -> bool:
        walk = self.fork()
        for t in tokens:
            if not walk.is_allowed(t):
                return False
            walk.advance(t)
        return True

    def is_accepting(self) -> bool:
        """The text so far is a complete document (EOS would be accepted)."""
        return self.finished or self.pda.accepting(self.state)

    def is_finished(self) -> bool:
        return self.finished

    def min_tokens_to_finish(self) -> int:
        """Fewest further advance() calls to end the document, the EOS token included."""
        if self.finished:
            return 0
        return self.pda.dist(self.state) + 1
