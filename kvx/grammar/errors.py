"""Grammar errors: always one line naming the keyword and its JSON pointer."""
from kvx.errors import KvxError


class TooLarge(Exception):
    """An automaton grew past its cap (or the compile ran past its deadline); the compiler turns it
    into UnsupportedSchema naming the place."""


class DeadlinePassed(TooLarge):
    """The compile ran past its deadline (GrammarOptions.compile_deadline)."""


class UnsupportedSchema(KvxError):
    """The schema uses a keyword the automaton cannot enforce (or is itself invalid)."""

    def __init__(self, message: str, keyword: str | None = None, pointer: str = "", option: str | None = None):
        super().__init__(message, option=option)
        self.keyword = keyword
        self.pointer = pointer


def too_large(where: str, why: object, keyword: str | None = None, pointer: str | None = None) -> UnsupportedSchema:
    """The refusal of a schema the automaton cannot hold (state cap, deadline, a count limit):
    `where` as the message shows it, `why` the limit hit; `pointer` defaults to `where`."""
    option = None
    if isinstance(why, DeadlinePassed):  # the one limit a user may raise: the message names how
        why, option = f"{why}; {{option}} allows longer", "compile_deadline"
    return UnsupportedSchema(f"schema too large for the automaton at {where} ({why})", keyword,
                             where if pointer is None else pointer, option=option)
