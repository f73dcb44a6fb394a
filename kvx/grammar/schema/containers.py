"""What the object and array bodies share: the builder they call back into, and the scopes of the
pieces of one alternative (for unevaluatedProperties/Items)."""
from __future__ import annotations

from typing import Protocol

from kvx.grammar.automata import regex_ast as ra
from kvx.grammar.options import GrammarOptions
from kvx.grammar.schema.applicators import Alternative
from kvx.grammar.schema.keywords import Notes
from kvx.grammar.schema.refs import Document
from kvx.grammar.schema.scalars import Scalars


class Slots(Protocol):
    """What a container body needs from the rule builder."""

    doc: Document
    notes: Notes
    scalars: Scalars
    ws: ra.Node
    opt: GrammarOptions

    def value(self, pointers: tuple, context: tuple) -> ra.Node: ...

    def plain(self, pointers: tuple) -> ra.Node | None: ...

    def member_context(self, context: tuple, key: str | None = None, index: int | None = None,
                       patterns: frozenset[str] = frozenset()) -> tuple: ...

    def key_order(self, context: tuple) -> tuple: ...

    def alternatives(self, pointers: tuple) -> list[Alternative]: ...

    def negation(self, ptr: str) -> str: ...

    def finite_scalars(self, pointers: tuple) -> tuple[str, ...] | None: ...

    def pieces(self, alt: Alternative) -> list[tuple[str, dict]]: ...

    def listed(self, pieces: list) -> list | None: ...


def scopes(alt: Alternative) -> list[list[int]]:
    """For each piece, the pieces whose annotations it sees: itself and those reached through it,
    except across a negation (a piece inside a `not` still sees the pieces inside it)."""
    through: dict[str, set[int]] = {}  # pointer -> the pieces reached through it (openapi 3.1: 40 a body)
    for j, q in enumerate(alt):
        for ptr in q.path[q.seen_from:]:
            through.setdefault(ptr, set()).add(j)
    return [sorted({i} | through.get(p.ptr, set())) for i, p in enumerate(alt)]


class Body:
    """The body of a container rule for one alternative (its pieces all apply)."""

    def __init__(self, slots: Slots, alt: Alternative, context: tuple):
        self.s = slots
        self.alt = alt
        self.context = context  # of the value this body writes (applicators.applicable)
        self.nodes = [slots.doc.at(p.ptr) for p in alt]
        self.scope = scopes(alt)

    def _where(self, i: int) -> str:
        return self.s.notes.where(self.alt[i].ptr)
