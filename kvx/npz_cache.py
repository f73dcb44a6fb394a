"""Cache entries as .npz files under $KVX_CACHE: written whole or not at all (temp file + rename; a
read-only or full cache only costs time), and an unreadable or foreign entry deleted so it is rebuilt."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Callable, TypeVar

import numpy as np

T = TypeVar("T")


def read_entry(path: Path, build: Callable[[np.lib.npyio.NpzFile], T]) -> T | None:
    """build(arrays) for the entry at `path` (it raises on a foreign entry), or None (absent, or
    dropped as unreadable)."""
    try:
        with np.load(path, allow_pickle=False) as data:
            return build(data)
    except FileNotFoundError:
        return None
    except Exception:  # corrupt or foreign: drop it and rebuild
        path.unlink(missing_ok=True)
        return None


def write_entry(path: Path, **arrays: np.ndarray) -> None:
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
        os.replace(tmp, path)
    except OSError:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
