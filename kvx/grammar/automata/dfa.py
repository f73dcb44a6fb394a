"""The byte-level DFA: the hand-off between the schema compiler and the token FSM.

Invariants the compiler guarantees (the token FSM relies on them):
- `trans[s, b]` is the next state on byte b, or -1 (dead);
- every state is reachable from `start` and can reach an accepting state (trimmed), so a walk that
  never hits -1 can always still be completed;
- minimised (no two states with the same future).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class DFA:
    trans: np.ndarray  # [num_states, 256] int32, -1 = dead
    accepting: np.ndarray  # [num_states] bool
    start: int = 0
    # class of each byte [256]: bytes with identical columns share a class (set by the composer,
    # or by cdfa.compact on first use), so later passes need not hash the columns again
    classes: np.ndarray | None = None

    @property
    def num_states(self) -> int:
        return int(self.trans.shape[0])

    def run(self, data: bytes, state: int | None = None) -> int:
        """State after consuming `data` from `state` (default start); -1 if it dies."""
        s = self.start if state is None else state
        for b in data:
            s = int(self.trans[s, b])
            if s < 0:
                return -1
        return s

    def accepts(self, data: bytes) -> bool:
        s = self.run(data)
        return s >= 0 and bool(self.accepting[s])
