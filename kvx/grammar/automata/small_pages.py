"""Ordinary memory pages for a compile's arrays.

numpy asks the kernel for transparent huge pages on every array of 4 MB or more (madvise). Where
the kernel makes huge pages on demand (defrag=madvise, a common default), such an allocation can
stall while it compacts memory: a 113,448-state program's 116 MB byte table took 0.17-1.7 s to fill
in a process's first compile and 40 ms in later ones, sending schemas a second past the compile
deadline. With ordinary pages it takes 70-110 ms every time (measured on 2 cores, 2026-12-06).
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

try:
    from numpy._core.multiarray import _set_madvise_hugepage
except ImportError:  # numpy 1.x
    from numpy.core.multiarray import _set_madvise_hugepage


@contextmanager
def small_pages() -> Iterator[None]:
    """numpy's huge-page advice off for the scope (process-wide: numpy has one switch), then back."""
    was = _set_madvise_hugepage(False)
    try:
        yield
    finally:
        _set_madvise_hugepage(was)
