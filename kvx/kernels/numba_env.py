"""What the numba kernels share: the import with its disk cache, and the thread count.

Compiled kernels are cached under $KVX_CACHE/numba/<digest of the kernels' sources> (compiling
takes seconds, loading ~1 s). numba checks a cached function against its own file only: a kernel
that calls one from another file (network_kernel -> subset_kernel) kept running the callee's old
code after a change there alone (a `git pull`, an edit). A folder per version of all the kernel
sources together rules that out; folders of other versions are pruned (the few used last are
kept, for other installs sharing the cache, and any used within the hour). numba's thread pool
follows torch's thread count, set again only when that changes (the call costs ~10 us and the
kernels run several times per layer).
"""
from __future__ import annotations

import hashlib
import os
import shutil
import time
from functools import lru_cache
from pathlib import Path

from kvx.paths import cache_root

PACKAGE = Path(__file__).resolve().parent.parent
# the files holding compiled functions and what they call (relative to kvx/; folders: every .py in them)
KERNEL_SOURCES = ("grammar/automata", "grammar/tokens/token_walk.py", "kernels")
KEEP_OTHER_FOLDERS = 3  # other versions' folders kept, the most recently used first (a few MB each)
IN_USE_FOR_S = 3600  # a folder used this recently may belong to a job still running: never pruned

_threads_set = 0


def import_numba():
    """The numba module, or None where it is not installed or KVX_NUMBA=0 turns the kernels off."""
    if os.environ.get("KVX_NUMBA", "1") == "0":
        return None
    if "NUMBA_CACHE_DIR" not in os.environ:  # a folder the user names is theirs to manage
        folder = cache_root() / "numba" / kernel_sources_digest()
        os.environ["NUMBA_CACHE_DIR"] = str(folder)
        use_folder(folder)
    try:
        import numba
    except ImportError:
        return None
    return numba


@lru_cache(maxsize=1)
def kernel_sources_digest() -> str:
    """A short digest of every kernel source file's bytes (~1 ms for the ~30 files)."""
    h = hashlib.sha1()
    for rel in KERNEL_SOURCES:
        path = PACKAGE / rel
        for f in sorted(path.glob("*.py")) if path.is_dir() else [path]:
            h.update(f.relative_to(PACKAGE).as_posix().encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


def use_folder(folder: Path) -> None:
    """Mark `folder` used now (its mtime) and prune its siblings, other versions' folders, past the
    few used last. Best effort: a read-only or vanished cache only costs a compile."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        os.utime(folder)
        others = sorted((p for p in folder.parent.iterdir() if p.is_dir() and p != folder),
                        key=lambda p: p.stat().st_mtime, reverse=True)
        now = time.time()
        for stale in others[KEEP_OTHER_FOLDERS:]:
            if now - stale.stat().st_mtime > IN_USE_FOR_S:
                shutil.rmtree(stale, ignore_errors=True)
    except OSError:
        pass


def sync_threads(numba) -> None:
    import torch  # here: the grammar's kernels import this module without needing torch

    global _threads_set
    want = max(1, min(torch.get_num_threads(), numba.config.NUMBA_NUM_THREADS))
    if want != _threads_set:
        numba.set_num_threads(want)
        _threads_set = want
