"""numba for the automata's compiled loops: the import (with kvx's disk cache) and the decorator.

Without numba (or with KVX_NUMBA=0) `numba` is None and `jit` leaves functions as they are: nobody
calls them then (graph_kernels.kernels() is None and the numpy versions run).
"""
from __future__ import annotations

import functools

from kvx.kernels.numba_env import import_numba

numba = import_numba()
# compiled on first call, or loaded from $KVX_CACHE/numba
jit = (lambda fn: fn) if numba is None else functools.partial(numba.njit, cache=True)
