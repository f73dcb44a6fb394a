"""Discrete-event cluster simulator: routing policies vs kvx's plan + stealing, N replicas.

    python benchmarks/cluster_sim.py [--n 1 8 32 100 128] [--workloads ...] [--no-disagg]

Each replica has an LRU prefix cache of blocks (16 tokens; leaves evicted first, as the engine's
radix cache) of CACHE_BLOCKS, and serves what it holds in prompt order (kvx's token-order
admission, SGLang's longest-prefix-match scheduling); a request costs its computed prompt
tokens and its output tokens at the engine's full-batch rates (CALIBRATION, measured by
benchmarks/calibrate_costs.py). An offline batch goes through an online router as a client would
send it: up to 256 requests in flight per replica, the next one sent when one finishes, each routed
when sent. kvx plans the whole batch (kvx/cluster/planner.py) and replicas pull and steal
(kvx/cluster/work_queues.py), the code `kvx extract --replicas N` runs.

Printed per workload, policy and N: fleet hit rate H (prompt tokens served by a cache), H* (the
workload's ideal: perfect routing, infinite caches), H/H*, makespan, records/s, busy max/mean.
Then the issue's targets, and prefill/decode disaggregation (see disagg_sim.py).
"""
from __future__ import annotations

import argparse
import heapq
import math
import random
import sys
from array import array
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kvx.cluster.planner import CostModel, plan  # noqa: E402
from kvx.cluster.work_queues import WorkGroup, WorkQueues  # noqa: E402

from sim_costs import BATCH_ROWS, BATCH_TOKENS, CALIBRATION  # noqa: E402

BLOCK = 16
CACHE_BLOCKS = 5824  # a 2 GiB bf16 KV pool of the default model (30 layers x 3 KV heads x 64 dims)
IN_FLIGHT = 256  # per replica, for the router policies' client


def rates() -> tuple[float, float]:
    """Seconds per computed prompt token and per output token in full batches."""
    c = CALIBRATION
    return c["t_prefill"] + c["t0"] / BATCH_TOKENS, c["t_decode"] + c["t0"] / BATCH_ROWS


# --- workloads ----------------------------------------------------------------------------------
@dataclass
class Workload:
    name: str
    start: list = field(default_factory=list)  # segment -> token offset where it starts
    tokens: list = field(default_factory=list)  # segment -> its tokens
    paths: list = field(default_factory=list)  # request -> tuple of segments (root first)
    outputs: array = field(default_factory=lambda: array("q"))  # request -> true output tokens
    expected_output: float = 0.0  # what a planner can know: the mean

    def segment(self, parent: int | None, tokens: int) -> int:
        self.start.append(0 if parent is None else self.start[parent] + self.tokens[parent])
        self.tokens.append(tokens)
        return len(self.tokens) - 1

    def add(self, path: tuple, output: int) -> None:
        self.paths.append(path)
        self.outputs.append(output)

    def prompt(self, i: int) -> int:
        last = self.paths[i][-1]
        return self.start[last] + self.tokens[last]

    def blocks(self, s: int) -> int:
        """Full blocks segment s adds (a block across its start belongs to it: only it shares it)."""
        return (self.start[s] + self.tokens[s]) // BLOCK - self.start[s] // BLOCK

    def ideal_hit(self) -> float:
        seen, unique, total = set(), 0, 0
        for i, path in enumerate(self.paths):
            p = self.prompt(i)
            total += p
            unique += p - p // BLOCK * BLOCK  # the partial last block is always computed
            for s in path:
                if s not in seen:
                    seen.add(s)
                    unique += self.blocks(s) * BLOCK
        return 1 - unique / total


def _outputs(rng: random.Random, mean: float, n: int) -> list[int]:
    """Lengths spread like real records' (lognormal, sigma 0.5), 8..4*mean."""
    mu = math.log(mean) - 0.125
    return [int(min(max(rng.lognormvariate(mu, 0.5), 8), 4 * mean)) for _ in range(n)]


def demo(rng: random.Random) -> Workload:
    """`make demo` scaled up: one 304-token system prompt + schema, 40-140-token tickets, ~70 out."""
    w = Workload("one system prompt (demo)", expected_output=70)
    system = w.segment(None, 304)
    for out in _outputs(rng, 70, 12800):
        w.add((system, w.segment(system, rng.randrange(40, 141))), out)
    return w


