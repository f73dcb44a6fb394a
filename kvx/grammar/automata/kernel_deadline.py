"""The compiled loops' look at the compile's deadline: numba's object mode calls deadline.passed()
(a few microseconds), so each loop looks only every so much work."""
from __future__ import annotations

from kvx.grammar.automata import deadline
from kvx.grammar.automata.jit import jit, numba


@jit
def deadline_passed():  # pragma: no cover - compiled
    with numba.objmode(late="boolean"):
        late = deadline.passed()
    return late
