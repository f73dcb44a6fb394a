"""Token ids -> the bytes they write (and back), for the token vetoes a request carries
(kvx/copy_check.py, kvx/repeat_guard.py, kvx/code_spans.py, kvx/digit_guard.py).

Pickled with a request for a Ray replica, a Spelling carries its vocabulary's hash only (the ~49k
byte strings stay behind): the replica compiled the same grammar, so it finds them again by hash.
"""
from __future__ import annotations

from typing import Callable, Hashable, Iterable, TypeVar

T = TypeVar("T")

_SHARED: dict[str, dict] = {}  # vocabulary hash -> the tables built from it (once per process)


class Spelling:
    def __init__(self, token_bytes: list[bytes | None], vocab_hash: str | None = None):
        self.token_bytes = token_bytes
        self.vocab_hash = vocab_hash
        self._own: dict = {}  # the tables of a vocabulary without a hash

    def knows(self, token: int) -> bool:
        return 0 <= token < len(self.token_bytes)

    def of(self, token: int) -> bytes:
        """A token's bytes (b"" for a special token, or one this vocabulary does not have)."""
        return (self.token_bytes[token] or b"") if self.knows(token) else b""

    def __call__(self, ids: Iterable[int]) -> bytes:
        return b"".join(self.of(t) for t in ids)

    def id_of(self, spelt: bytes) -> int | None:
        """The token that writes exactly these bytes (the lowest id where several do), or None."""
        return self._table("ids", self._ids).get(spelt)

    def holding_any(self, wanted: bytes) -> frozenset[int]:
        """The tokens whose bytes hold any of the bytes `wanted` (a guard's quick test per token)."""
        return self._table(("any", wanted), lambda: frozenset(t for t, b in enumerate(self.token_bytes)
                                                               if b and any(x in b for x in wanted)))

    def _ids(self) -> dict[bytes, int]:
        ids: dict[bytes, int] = {}
        for t, b in enumerate(self.token_bytes):
            if b:
                ids.setdefault(b, t)
        return ids

    def _table(self, key: Hashable, build: Callable[[], T]) -> T:
        """A table built once per vocabulary and process, not per request (per Spelling without a hash)."""
        tables = _SHARED.setdefault(self.vocab_hash, {}) if self.vocab_hash is not None else self._own
        if key not in tables:
            tables[key] = build()
        return tables[key]

    def __getstate__(self) -> dict:
        state = dict(self.__dict__, _own={})  # tables the other side finds or builds again
        if self.vocab_hash is not None:
            state["token_bytes"] = None
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        if self.token_bytes is None:
            from kvx.grammar.tokens.vocab import known_vocab

            vocab = known_vocab(self.vocab_hash)
            self.token_bytes = vocab.token_bytes if vocab is not None else []  # unknown: spells nothing
