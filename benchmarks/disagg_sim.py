"""Prefill/decode disaggregation on paper: a step-level simulation of N colocated replicas against
P prefill + D decode replicas with KV transfer, for an offline batch (throughput) and an online
Poisson arrival process (TTFT, inter-token latency p99). Run by cluster_sim.py, or alone:

    python benchmarks/disagg_sim.py

A step costs t0 + prefill tokens x t_prefill + decode rows x t_decode (sim_costs.CALIBRATION, the
engine measured on this CPU). A colocated replica runs the engine's schedule: decode rows first,
then prefill chunks under the 8192-token budget, 128 sequences at most. A prefill replica runs
only prefill chunks and emits the first token; the KV then crosses the link (KV_BYTES per token
at LINK_BYTES_S) to the decode replica with the fewest sequences, which runs decode rows only.
Requests: 1024 computed prompt tokens (after the prefix cache) and 128 output tokens.
"""
from __future__ import annotations

import heapq
import random
from collections import deque
from dataclasses import dataclass, field

from sim_costs import BATCH_ROWS, BATCH_TOKENS, CALIBRATION

KV_BYTES = 30 * 2 * 3 * 64 * 2  # the default model's KV per token, bf16: 23,040 bytes
LINK_BYTES_S = 1.25e9  # a 10 Gb/s link between two CPU boxes
PROMPT, OUTPUT = 1024, 128


@dataclass
class Req:
    arrival: float
    prefill_left: int = PROMPT
    output_left: int = OUTPUT
    last_token: float = 0.0


@dataclass
class Replica:
    role: str  # "both" | "prefill" | "decode"
    waiting: deque = field(default_factory=deque)  # prefill still to do (or KV arrived, for decode)
    running: list = field(default_factory=list)  # decoding
    busy_until: float = 0.0
    stepping: bool = False

    def load(self) -> int:
        return len(self.waiting) + len(self.running)


@dataclass
class Stats:
    ttft: list = field(default_factory=list)
    itl: list = field(default_factory=list)
    done: int = 0
    last: float = 0.0


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else 0.0


def simulate(prefill: int, decode: int, colocated: int, arrivals: list[float]) -> Stats:
    c = CALIBRATION
    reps = [Replica("both") for _ in range(colocated)] + [Replica("prefill") for _ in range(prefill)] + \
           [Replica("decode") for _ in range(decode)]
    entry = [r for r in reps if r.role != "decode"]
    decoders = [r for r in reps if r.role == "decode"]
    stats, events, seq = Stats(), [], 0

    def push(t, kind, payload):
        nonlocal seq
        seq += 1
        heapq.heappush(events, (t, seq, kind, payload))

    for t in arrivals:
        push(t, "arrive", Req(t))

    def kick(r: Replica, now: float) -> None:
        if not r.stepping and (r.waiting or r.running):
            r.stepping = True
            push(now, "step", r)

    while events:
        now, _, kind, x = heapq.heappop(events)
        if kind == "arrive":
            r = min(entry, key=Replica.load)
            r.waiting.append(x)
            kick(r, now)
        elif kind == "kv":  # transferred: joins the least busy decode replica
            r = min(decoders, key=Replica.load)
            r.waiting.append(x)
            kick(r, now)
        elif kind == "step":
            r = x
            rows = r.running if r.role != "prefill" else []
            if r.role == "decode":  # KV arrived: join the batch
                while r.waiting and len(r.running) < BATCH_ROWS:
                    r.running.append(r.waiting.popleft())
                rows = r.running
            budget, chunks = BATCH_TOKENS - len(rows), []
            if r.role != "decode":
                room = BATCH_ROWS - len(rows)
                for q in list(r.waiting)[:room]:
                    if budget <= 0:
                        break
                    take = min(q.prefill_left, budget)
                    chunks.append((q, take))
                    budget -= take
            if not rows and not chunks:
                r.stepping = False
                continue
            end = now + c["t0"] + sum(t for _, t in chunks) * c["t_prefill"] + len(rows) * c["t_decode"]
            push(end, "end", (r, list(rows), chunks))
        else:  # a step ends
            r, rows, chunks = x
            for q in rows:
                stats.itl.append(now - q.last_token)
                q.last_token = now
                q.output_left -= 1
                if q.output_left == 0:
                    r.running.remove(q)
                    stats.done += 1
                    stats.last = now
            for q, take in chunks:
                q.prefill_left -= take
                if q.prefill_left == 0:  # the first token comes out of this step
                    r.waiting.remove(q)
                    stats.ttft.append(now - q.arrival)
                    q.last_token, q.output_left = now, q.output_left - 1
                    if r.role == "both":
                        r.running.append(q)
                    else:
                        push(now + PROMPT * KV_BYTES / LINK_BYTES_S, "kv", q)
            r.stepping = False
            kick(r, now)
    return stats


def configs(n: int) -> list[tuple[str, int, int, int]]:
    return [(f"colocated x{n}", 0, 0, n)] + [(f"{p} prefill + {n - p} decode", p, n - p, 0) for p in range(n // 2, n)]


def main(n: int = 8, offline: int = 4096, online: int = 3000, seed: int = 0) -> None:
    print(f"\n== prefill/decode disaggregation, {n} replicas, {PROMPT} prompt + {OUTPUT} output tokens a request, "
          f"KV {KV_BYTES:,} bytes/token over {LINK_BYTES_S / 1e9:g} GB/s")
    print(f"offline batch of {offline} requests (all at t=0): throughput")
    best = None
    for name, p, d, colo in configs(n):
        s = simulate(p, d, colo, [0.0] * offline)
        rate = s.done / s.last
        best = best or rate
        print(f"  {name:<22} {rate:7.2f} records/s ({rate / best:.2f}x colocated)")
    rng = random.Random(seed)
    capacity = best
    for load in (0.5, 0.8):
        lam, t, arrivals = load * capacity, 0.0, []
        for _ in range(online):
            t += rng.expovariate(lam)
            arrivals.append(t)
        print(f"online: Poisson arrivals at {lam:.1f}/s ({load:.0%} of colocated capacity), {online} requests")
        for name, p, d, colo in configs(n):
            s = simulate(p, d, colo, arrivals)
            print(f"  {name:<22} TTFT p50 {_pct(s.ttft, .5):6.2f} s  p99 {_pct(s.ttft, .99):7.2f} s   "
                  f"inter-token p50 {_pct(s.itl, .5) * 1e3:6.0f} ms  p99 {_pct(s.itl, .99) * 1e3:6.0f} ms   "
                  f"finished {s.done}/{online} by {s.last:.0f} s")


if __name__ == "__main__":
    main()
