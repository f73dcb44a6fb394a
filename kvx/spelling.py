"""Token ids -> the bytes they write (and back), for the token vetoes a request carries
(kvx/copy_check.py, kvx/repeat_guard.py, kvx/code_spans.py).

Pickled with a request for a Ray replica, a Spelling carries its vocabulary's hash only (the ~49k
byte strings stay behind): the replica compiled the same grammar, so it finds them again by hash.
"""
from __future__ import annotations

from typing import Iterable

_TABLES: dict[str, dict[bytes, int]] = {}  # vocabulary hash -> bytes -> token
_WITH: dict[tuple[str, int], list[int]] = {}  # (vocabulary hash, byte) -> the tokens that hold it


class Spelling:
    def __init__(self, token_bytes: list[bytes | None], vocab_hash: str | None = None):
        self.token_bytes = token_bytes
        self.vocab_hash = vocab_hash
        self._ids: dict[bytes, int] | None = None  # bytes -> token, built on first use
        self._with: dict[int, list[int]] = {}  # byte -> the tokens that hold it

    def knows(self, token: int) -> bool:
        return 0 <= token < len(self.token_bytes)

    def of(self, token: int) -> bytes:
        """A token's bytes (b"" for a special token, or one this vocabulary does not have)."""
        return (self.token_bytes[token] or b"") if self.knows(token) else b""

    def __call__(self, ids: Iterable[int]) -> bytes:
        return b"".join(self.of(t) for t in ids)

    def id_of(self, spelt: bytes) -> int | None:
        """The token that writes exactly these bytes (the lowest id where several do), or None."""
        if self._ids is None:
            self._ids = _TABLES.get(self.vocab_hash) if self.vocab_hash is not None else None
            if self._ids is None:
                self._ids = {}
                for t, b in enumerate(self.token_bytes):
                    if b:
                        self._ids.setdefault(b, t)
                if self.vocab_hash is not None:  # once per vocabulary and process, not per request
                    _TABLES[self.vocab_hash] = self._ids
        return self._ids.get(spelt)

    def with_byte(self, byte: int) -> list[int]:
        """The tokens whose bytes hold `byte`."""
        key = (self.vocab_hash, byte)
        hit = self._with.get(byte) or (_WITH.get(key) if self.vocab_hash is not None else None)
        if hit is None:
            hit = [t for t, b in enumerate(self.token_bytes) if b and byte in b]
            if self.vocab_hash is not None:
                _WITH[key] = hit
        self._with[byte] = hit
        return hit

    def __getstate__(self) -> dict:
        state = dict(self.__dict__, _ids=None, _with={})  # tables the other side finds or builds again
        if self.vocab_hash is not None:
            state["token_bytes"] = None
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        if self.token_bytes is None:
            from kvx.grammar.tokens.vocab import known_vocab

            vocab = known_vocab(self.vocab_hash)
            self.token_bytes = vocab.token_bytes if vocab is not None else []  # unknown: spells nothing
