"""JSONL output: one row per line, appended, flushed and fsynced per committed batch.

Crash safety: a SIGKILL can leave at most one partial last line. `--resume` cuts the file back to
its last newline (that row was never reported done) and reads the ids of the complete lines.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import BinaryIO

from kvx.errors import ConfigError
from kvx.io.commit_policy import BufferedWriter, CommitPolicy
from kvx.io.records import OutputRow


class JsonlWriter(BufferedWriter):
    def __init__(self, path: str | None, resume: bool = False, policy: CommitPolicy | None = None):
        super().__init__(policy or CommitPolicy())
        self.path = Path(path) if path else None
        self._file: BinaryIO
        if self.path is None:
            self._file = sys.stdout.buffer
        else:
            if resume and self.path.exists():
                truncate_partial_line(self.path)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "ab" if resume else "wb")

    def add(self, row: OutputRow) -> int:
        line = json.dumps(row.to_dict(), ensure_ascii=False, separators=(", ", ": "))
        return self._buffer(line.encode("utf-8") + b"\n")

    def _flush(self, batch: list[bytes]) -> None:
        self._file.write(b"".join(batch))  # whole lines in one write
        self._file.flush()
        if self.path is not None:
            os.fsync(self._file.fileno())

    def close(self) -> int:
        n = self.commit()
        if self.path is not None:
            self._file.close()
        return n


def truncate_partial_line(path: Path) -> None:
    """Drop bytes after the last newline: a line cut by a crash, never reported as done."""
    with open(path, "r+b") as f:
        size = f.seek(0, os.SEEK_END)
        pos, chunk = size, 1 << 16
        while pos > 0:
            start = max(0, pos - chunk)
            f.seek(start)
            data = f.read(pos - start)
            nl = data.rfind(b"\n")
            if nl >= 0:
                end = start + nl + 1
                break
            pos = start
        else:
            end = 0
        if end != size:
            f.truncate(end)
            f.flush()
            os.fsync(f.fileno())


def jsonl_done_ids(path: Path) -> set[str]:
    """Ids already in a kvx JSONL output (after truncate_partial_line)."""
    ids: set[str] = set()
    if not path.exists():
        return ids
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            try:
                ids.add(str(json.loads(raw)["id"]))
            except (ValueError, KeyError, TypeError):
                raise ConfigError(f"{path} line {lineno}: not a kvx output row; cannot --resume from it") from None
    return ids
