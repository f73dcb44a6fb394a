"""Where finished rows go: straight to the writer, or held until their turn (--ordered)."""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from kvx.io.records import OutputRow
from kvx.io.writers import RowWriter


@dataclass
class RowCounts:
    ok: int = 0
    invalid: int = 0
    error: int = 0

    @property
    def done(self) -> int:
        return self.ok + self.invalid + self.error

    @property
    def failed(self) -> int:
        return self.invalid + self.error


@dataclass
class RowSink:
    writer: RowWriter
    ordered: bool = False
    on_commit: Callable[[int], None] = lambda n: None  # told how many rows became durable
    counts: RowCounts = field(default_factory=RowCounts)
    _turns: deque = field(default_factory=deque)  # input indices in submission order
    _held: dict = field(default_factory=dict)  # index -> finished row waiting for its turn

    def expect(self, index: int) -> None:
        if self.ordered:
            self._turns.append(index)

    def put(self, index: int, row: OutputRow) -> None:
        setattr(self.counts, row.status, getattr(self.counts, row.status) + 1)
        if not self.ordered:
            self._write(row)
            return
        self._held[index] = row
        while self._turns and self._turns[0] in self._held:
            self._write(self._held.pop(self._turns.popleft()))

    def finish(self) -> None:
        """Write what is held (an interrupted --ordered run keeps finished rows) and commit."""
        for index in list(self._turns):
            if index in self._held:
                self._write(self._held.pop(index))
        self._turns.clear()
        self._notify(self.writer.close())

    def _write(self, row: OutputRow) -> None:
        self._notify(self.writer.add(row))

    def _notify(self, n: int) -> None:
        if n:
            self.on_commit(n)
