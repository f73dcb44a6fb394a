"""The planner on 1M requests: time and memory (issue 21: "1M requests in seconds, bounded memory").

Prompts are generated on the fly (never held together): a 304-token system prompt shared by all
(like `make demo`), 64 tenant contexts of 256 tokens shared by their requests, and 24-88 unique
tokens per request; block size 16. Memory is read from the process's peak RSS before and after.

    python benchmarks/planner_scale.py [--n 1000000] [--replicas 100]
"""
from __future__ import annotations

import argparse
import random
import resource
import time
from array import array

from kvx.cluster.planner import CostModel, plan

BS = 16


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def items(n: int, seed: int = 0):
    rng = random.Random(seed)
    system = array("i", (rng.randrange(49152) for _ in range(304))).tobytes()
    tenants = [array("i", (rng.randrange(49152) for _ in range(256))).tobytes() for _ in range(64)]
    for _ in range(n):
        tail = rng.randrange(24, 89)
        prompt = 304 + 256 + tail
        full = prompt // BS * BS
        yield system + rng.choice(tenants) + rng.randbytes(4 * (full - 560)), prompt, 64.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--replicas", type=int, default=100)
    a = ap.parse_args()
    start = time.perf_counter()
    for _ in items(a.n):  # the generator alone, to subtract
        pass
    generation = time.perf_counter() - start
    before = peak_rss_mib()
    start = time.perf_counter()
    p = plan(items(a.n), a.replicas, BS, 4 * BS, CostModel(1.0, 6.0))
    took = time.perf_counter() - start - generation
    s = p.summary()
    print(f"planned {a.n:,} requests on {a.replicas} replicas in {took:.1f} s "
          f"({took / a.n * 1e6:.1f} us a request; generating the prompts took another {generation:.1f} s)")
    print(f"peak RSS +{peak_rss_mib() - before:.0f} MiB ({(peak_rss_mib() - before) * 2**20 / a.n:.0f} bytes a request); "
          f"groups {s['groups']}, H* {s['ideal_hit_rate']:.4f}, planned H {s['planned_hit_rate']:.4f}, "
          f"load max/mean {s['load_max_over_mean']:.4f}, redundant prefill {s['redundant_prefill_tokens']:,} tokens")


if __name__ == "__main__":
    main()
