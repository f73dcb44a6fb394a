"""`kvx extract` throughput on a quiet CPU and beside a busy process: the ratio must stay >= 40%.

    .venv/bin/python benchmarks/contention.py [--records 32] [--busy-threads N] [--kvx-arg=--threads=2]

Each run is a fresh `kvx extract` subprocess on the first N sample tickets (default model); its
records/s comes from --stats (model load excluded). The "busy" run starts one competing process
first (this script starts it: N threads hashing in a loop, which releases the GIL, so it keeps
N cores busy; default: every core this process may use) and stops it after. Run it alone on the
machine (e.g. under /work/bin/cpu-exclusive): other load makes both figures meaningless.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "samples" / "tickets.jsonl"
SCHEMA = REPO / "schemas" / "ticket.json"
TARGET = 0.40

BUSY = """
import hashlib, sys, threading
block = b"x" * (1 << 20)
def spin():
    while True:
        hashlib.sha256(block).digest()  # releases the GIL: every thread keeps one core busy
for _ in range(int(sys.argv[1])):
    threading.Thread(target=spin, daemon=True).start()
threading.Event().wait()
"""


def run_kvx(src: Path, tmp: Path, extra: list[str], env: dict) -> dict:
    out, stats = tmp / "out.jsonl", tmp / "stats.json"
    cmd = [sys.executable, "-m", "kvx.cli", "extract", str(src), "--schema", str(SCHEMA), "-o", str(out),
           "--stats", str(stats), "-q", *extra]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        sys.exit(f"kvx extract failed (rc {proc.returncode}): {proc.stderr.strip()[-400:]}")
    s = json.loads(stats.read_text())
    return {"records": s["records_done"], "seconds": s["elapsed_s"], "records_per_s": s["records_per_s"]}


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=32, help="sample tickets per run")
    ap.add_argument("--busy-threads", type=int, default=len(os.sched_getaffinity(0)),
                    help="threads of the competing process (default: the cores this process may use)")
    ap.add_argument("--kvx-arg", action="append", default=[], help="extra kvx extract argument (repeatable)")
    args = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    lines = SAMPLES.read_text().splitlines()[: args.records]
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        src = tmp / "in.jsonl"
        src.write_text("\n".join(lines) + "\n")
        run_kvx(src, tmp, args.kvx_arg, env)  # warm-up: caches, page cache
        quiet = run_kvx(src, tmp, args.kvx_arg, env)
        print(f"quiet : {quiet['records']} records in {quiet['seconds']:.1f} s = {quiet['records_per_s']:.3f} records/s",
              flush=True)
        busy_proc = subprocess.Popen([sys.executable, "-c", BUSY, str(args.busy_threads)])
        try:
            time.sleep(1.0)  # let it spin up
            before, t0 = cpu_seconds(busy_proc.pid), time.monotonic()
            busy = run_kvx(src, tmp, args.kvx_arg, env)
            share = (cpu_seconds(busy_proc.pid) - before) / (time.monotonic() - t0)
        finally:
            busy_proc.kill()
            busy_proc.wait()
    ratio = busy["records_per_s"] / quiet["records_per_s"]
    print(f"busy  : {busy['records']} records in {busy['seconds']:.1f} s = {busy['records_per_s']:.3f} records/s "
          f"(competitor: {args.busy_threads} threads, {share:.2f} cores used on average)")
    print(f"ratio : {ratio:.0%} of quiet (target >= {TARGET:.0%}: {'met' if ratio >= TARGET else 'NOT met'}); "
          f"kvx args: {' '.join(args.kvx_arg) or '(defaults)'}")
    print(json.dumps({"quiet": quiet, "busy": busy, "ratio": round(ratio, 3), "busy_threads": args.busy_threads,
                      "competitor_cores": round(share, 2), "kvx_args": args.kvx_arg}))


if __name__ == "__main__":
    main()
