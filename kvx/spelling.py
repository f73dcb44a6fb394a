"""Token ids -> the bytes they write, for the token vetoes a request carries (kvx/copy_check.py,
kvx/repeat_guard.py).

Pickled with a request for a Ray replica, a Spelling carries its vocabulary's hash only (the ~49k
byte strings stay behind): the replica compiled the same grammar, so it finds them again by hash.
"""
from __future__ import annotations

from typing import Iterable


class Spelling:
    def __init__(self, token_bytes: list[bytes | None], vocab_hash: str | None = None):
        self.token_bytes = token_bytes
        self.vocab_hash = vocab_hash

    def knows(self, token: int) -> bool:
        return 0 <= token < len(self.token_bytes)

    def of(self, token: int) -> bytes:
        """A token's bytes (b"" for a special token, or one this vocabulary does not have)."""
        return (self.token_bytes[token] or b"") if self.knows(token) else b""

    def __call__(self, ids: Iterable[int]) -> bytes:
        return b"".join(self.of(t) for t in ids)

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        if self.vocab_hash is not None:
            state["token_bytes"] = None
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        if self.token_bytes is None:
            from kvx.grammar.tokens.vocab import known_vocab

            vocab = known_vocab(self.vocab_hash)
            self.token_bytes = vocab.token_bytes if vocab is not None else []  # unknown: spells nothing
