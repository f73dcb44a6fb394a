"""One run at a time per output: an exclusive lock on `OUT.lock`, held for the whole run.

Two runs appending to one JSONL file (or one parts folder) interleave and lose rows. The lock is
an flock on a small file next to the output holding the holder's pid; the kernel drops it when the
holder exits, even by SIGKILL, so a stale file never blocks a later run. The file is removed on a
clean exit; a run that opened it just before is sent back to open it again (inode check).
"""
from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from kvx.errors import ConfigError


def lock_path(output: Path) -> Path:
    return output.with_name(output.name + ".lock")


@contextmanager
def output_lock(output: str | None) -> Iterator[None]:
    """Hold the lock of `output` (nothing for stdout); ConfigError (exit 2) naming the holder's pid."""
    if output is None or output == "-":
        yield
        return
    path = lock_path(Path(output))
    fd = _acquire(path, output)
    try:
        yield
    finally:
        try:
            path.unlink(missing_ok=True)  # still held: nobody else can be between open and lock
        except OSError:
            pass
        os.close(fd)


def _acquire(path: Path, output: str) -> int:
    while True:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise ConfigError(f"{output}: cannot write there ({e.strerror or e}: {path})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            raise ConfigError(f"{output} is being written by another kvx run (pid {holder}); wait for it to "
                              f"finish or choose another -o") from None
        if _same_file(fd, path):
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            return fd
        os.close(fd)  # the holder removed the file between our open and our lock: open the new one


def _read_pid(fd: int) -> str:
    text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    return text if text.isdigit() else "unknown"


def _same_file(fd: int, path: Path) -> bool:
    try:
        st = path.stat()
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)
