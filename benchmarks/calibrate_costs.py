"""Measure the engine's step cost model for the cluster simulator (benchmarks/cluster_sim.py).

A step costs  t0 + prefill_tokens * t_prefill + decode_rows * t_decode  (a fixed part that reads
every weight once, then per-token parts). Three runs of the default model fit it:
  (a) 1 sequence decoding 64 tokens          -> t0 + t_decode per step
  (b) 128 sequences decoding 64 tokens each  -> t0 + 128 t_decode per step
  (c) 16 unique 512-token prompts, 1 token   -> prefill steps of up to 8192 tokens
Speculation is off (one token a step). Prints the three constants for cluster_sim.py's CALIBRATION.

    python benchmarks/calibrate_costs.py [--dtype auto]
"""
from __future__ import annotations

import argparse
import random
import time

from kvx.engine import Engine, EngineConfig, Request, SamplingParams
from kvx.models import load_model


def timed(engine: Engine, requests: list[Request]) -> tuple[float, int]:
    start = time.perf_counter()
    for _ in engine.generate(requests):
        pass
    if engine.cache is not None:
        engine.cache.clear()
    return time.perf_counter() - start, engine.metrics.steps


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtype", default="auto")
    a = ap.parse_args()
    loaded = load_model("smollm2-135m", dtype=a.dtype)
    engine = Engine(loaded, EngineConfig(kv_memory=2 << 30, speculative_tokens=0, batch_tokens=8192, max_seqs=128))
    rng = random.Random(0)

    def prompts(n: int, length: int) -> list[list[int]]:
        return [[rng.randrange(100, 40000) for _ in range(length)] for _ in range(n)]

    decode = SamplingParams(max_tokens=64, ignore_eos=True)
    timed(engine, [Request("warm", prompts(1, 32)[0], decode)])
    t1, s1 = timed(engine, [Request("one", prompts(1, 32)[0], decode)])
    tb, sb = timed(engine, [Request(f"b{i}", p, decode) for i, p in enumerate(prompts(128, 32))])
    tp, sp = timed(engine, [Request(f"p{i}", p, SamplingParams(max_tokens=1)) for i, p in enumerate(prompts(16, 512))])
    step1, stepb = t1 / s1, tb / sb  # (b) includes one prefill step of 4096 tokens: small against 64 steps
    t_decode = (stepb - step1) / 127
    t0 = step1 - t_decode
    t_prefill = (tp - sp * t0) / (16 * 512)
    print(f"dtype {loaded.dtype}: batch-1 step {step1 * 1e3:.1f} ms ({s1} steps), batch-128 step {stepb * 1e3:.1f} ms "
          f"({sb} steps), prefill 8192 tokens in {tp:.2f} s ({sp} steps)")
    print(f"CALIBRATION: t0 = {t0 * 1e3:.2f} ms, t_decode = {t_decode * 1e3:.3f} ms/row, "
          f"t_prefill = {t_prefill * 1e3:.4f} ms/token")
    print(f"full-batch rates: decode {128 / stepb:.0f} tokens/s, prefill {1 / (t_prefill + t0 / 8192):.0f} tokens/s")


if __name__ == "__main__":
    main()