def gsp(rng: random.Random) -> Workload:
    """SGLang's generated-shared-prefix: G=128 groups x P=64 prompts, S=2048, Q=128, 256 out."""
    w = Workload("generated shared prefix (128 x 64, S 2048, Q 128)", expected_output=256)
    groups = [w.segment(None, 2048) for _ in range(128)]
    for g in groups:
        for out in _outputs(rng, 256, 64):
            w.add((g, w.segment(g, 128)), out)
    return w


def tenants(rng: random.Random) -> Workload:
    """150 tenants x a 6k-token context, 48 queries of 1.2k tokens each, 128 out."""
    w = Workload("multi-tenant (150 x 6k context, 1.2k queries)", expected_output=128)
    for _ in range(150):
        ctx = w.segment(None, 6000)
        for out in _outputs(rng, 128, 48):
            w.add((ctx, w.segment(ctx, 1200)), out)
    return w


def zipf(rng: random.Random) -> Workload:
    """A 256-token system prompt, 2000 documents (512-4096 tokens) drawn by Zipf(1.1), 64-256-token
    questions, 96 out: a few documents are hot, most are cold."""
    w = Workload("Zipf prefixes (2000 docs, s=1.1)", expected_output=96)
    system = w.segment(None, 256)
    docs = [w.segment(system, rng.randrange(512, 4097)) for _ in range(2000)]
    weights = [1 / (k + 1) ** 1.1 for k in range(len(docs))]
    for doc, out in zip(rng.choices(docs, weights, k=16000), _outputs(rng, 96, 16000)):
        w.add((system, doc, w.segment(doc, rng.randrange(64, 257))), out)
    return w


WORKLOADS = {"demo": demo, "gsp": gsp, "tenants": tenants, "zipf": zipf}


