"""When a writer commits buffered rows: after enough rows or enough time, whichever comes first."""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from kvx.errors import KvxError, OutputError


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
    """Rows buffer until the policy says commit; subclasses make one batch durable in _flush.

    A batch that cannot be written (disk full, ...) raises OutputError once; the writer is then
    `failed` and writes nothing more, so closing it after the failure does not fail again."""

    io_errors: tuple[type[BaseException], ...] = (OSError,)  # what _flush raises when the medium fails

    def __init__(self, policy: CommitPolicy, name: str):
        self.policy = policy
        self.name = name  # the output, as messages name it
        self.committed = 0  # rows made durable so far
        self.failed: KvxError | None = None
        self._pending: list = []

    def _buffer(self, item) -> int:
        self._pending.append(item)
        self.policy.note_pending()
        return self.commit() if self.policy.due(len(self._pending)) else 0

    def commit(self) -> int:
        if not self._pending or self.failed is not None:
            return 0
        n = len(self._pending)
        try:
            self._flush(self._pending)
        except self.io_errors as e:
            self._pending = []
            self.failed = self._failure(e)
            raise self.failed from None
        self._pending = []
        self.policy.reset()
        self.committed += n
        return n

    def _failure(self, error: BaseException) -> KvxError:
        reason = getattr(error, "strerror", None) or " ".join(str(error).split())
        return OutputError(f"cannot write {self.name} ({reason}); the {self.committed} rows committed before "
                           f"stay: fix it and rerun with --resume")

    def _flush(self, batch: list) -> None:
        raise NotImplementedError
