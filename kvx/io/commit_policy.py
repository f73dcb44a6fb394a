"""When a writer commits buffered rows: after enough rows or enough time, whichever comes first."""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class CommitPolicy:
    max_rows: int = 64
    max_seconds: float = 0.5
    _first_pending: float | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        # KVX_COMMIT_SECONDS: commit at least this often (smaller = less to redo after a crash)
        override = os.environ.get("KVX_COMMIT_SECONDS")
        if override:
            self.max_seconds = float(override)

    def note_pending(self) -> None:
        if self._first_pending is None:
            self._first_pending = time.monotonic()

    def due(self, pending: int) -> bool:
        if pending == 0:
            return False
        waited = time.monotonic() - (self._first_pending or time.monotonic())
        return pending >= self.max_rows or waited >= self.max_seconds

    def reset(self) -> None:
        self._first_pending = None


def fsync_dir(path: Path) -> None:
    """Make a rename or unlink inside `path` durable (POSIX; a no-op where dirs cannot be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class BufferedWriter:
    """Rows buffer until the policy says commit; subclasses make one batch durable in _flush."""

    def __init__(self, policy: CommitPolicy):
        self.policy = policy
        self.committed = 0  # rows made durable so far
        self._pending: list = []

    def _buffer(self, item) -> int:
        self._pending.append(item)
        self.policy.note_pending()
        return self.commit() if self.policy.due(len(self._pending)) else 0

    def commit(self) -> int:
        if not self._pending:
            return 0
        n = len(self._pending)
        self._flush(self._pending)
        self._pending = []
        self.policy.reset()
        self.committed += n
        return n

    def _flush(self, batch: list) -> None:
        raise NotImplementedError