# --- a replica's prefix cache -------------------------------------------------------------------
class BlockLRU:
    """Cached blocks per segment, least recently used first; a request touches its leaf first and
    the root last, so a parent is never older than its children and eviction trims leaves first."""

    def __init__(self, capacity: int):
        self.capacity, self.used = capacity, 0
        self.held: OrderedDict[int, int] = OrderedDict()

    def serve(self, w: Workload, i: int) -> int:
        """Blocks of request i's prompt found cached; then its prompt and output blocks are kept."""
        path, hit = w.paths[i], 0
        for s in path:
            have, full = self.held.get(s, 0), w.blocks(s)
            if have < full or s == path[-1]:
                hit += min(have, full)
                break
            hit += full
        leaf = path[-1]
        end = w.prompt(i) + w.outputs[i]
        sizes = {leaf: end // BLOCK - w.start[leaf] // BLOCK}
        for s in reversed(path):
            size = sizes.get(s, w.blocks(s))
            self.used += size - self.held.get(s, 0)
            self.held[s] = size
            self.held.move_to_end(s)
        while self.used > self.capacity:
            s, have = next(iter(self.held.items()))
            cut = min(have, self.used - self.capacity)
            self.used -= cut
            if cut == have:
                del self.held[s]
            else:
                self.held[s] = have - cut
        return hit


# --- routers (online: one request at a time, seeing the replicas' pending counts) ---------------
class Router:
    name = "?"

    def __init__(self, n: int, w: Workload, rng: random.Random):
        self.n, self.w, self.rng = n, w, rng

    def route(self, i: int, pending: list[int]) -> int:
        raise NotImplementedError


class RandomRouter(Router):
    name = "random"

    def route(self, i, pending):
        return self.rng.randrange(self.n)


class RoundRobin(Router):
    name = "round robin"
    turn = -1

    def route(self, i, pending):
        self.turn = (self.turn + 1) % self.n
        return self.turn


class PowerOfTwo(Router):
    name = "power of two"

    def route(self, i, pending):
        a, b = self.rng.randrange(self.n), self.rng.randrange(self.n)
        return a if pending[a] <= pending[b] else b


class PrefixTrees(Router):
    """What SGLang's and Ray Serve's routers keep: per replica, the prompts routed to it (no
    eviction at these sizes: SGLang's tree holds 67M characters, Ray Serve's evicts nothing by
    default), as segment -> replicas that were sent it."""

    def __init__(self, n, w, rng):
        super().__init__(n, w, rng)
        self.owners: dict[int, set] = {}
        self.tree_tokens = [0] * n

    def best_match(self, i: int) -> tuple[float, list[int]]:
        """(matched share of the prompt, replicas with that match) over the request's segments."""
        w, path = self.w, self.w.paths[i]
        for depth in range(len(path) - 1, -1, -1):
            owners = self.owners.get(path[depth])
            if owners:
                s = path[depth]
                return (w.start[s] + w.tokens[s]) / w.prompt(i), sorted(owners)
        return 0.0, []

    def insert(self, i: int, r: int) -> None:
        for s in self.w.paths[i]:
            owners = self.owners.setdefault(s, set())
            if r not in owners:
                owners.add(r)
                self.tree_tokens[r] += self.w.tokens[s]

    def smallest_trees(self) -> list[int]:
        low = min(self.tree_tokens)
        return [r for r in range(self.n) if self.tree_tokens[r] == low]


class SGLangCacheAware(PrefixTrees):
    """SGLang router `cache_aware`, its defaults: cache_threshold 0.3, balance_abs_threshold 64,
    balance_rel_threshold 1.5. Imbalanced (max - min > 64 and max > 1.5 min): shortest queue;
    else the best-matching replica if the match is >= 0.3, else the smallest tree."""

    name = "SGLang cache-aware"

    def route(self, i, pending):
        hi, lo = max(pending), min(pending)
        if hi - lo > 64 and hi > 1.5 * lo:
            r = pending.index(lo)
        else:
            rate, best = self.best_match(i)
            r = best[0] if rate >= 0.3 else min(self.smallest_trees(), key=lambda k: pending[k])
        self.insert(i, r)
        return r


class RayServePrefixAffinity(PrefixTrees):
    """Ray Serve PrefixCacheAffinityRouter, its defaults: imbalanced_threshold 10,
    match_rate_threshold 0.1. Imbalanced (max - min queue > 10): power of two; else the replicas
    with the highest match if it is >= 0.1, else the smallest trees; the shortest queue among them."""

    name = "Ray Serve prefix affinity"

    def route(self, i, pending):
        if max(pending) - min(pending) > 10:
            a, b = self.rng.randrange(self.n), self.rng.randrange(self.n)
            r = a if pending[a] <= pending[b] else b
        else:
            rate, best = self.best_match(i)
            chosen = best if rate >= 0.1 and best else self.smallest_trees()
            r = min(chosen, key=lambda k: pending[k])
        self.insert(i, r)
        return r


ROUTERS = [RandomRouter, RoundRobin, PowerOfTwo, SGLangCacheAware, RayServePrefixAffinity]


# --- the simulation ------------------------------------------------------------------------------
@dataclass
class Outcome:
    policy: str
    n: int
    hit: float
    makespan: float
    busy_ratio: float  # busy time max / mean
    steals: int = 0
    redundant: int = 0

    def throughput(self, requests: int) -> float:
        return requests / self.makespan


class Fleet:
    def __init__(self, w: Workload, n: int):
        self.w, self.n = w, n
        self.caches = [BlockLRU(CACHE_BLOCKS) for _ in range(n)]
        self.busy = [0.0] * n
        self.hit_tokens = 0
        self.t_prompt, self.t_out = rates()

    def service(self, r: int, i: int) -> float:
        hit = self.caches[r].serve(self.w, i) * BLOCK
        self.hit_tokens += hit
        t = (self.w.prompt(i) - hit) * self.t_prompt + self.w.outputs[i] * self.t_out
        self.busy[r] += t
        return t

    def outcome(self, policy: str, makespan: float, **extra) -> Outcome:
        total = sum(self.w.prompt(i) for i in range(len(self.w.paths)))
        mean = sum(self.busy) / self.n
        return Outcome(policy, self.n, self.hit_tokens / total, makespan, max(self.busy) / mean, **extra)


def run_router(w: Workload, n: int, router_cls, order: list[int], seed: int) -> Outcome:
    fleet, router = Fleet(w, n), router_cls(n, w, random.Random(seed))
    # each replica's waiting requests in prompt order (SGLang's longest-prefix-match scheduling,
    # kvx's token-order admission): the routers get an engine that groups what it was sent
    pending, queues, busy = [0] * n, [[] for _ in range(n)], [False] * n
    events: list[tuple[float, int]] = []  # (time a replica's request finishes, replica)
    feed = iter(order)

    def send(now: float) -> None:
        i = next(feed, None)
        if i is None:
            return
        r = router.route(i, pending)
        pending[r] += 1
        heapq.heappush(queues[r], (w.paths[i], i))
        if not busy[r]:
            start(r, now)

    def start(r: int, now: float) -> None:
        _, i = heapq.heappop(queues[r])
        busy[r] = True
        heapq.heappush(events, (now + fleet.service(r, i), r))

    for _ in range(min(IN_FLIGHT * n, len(order))):
        send(0.0)
    now = 0.0
    while events:
        now, r = heapq.heappop(events)
        busy[r] = False
        pending[r] -= 1
        if queues[r]:
            start(r, now)
        send(now)
    return fleet.outcome(router_cls.name, now)


def run_kvx(w: Workload, n: int, order: list[int], seed: int) -> Outcome:
    """The plan over the batch in input order, then replicas pull their groups and steal."""
    unit_keys = {}

    def key(i: int) -> bytes:
        parts = []
        for s in w.paths[i]:
            if s not in unit_keys:
                unit_keys[s] = array("q", ((s << 24) | b for b in range(w.blocks(s)))).tobytes()
            parts.append(unit_keys[s])
        return b"".join(parts)

    t_prompt, t_out = rates()
    items = ((key(i), w.prompt(i), w.expected_output) for i in order)
    p = plan(items, n, BLOCK, 8, CostModel(t_prompt, t_out))
    queues = WorkQueues(n, seed)
    for g in p.groups:
        queues.add(g.replica, WorkGroup(deque(order[k] for k in p.members(g)), g.cost))
    fleet, events, now = Fleet(w, n), [], 0.0
    for r in range(n):
        for i in queues.take(r, 1):
            heapq.heappush(events, (fleet.service(r, i), r))
    while events:
        now, r = heapq.heappop(events)
        for i in queues.take(r, 1):
            heapq.heappush(events, (now + fleet.service(r, i), r))
    return fleet.outcome("kvx plan + stealing", now, steals=queues.steals, redundant=p.redundant_tokens)


def simulate(w: Workload, n: int, seed: int) -> list[Outcome]:
    order = list(range(len(w.paths)))
    random.Random(seed).shuffle(order)  # the input file's order: no help from it
    return [run_router(w, n, cls, order, seed) for cls in ROUTERS] + [run_kvx(w, n, order, seed)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, nargs="+", default=[1, 8, 32, 100, 128])
    ap.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=list(WORKLOADS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-disagg", action="store_true")
    a = ap.parse_args()
    tp, to = rates()
    print(f"cost model: {tp * 1e3:.4f} ms per computed prompt token, {to * 1e3:.3f} ms per output token "
          f"(CALIBRATION {CALIBRATION}); cache {CACHE_BLOCKS} blocks of {BLOCK} tokens per replica")
    checks = []
    for name in a.workloads:
        w = WORKLOADS[name](random.Random(a.seed))
        ideal = w.ideal_hit()
        print(f"\n== {w.name}: {len(w.paths):,} requests, H* = {ideal:.4f}")
        print(f"{'N':>4}  {'policy':<26} {'H':>7} {'H/H*':>6} {'makespan s':>11} {'records/s':>10} {'busy max/mean':>13}  notes")
        for n in a.n:
            outcomes = simulate(w, n, a.seed)
            for o in outcomes:
                note = f"steals {o.steals}, recomputed {o.redundant:,} tokens" if o.policy.startswith("kvx") else ""
                print(f"{n:>4}  {o.policy:<26} {o.hit:>7.4f} {o.hit / ideal:>6.3f} {o.makespan:>11.1f} "
                      f"{o.throughput(len(w.paths)):>10.2f} {o.busy_ratio:>13.3f}  {note}")
            if n == 100:
                checks.append((name, w, ideal, {o.policy: o for o in outcomes}))
    print_targets(checks)
    if not a.no_disagg:
        from disagg_sim import main as disagg

        disagg()


def print_targets(checks) -> None:
    if not checks:
        return
    print("\n== targets at N = 100")
    for name, w, ideal, by in checks:
        k = by["kvx plan + stealing"]
        speed = by["random"].makespan / k.makespan
        ok = k.hit / ideal >= 0.95 and k.busy_ratio <= 1.1
        print(f"{name:>8}: kvx H/H* {k.hit / ideal:.3f} (>= 0.95), busy max/mean {k.busy_ratio:.3f} (<= 1.1): "
              f"{'met' if ok else 'NOT met'}; throughput {speed:.2f}x random's")
        for peer in ("SGLang cache-aware", "Ray Serve prefix affinity"):
            o = by[peer]
            print(f"{'':>10}vs {peer}: H {k.hit:.4f} vs {o.hit:.4f}, makespan {k.makespan:.1f} vs {o.makespan:.1f} s "
                  f"({o.makespan / k.makespan:.2f}x)")


if __name__ == "__main__":
    main()
