"""The compile deadline: every schema compiles or is refused within a bound (1 s by default).

`within(Deadline(...))` makes a deadline active for the current context; the loops that can grow
(composition, products, subset construction, the schema walk) call `check()`, which raises TooLarge
once it has passed. The default clock is the compiling thread's CPU time: the bound is on our work,
whatever else the machine (or the engine's threads) is doing. The clock is injectable, so tests can
run the mechanism deterministically.
"""
from __future__ import annotations

import contextvars
import math
import time
from contextlib import contextmanager
from typing import Callable

from kvx.grammar.errors import DeadlinePassed, TooLarge


class Deadline:
    def __init__(self, seconds: float, clock: Callable[[], float] = time.thread_time):
        self.seconds = seconds
        self.clock = clock
        self._since = clock()
        self.end = self._since + seconds
        # a thread's CPU time grows no faster than the wall clock, so while the wall time since the start
        # cannot have taken it past `end`, its own clock need not be read (a thread_time call is a
        # system call, ~0.6 us; a compile looks a few hundred times)
        self._wall_since = time.perf_counter() if clock is time.thread_time else -math.inf

    def passed(self) -> bool:
        return self._since + (time.perf_counter() - self._wall_since) > self.end and self.clock() > self.end

    def check(self) -> None:
        if self.passed():
            raise DeadlinePassed(f"compile deadline of {self.seconds:g} s passed")


_ACTIVE: contextvars.ContextVar[Deadline | None] = contextvars.ContextVar("kvx_grammar_deadline", default=None)


def active() -> Deadline | None:
    return _ACTIVE.get()


def passed() -> bool:
    """Whether the active deadline (if any) has passed, without raising (the compiled loops read it
    through numba's object mode and stop with a status)."""
    deadline = _ACTIVE.get()
    return deadline is not None and deadline.passed()


def check() -> None:
    """Raise TooLarge if the active deadline (if any) has passed."""
    deadline = _ACTIVE.get()
    if deadline is not None:
        deadline.check()


def raise_for_stop(status: int, max_states: int, counted: str = "DFA states") -> None:
    """A compiled loop's stop as the error it stands for: -2 the deadline (DeadlinePassed), any other
    negative status the state cap (TooLarge: more than `max_states` of what the cap counts); nothing
    for the rest."""
    if status == -2:
        check()
    if status < 0:
        raise TooLarge(f"more than {max_states} {counted}")


@contextmanager
def within(deadline: Deadline | None):
    token = _ACTIVE.set(deadline)
    try:
        yield deadline
    finally:
        _ACTIVE.reset(token)
