"""The compile deadline: every schema compiles or is refused within a bound (1 s by default).

`within(Deadline(...))` makes a deadline active for the current context; the loops that can grow
(composition, products, subset construction, the schema walk) call `check()`, which raises TooLarge
once it has passed. The default clock is the compiling thread's CPU time: the bound is on our work,
whatever else the machine (or the engine's threads) is doing. The clock is injectable, so tests can
run the mechanism deterministically.
"""
from __future__ import annotations

import contextvars
import time
from contextlib import contextmanager
from typing import Callable

from kvx.grammar.errors import DeadlinePassed


class Deadline:
    def __init__(self, seconds: float, clock: Callable[[], float] = time.thread_time):
        self.seconds = seconds
        self.clock = clock
        self.end = clock() + seconds

    def check(self) -> None:
        if self.clock() > self.end:
            raise DeadlinePassed(f"compile deadline of {self.seconds:g} s passed")


_ACTIVE: contextvars.ContextVar[Deadline | None] = contextvars.ContextVar("kvx_grammar_deadline", default=None)


def active() -> Deadline | None:
    return _ACTIVE.get()


def passed() -> bool:
    """Whether the active deadline (if any) has passed, without raising (the compiled loops read it
    through numba's object mode and stop with a status)."""
    deadline = _ACTIVE.get()
    return deadline is not None and deadline.clock() > deadline.end


def check() -> None:
    """Raise TooLarge if the active deadline (if any) has passed."""
    deadline = _ACTIVE.get()
    if deadline is not None:
        deadline.check()


@contextmanager
def within(deadline: Deadline | None):
    token = _ACTIVE.set(deadline)
    try:
        yield deadline
    finally:
        _ACTIVE.reset(token)
