"""CPU threads of a run: how many the model's thread pools use, and how idle ones wait.

`--threads N` (default: the cores this process may run on, os.sched_getaffinity) sizes torch's
OpenMP pool; the numba kernels follow torch's count (kvx/kernels/numba_env.py). An idle OpenMP
thread spin-waits for the next kernel, by default up to GOMP_SPINCOUNT=300000 spins (~3 ms). On a
quiet machine that saves a wake-up per kernel; beside a busy process the spinning threads burn the
CPU share the scheduler gives kvx while the thread that has the work waits for a core, and the run
fell to 20-24% of its quiet throughput (benchmarks/contention.py, README "Sharing the CPU"). With
SPIN_COUNT it keeps 43-44%, and the quiet speed within 2%; no spinning at all keeps 55-75% but costs
20-40% on a quiet machine. The user's own OMP_WAIT_POLICY or GOMP_SPINCOUNT wins.
"""
from __future__ import annotations

import os

from kvx.errors import ConfigError

SPIN_COUNT = 1000  # spins (~10 us) an idle OpenMP thread waits before sleeping; see the module doc


def default_threads() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def prepare_threads(threads: int | None) -> int:
    """Set the pools up for `threads` (None: default_threads()); call before torch is imported, as
    OpenMP reads its environment once. Returns the count used."""
    if threads is not None and threads < 1:
        raise ConfigError(f"--threads {threads}: must be at least 1")
    n = threads or default_threads()
    os.environ["OMP_NUM_THREADS"] = str(n)
    if "OMP_WAIT_POLICY" not in os.environ:
        os.environ.setdefault("GOMP_SPINCOUNT", str(SPIN_COUNT))
    import torch

    torch.set_num_threads(n)  # torch may be loaded already (an in-process caller): size it anyway
    return n
