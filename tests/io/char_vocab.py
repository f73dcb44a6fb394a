"""A vocabulary of one token per character, for the token guards' tests (copy and repeat guards)."""
from kvx.engine.api import TokenVeto
from kvx.spelling import Spelling


class Spell:
    """token id = one character (the tests' vocabulary)."""

    def __init__(self, text: str):
        self.chars = sorted(set(text))
        self.token_bytes = [c.encode() for c in self.chars]
        self.spelling = Spelling(self.token_bytes)

    def ids(self, text: str) -> list[int]:
        return [self.chars.index(c) for c in text]

    def vetoed(self, guard: TokenVeto, output: str, next_char: str) -> bool:
        """Whether guard refuses next_char after output."""
        return guard.vetoes(self.ids(output), self.chars.index(next_char))
