"""One machine, two ways: 1 replica x 2 threads (plain `kvx extract`) against 2 Ray replicas x 1
thread each (`--replicas 2 --replica-cpus 1`), on the 60 samples repeated to 600 records (ids made
unique), default model and options. Prints each run's records/s (the job, as `--stats` counts it)
and its wall time with start-up (model loads, Ray).

    python benchmarks/replicas.py [--copies 10]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--copies", type=int, default=10)
    a = ap.parse_args()
    lines = (REPO / "samples" / "tickets.jsonl").read_text("utf-8").splitlines()
    work = Path(tempfile.mkdtemp(prefix="kvx-replicas-"))
    src = work / "in.jsonl"
    with src.open("w") as f:
        for c in range(a.copies):
            for line in lines:
                rec = json.loads(line)
                rec["id"] = f"{rec['id']}-{c}"
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    n = a.copies * len(lines)
    runs = [("1 replica x 2 threads", []), ("2 replicas x 1 thread", ["--replicas", "2", "--replica-cpus", "1"])]
    rates = {}
    for name, extra in runs:
        stats = work / f"{len(rates)}.json"
        cmd = [sys.executable, "-m", "kvx.cli", "extract", str(src), "--schema", str(REPO / "schemas" / "ticket.json"),
               "-o", str(work / f"{len(rates)}.jsonl"), "--stats", str(stats), "-q", *extra]
        start = time.perf_counter()
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
        wall = time.perf_counter() - start
        if proc.returncode not in (0, 1):
            sys.exit(f"{name}: exit {proc.returncode}: {proc.stderr.strip()[-500:]}")
        s = json.loads(stats.read_text())
        e = s["engine"]
        rates[name] = s["records_per_s"]
        per = ""
        if "replicas" in e:
            per = "; " + ", ".join(f"replica {r['replica']}: {r['requests_done']} records, hit {r['cache_hit_rate']:.1%}, "
                                   f"busy {r['busy_s']:.1f} s" for r in e["replicas"])
        print(f"{name}: {s['records_done']} records ({s['ok']} ok) in {s['elapsed_s']:.1f} s = "
              f"{s['records_per_s']:.2f} records/s, hit {e['cache_hit_rate']:.1%}, "
              f"{e['output_tokens_per_s']:.0f} output tokens/s; wall with start-up {wall:.1f} s{per}")
    first, second = (rates[name] for name, _ in runs)
    print(f"ratio (2 replicas x 1 thread / 1 replica x 2 threads): {second / first:.2f}x, {n} records")


if __name__ == "__main__":
    main()
