"""What the numba kernels share: the import with its disk cache, and the thread count.

Compiled kernels are cached under $KVX_CACHE/numba (compiling takes seconds, loading ~1 s). numba's
thread pool follows torch's thread count, set again only when that changes (the call costs ~10 us
and the kernels run several times per layer).
"""
from __future__ import annotations

import os

from kvx.paths import cache_root

_threads_set = 0


def import_numba():
    """The numba module, or None where it is not installed or KVX_NUMBA=0 turns the kernels off."""
    if os.environ.get("KVX_NUMBA", "1") == "0":
        return None
    os.environ.setdefault("NUMBA_CACHE_DIR", str(cache_root() / "numba"))
    try:
        import numba
    except ImportError:
        return None
    return numba


def sync_threads(numba) -> None:
    import torch  # here: the grammar's kernels import this module without needing torch

    global _threads_set
    want = max(1, min(torch.get_num_threads(), numba.config.NUMBA_NUM_THREADS))
    if want != _threads_set:
        numba.set_num_threads(want)
        _threads_set = want
