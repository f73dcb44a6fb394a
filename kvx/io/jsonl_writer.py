"""JSONL output: one row per line, appended, flushed and fsynced per committed batch.

Crash safety: a SIGKILL can leave at most one partial last line. `--resume` cuts the file back to
its last newline (that row was never reported done) and reads the rows of the complete lines. The
job's fingerprint lives in the sidecar `OUT.kvx.json` (kvx/io/fingerprint.py), written first.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, BinaryIO

from kvx.errors import ConfigError, KvxError, OutputClosed
from kvx.io.commit_policy import BufferedWriter, CommitPolicy
from kvx.io.done_rows import DoneRows
from kvx.io.fingerprint import Fingerprint, read_sidecar, write_sidecar
from kvx.io.records import OutputRow


class JsonlWriter(BufferedWriter):
    def __init__(self, path: str | None, fingerprint: Fingerprint | None = None, resume: bool = False,
                 policy: CommitPolicy | None = None):
        super().__init__(policy or CommitPolicy(), path or "stdout")
        self.path = Path(path) if path else None
        self._file: BinaryIO
        if self.path is None:
            if sys.stdout is None:  # started with stdout closed (`>&-`)
                raise ConfigError("stdout is closed: write the rows to a file with -o FILE")
            self._file = sys.stdout.buffer
            return
        try:
            if resume and self.path.exists():
                truncate_partial_line(self.path)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if fingerprint is not None:
                write_sidecar(self.path, fingerprint)
            self._file = open(self.path, "ab" if resume else "wb")
        except OSError as e:
            raise ConfigError(f"{self.path}: cannot write the output ({e.strerror or e})") from None

    def unfit(self, record: Any) -> str | None:
        return None  # JSON holds every JSON value

    def add(self, row: OutputRow) -> int:
        line = json.dumps(row.to_dict(), ensure_ascii=False, separators=(", ", ": "))
        # a lone surrogate can only sit inside a JSON string, where backslashreplace spells it as the
        # JSON escape it stands for: the line stays valid UTF-8 and reads back the same
        return self._buffer(line.encode("utf-8", "backslashreplace") + b"\n")

    def _flush(self, batch: list[bytes]) -> None:
        self._file.write(b"".join(batch))  # whole lines in one write
        self._file.flush()
        if self.path is not None:
            os.fsync(self._file.fileno())

    def _failure(self, error: BaseException) -> KvxError:
        if self.path is None and isinstance(error, BrokenPipeError):
            return OutputClosed("stdout was closed by the reader")
        return super()._failure(error)

    def close(self) -> int:
        n = self.commit()
        if self.path is not None:
            try:
                self._file.close()
            except OSError:
                if self.failed is None:  # a failed batch may still sit in the file's buffer
                    raise
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


def jsonl_fingerprints(path: Path) -> list[Fingerprint | None]:
    """The fingerprint of the job that wrote `path`: [] when there are no rows to append to."""
    if not path.exists() or path.stat().st_size == 0:
        return []
    return [read_sidecar(path)]


def jsonl_done_rows(path: Path, done: DoneRows) -> None:
    """Add the rows already in a kvx JSONL output (after truncate_partial_line) to `done`."""
    if not path.exists():
        return
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            try:
                row = json.loads(raw)
                done.add(str(row["id"]), row.get("error"))
            except (ValueError, KeyError, TypeError, AttributeError):
                raise ConfigError(f"{path} line {lineno}: not a kvx output row; cannot --resume from it") from None
