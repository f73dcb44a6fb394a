"""SIGKILL `kvx extract` at random points, `--resume` until it finishes, and count what went wrong.

    .venv/bin/python scripts/kill_resume.py [--trials 10] [--records 300] [--format jsonl parquet] [--real]

The input holds duplicate ids, a bad JSON line and a lone-surrogate line besides plain tickets. A
clean run gives the reference rows; then each trial kills a run 1-3 times at a random moment
(uniform over a clean run's duration) and resumes until a run exits by itself. Parquet trials
also try one kill timed to the final merge (when OUT.parquet.tmp appears). Compared with the
reference, as multisets of (id, status, error): rows lost, rows duplicated, and lines/files that
cannot be read. By default the fake engine of the tests runs (the model does not matter to what
is written); --real runs the default model.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "schemas" / "ticket.json"


def make_input(path: Path, n: int) -> None:
    lines = [json.dumps({"id": f"k{i:05d}", "text": f"Ticket {i}: please refund order {i}"}) for i in range(n)]
    lines[5] = lines[3]  # a duplicate id
    lines[7] = '{"id": "bad-json", "text": '
    lines[9] = '{"id": "surrogate", "text": "cut \\ud83d emoji"}'
    path.write_text("\n".join(lines) + "\n")


def env(real: bool) -> dict:
    e = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{REPO / 'tests' / 'cli'}", "KVX_COMMIT_SECONDS": "0.05"}
    if not real:
        e.update(KVX_RUNTIME_FACTORY="kvx_fake_runtime:fake_runtime", KVX_FAKE_DELAY="0.01")
    return e


def start(src: Path, out: Path, resume: bool, real: bool) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "kvx.cli", "extract", str(src), "--schema", str(SCHEMA), "-o", str(out), "-q"]
    return subprocess.Popen(cmd + (["--resume"] if resume else []), cwd=REPO, env=env(real),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def rows(out: Path) -> tuple[list[tuple], int]:
    """(id, status, error) of every row, and how many lines (or files) could not be read."""
    if out.suffix == ".jsonl":
        found, bad = [], 0
        for line in out.read_bytes().split(b"\n"):
            if line:
                try:
                    r = json.loads(line)
                    found.append((r["id"], r["status"], r["error"]))
                except (ValueError, KeyError):
                    bad += 1
        return found, bad
    import pyarrow.parquet as pq

    try:
        t = pq.read_table(out, columns=["id", "status", "error"]).to_pylist()
    except Exception:  # noqa: BLE001 - an unreadable file is what this counts
        return [], 1
    leftovers = out.with_name(out.name + ".parts").exists()
    return [(r["id"], r["status"], r["error"]) for r in t], int(leftovers)


def run_to_end(src: Path, out: Path, real: bool) -> None:
    proc = start(src, out, resume=True, real=real)
    _, err = proc.communicate()
    if proc.returncode not in (0, 1):
        sys.exit(f"resumed run failed (rc {proc.returncode}): {err.decode().strip()[-300:]}")


def kill_at_merge(src: Path, out: Path, real: bool) -> bool:
    """Kill a resumed run as the final merge writes OUT.parquet.tmp; True if it was caught there."""
    proc = start(src, out, resume=out.exists() or out.with_name(out.name + ".parts").exists(), real=real)
    tmp = out.with_name(out.name + ".tmp")
    while proc.poll() is None:
        if tmp.exists():
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            return True
    return False


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=10, help="trials per format")
    ap.add_argument("--records", type=int, default=300)
    ap.add_argument("--format", nargs="+", default=["jsonl", "parquet"])
    ap.add_argument("--real", action="store_true", help="the default model instead of the fake engine")
    ap.add_argument("--seed", type=int, default=19)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        src = tmp / "in.jsonl"
        make_input(src, args.records)
        for fmt in args.format:
            ref_out = tmp / f"ref.{fmt}"
            t0 = time.monotonic()
            start(src, ref_out, resume=False, real=args.real).wait()
            duration = time.monotonic() - t0
            reference = Counter(rows(ref_out)[0])
            kills = merge_kills = lost = duplicated = unreadable = 0
            for trial in range(args.trials):
                out = tmp / f"t{trial}.{fmt}"
                for k in range(rng.randint(1, 3)):
                    proc = start(src, out, resume=k > 0, real=args.real)
                    time.sleep(rng.uniform(0, duration))
                    if proc.poll() is None:
                        proc.send_signal(signal.SIGKILL)
                        kills += 1
                    proc.wait()
                if fmt == "parquet":
                    merge_kills += kill_at_merge(src, out, args.real)
                run_to_end(src, out, args.real)
                found, bad = rows(out)
                got = Counter(found)
                lost += sum((reference - got).values())
                duplicated += sum((got - reference).values())
                unreadable += bad
            print(f"{fmt:8s}: {args.trials} trials, {kills} SIGKILLs at random points + {merge_kills} during the final "
                  f"merge, each followed by --resume: {lost} rows lost, {duplicated} duplicated, {unreadable} unreadable "
                  f"(reference: {sum(reference.values())} rows, a clean run {duration:.1f} s)", flush=True)


if __name__ == "__main__":
    main()
