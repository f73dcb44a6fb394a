"""CPU threads of a run: how many the model's thread pools use, and how idle ones wait.

`--threads N` (default: the cores this process may run on, os.sched_getaffinity) sizes torch's
OpenMP pool; the numba kernels follow torch's count (kvx/kernels/numba_env.py). An idle OpenMP
thread spin-waits for the next kernel, by default up to GOMP_SPINCOUNT=300000 spins (~3 ms). On a
quiet machine that saves a wake-up per kernel: on the 2-core AMX host with bfloat16 the demo takes
32.0 s spinning so and 44.6 s with 1,000 spins. Beside a busy process the spinning threads burn
the CPU share the scheduler gives kvx while the thread that has the work waits for a core: the run
fell to 20-27% of its quiet throughput (benchmarks/contention.py, README "Sharing the CPU"), and
with SPIN_COUNT spins it keeps 43-84%. So before torch loads, kvx looks at its cores for
QUIET_SAMPLE_S: where other processes keep BUSY_SHARE of them busy (or /proc/stat cannot be read)
idle threads spin SPIN_COUNT times, else libgomp's default stays. The user's own OMP_WAIT_POLICY
or GOMP_SPINCOUNT wins; a process that loaded torch before (an in-process caller) keeps what
OpenMP read then; with `--replicas` above 1 (replicas on one machine share it) the spins are short.
"""
from __future__ import annotations

import os
import sys
import time

from kvx.errors import ConfigError

SPIN_COUNT = 1000  # spins (~10 us) an idle OpenMP thread waits before sleeping beside a busy process
QUIET_SAMPLE_S = 0.1  # how long the cores are watched before choosing
BUSY_SHARE = 0.25  # the share of this process's cores other processes keep busy that counts as shared


def default_threads() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def cpu_times(cores: set[int] | None, path: str = "/proc/stat") -> tuple[int, int]:
    """(all ticks, idle ticks) of `cores` (None: every core) so far, from /proc/stat's cpuN lines."""
    total = idle = 0
    with open(path) as f:
        for line in f:
            if not (line.startswith("cpu") and line[3:4].isdigit()):
                continue
            name, *fields = line.split()
            if cores is not None and int(name[3:]) not in cores:
                continue
            ticks = [int(x) for x in fields[:8]]  # user nice system idle iowait irq softirq steal
            total += sum(ticks)
            idle += ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
    return total, idle


def busy_share(seconds: float = QUIET_SAMPLE_S) -> float | None:
    """The share of this process's cores busy over `seconds` (this process is idle meanwhile, so the
    work is other processes'); None where it cannot be read."""
    try:
        cores = set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = None
    try:
        total0, idle0 = cpu_times(cores)
        time.sleep(seconds)
        total1, idle1 = cpu_times(cores)
    except (OSError, ValueError, IndexError):
        return None
    total = total1 - total0
    return None if total <= 0 else 1 - (idle1 - idle0) / total


def spin_count(busy: float | None) -> int | None:
    """GOMP_SPINCOUNT for a machine whose cores others keep `busy`: short where they are shared or
    unknown, None (libgomp's default) where they are free."""
    return SPIN_COUNT if busy is None or busy >= BUSY_SHARE else None


def prepare_threads(threads: int | None, shared: bool = False) -> int:
    """Set the pools up for `threads` (None: default_threads()); call before torch is imported, as
    OpenMP reads its environment once. `shared`: the cores will be shared (Ray replicas started from
    here inherit the environment): short spins without looking. Returns the count used."""
    if threads is not None and threads < 1:
        raise ConfigError(f"--threads {threads}: must be at least 1")
    n = threads or default_threads()
    os.environ["OMP_NUM_THREADS"] = str(n)
    if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ and "torch" not in sys.modules:
        spins = SPIN_COUNT if shared else spin_count(busy_share())
        if spins is not None:
            os.environ["GOMP_SPINCOUNT"] = str(spins)
    import torch

    torch.set_num_threads(n)  # torch may be loaded already (an in-process caller): size it anyway
    return n
