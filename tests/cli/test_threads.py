"""How idle OpenMP threads wait (kvx/cli/threads.py): short spins where other processes keep this
process's cores busy, libgomp's default on free cores; read from /proc/stat."""
import os
import subprocess
import sys

from kvx.cli.threads import BUSY_SHARE, SPIN_COUNT, busy_share, cpu_times, spin_count

STAT = """cpu  900 0 300 5000 100 0 0 0 0 0
cpu0 400 0 100 2500 50 0 0 0 0 0
cpu1 500 0 200 2500 50 0 0 0 0 0
intr 12345
"""


def test_cpu_times_sums_the_cores_asked_for(tmp_path):
    path = tmp_path / "stat"
    path.write_text(STAT)
    assert cpu_times({0}, str(path)) == (3050, 2550)  # idle counts iowait too
    assert cpu_times(None, str(path)) == (6300, 5100)  # every cpuN line, not the summary line
    assert cpu_times({7}, str(path)) == (0, 0)


def test_short_spins_only_where_the_cores_are_shared_or_unknown():
    assert spin_count(0.0) is None and spin_count(BUSY_SHARE / 2) is None
    assert spin_count(BUSY_SHARE) == SPIN_COUNT and spin_count(0.9) == SPIN_COUNT
    assert spin_count(None) == SPIN_COUNT


def test_busy_share_reads_this_machine():
    share = busy_share(0.05)
    assert share is None or 0.0 <= share <= 1.0


def test_the_choice_is_made_before_torch_loads_and_the_users_setting_wins():
    code = ("import os, sys; from kvx.cli.threads import prepare_threads; prepare_threads(1); "
            "print(os.environ.get('GOMP_SPINCOUNT'), os.environ['OMP_NUM_THREADS'])")
    env = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout.split()
    assert out[0] in ("None", str(SPIN_COUNT)) and out[1] == "1"
    shared = code.replace("prepare_threads(1)", "prepare_threads(1, shared=True)")
    out = subprocess.run([sys.executable, "-c", shared], env=env, capture_output=True, text=True, check=True).stdout.split()
    assert out == [str(SPIN_COUNT), "1"]  # replicas on one machine: short spins whatever the sample says
    env["GOMP_SPINCOUNT"] = "777"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout.split()
    assert out == ["777", "1"]
