"""A per-process cache of built automata, dropped whole once its entries' sizes pass a limit.

Automata that recur across rules and schemas (a literal's chain, a character's counter copies) are
kept per process; a compile never waits on an eviction policy, and a long-running process's memory
stays bounded.
"""
from __future__ import annotations

from typing import Generic, Hashable, TypeVar

V = TypeVar("V")


class ProcessCache(Generic[V]):
    def __init__(self, limit: int):
        self.limit = limit  # in the units `keep` is given (entries by default)
        self._entries: dict[Hashable, V] = {}
        self._size = 0

    def get(self, key: Hashable) -> V | None:
        return self._entries.get(key)

    def keep(self, key: Hashable, value: V, size: int = 1) -> V:
        if self._size + size > self.limit:
            self._entries.clear()
            self._size = 0
        self._entries[key] = value
        self._size += size
        return value
