"""The driver's side of `kvx extract --replicas N`: an engine-shaped object over N Ray actors.

`FleetEngine.generate(requests)` has the contract of `Engine.generate`, so the job around it
(validation, retries, rows, --resume, crash safety) runs unchanged and the driver stays the one
writer. It pulls a window of requests, plans it (planner.py), feeds each replica from its queue
(work_queues.py: own groups first, then stealing), and yields results as replicas return them.
A replica that dies has its unfinished requests re-queued on the others; a result is yielded only
for a request still in flight, so nothing is lost or written twice.
"""
from __future__ import annotations

import itertools
import time
from array import array
from collections import deque
from dataclasses import dataclass, field
from typing import Iterable, Iterator

from kvx.cluster.planner import CostModel, plan, token_key
from kvx.cluster.replica import ReplicaReport, WireRequest
from kvx.cluster.work_queues import WorkGroup, WorkQueues
from kvx.engine.api import EngineConfig, Request, Result
from kvx.errors import KvxError
from kvx.metrics import ADDING_UP

WAIT_S = 0.5  # how long one exchange waits for a result before coming back


class FleetError(KvxError):
    """Every replica is gone: the finished rows are kept, the rest is left for --resume."""


@dataclass(frozen=True)
class FleetSettings:
    block_size: int = EngineConfig.block_size  # the replicas' engines' (the plan keys prompts by their blocks)
    window: int = 65536  # requests planned together (memory stays bounded by it)
    lookahead: int = 256  # requests kept on each replica (its running batch + waiting queue)
    steal_below: int = 128  # a replica steals only when it holds fewer (its batch is about to thin)
    groups_per_replica: int = 8
    # a generated token costs ~1.5 computed prompt tokens in full batches on the CPU engine
    # (benchmarks/calibrate_costs.py: 0.81 vs 0.53 ms; docs/cluster.md)
    cost: CostModel = CostModel(prefill_token=1.0, decode_token=1.5)


@dataclass
class FleetMetrics:
    replicas: int
    queues: WorkQueues
    started: float = field(default_factory=time.perf_counter)
    figures: dict = field(default_factory=dict)  # replica -> its latest report's figures
    lost: list = field(default_factory=list)  # [replica, reason]
    requeued: int = 0
    plans: list = field(default_factory=list)  # one summary per planned window

    def snapshot(self) -> dict:
        """Fleet totals under the engine's keys (the progress line reads them) + each replica."""
        engines = [f["engine"] for f in self.figures.values()]
        total = {k: sum(e.get(k, 0) for e in engines) for k in ADDING_UP}
        elapsed = max(time.perf_counter() - self.started, 1e-9)
        busy = [f["busy_s"] for f in self.figures.values()]
        mean_busy = sum(busy) / len(busy) if busy else 0.0
        q = self.queues
        return {
            **total,
            "elapsed_s": round(elapsed, 3),
            "cache_hit_rate": total["cached_prompt_tokens"] / total["prompt_tokens"] if total["prompt_tokens"] else 0.0,
            "output_tokens_per_s": total["generated_tokens"] / elapsed,
            "batch_utilisation": _mean(e.get("batch_utilisation", 0.0) for e in engines),
            "kv_pool_pressure": max((e.get("kv_pool_pressure", 0.0) for e in engines), default=0.0),
            "peak_kv_pool_pressure": max((e.get("peak_kv_pool_pressure", 0.0) for e in engines), default=0.0),
            "fleet": {
                "replicas": self.replicas,
                "live": self.replicas - len(self.lost),
                "lost": self.lost,
                "requeued_requests": self.requeued,
                "steals": q.steals,
                "stolen_requests": q.stolen_requests,
                "busy_max_over_mean": round(max(busy) / mean_busy, 3) if mean_busy else 1.0,
                "plans": self.plans,
            },
            "replicas": [self._replica(r) for r in sorted(self.figures)],
        }

    def _replica(self, r: int) -> dict:
        f = self.figures[r]
        e = f["engine"]
        return {"replica": r, "requests_done": f["requests_done"], "busy_s": f["busy_s"],
                "cache_hit_rate": round(e.get("cache_hit_rate", 0.0), 4),
                "output_tokens_per_s": round(e.get("generated_tokens", 0) / f["busy_s"], 1) if f["busy_s"] else 0.0,
                "engine": e}


def _mean(values) -> float:
    values = list(values)
    return sum(values) / len(values) if values else 0.0


class FleetEngine:
    def __init__(self, actors: list, settings: FleetSettings, ray_module):
        self.actors, self.settings, self.ray = actors, settings, ray_module
        self.queues = WorkQueues(len(actors))
        self.metrics = FleetMetrics(len(actors), queues=self.queues)
        self._inflight: dict[int, Request] = {}  # key -> request not answered yet
        self._sent: list[set[int]] = [set() for _ in actors]  # keys each replica holds
        self._keys = itertools.count()
        self._out_tokens, self._out_seen = 0, 0  # running mean of output length, for the plan

    def generate(self, requests: Iterable[Request], reset_metrics: bool = True) -> Iterator[Result]:
        """Engine.generate's contract over the replicas (their figures always add up over a job:
        `reset_metrics` is accepted for the contract and has nothing to reset)."""
        source = iter(requests)
        exhausted = False
        calls: dict = {}  # pending exchange -> replica
        while True:
            if not exhausted and self.queues.requests() < self.settings.lookahead * len(self.queues.live):
                exhausted = self._plan_window(source)
            for r, batch in self._feed(set(calls.values())).items():
                self._sent[r].update(batch)
                calls[self.actors[r].exchange.remote([self._wire(k) for k in batch], WAIT_S)] = r
            if not calls:
                if exhausted or not self.queues.live:
                    return
                continue
            ready, _ = self.ray.wait(list(calls), num_returns=1)
            for ref in ready:
                r = calls.pop(ref)
                report = self._report(r, ref)
                if report is None:
                    continue
                yield from self._results(r, report)
                if report.failure is not None:
                    self._lose(r, report.failure)

    def _feed(self, waiting: set[int]) -> dict[int, list[int]]:
        """New requests for each replica not waiting on a call: every replica from its own queue
        first, then those about to run dry steal (so none robs a queue its owner has not drawn on)."""
        s, batches = self.settings, {}
        free = [r for r in sorted(self.queues.live) if r not in waiting]
        for r in free:
            batches[r] = self.queues.take(r, max(s.lookahead - len(self._sent[r]), 0), steal=False)
        for r in free:
            held = len(self._sent[r]) + len(batches[r])
            if held < s.steal_below:
                batches[r] += self.queues.take(r, s.lookahead - held)
        return {r: b for r, b in batches.items() if b or self._sent[r]}

    def _plan_window(self, source: Iterator[Request]) -> bool:
        """Plan the next window of requests onto the live replicas; True when the source ended."""
        window = list(itertools.islice(source, self.settings.window))
        if not window:
            return True
        s, live = self.settings, sorted(self.queues.live)
        keys = [next(self._keys) for _ in window]
        for k, req in zip(keys, window):
            self._inflight[k] = req
        items = ((token_key(r.prompt_ids, s.block_size), len(r.prompt_ids), self._expected_output(r)) for r in window)
        p = plan(items, len(live), s.block_size, 4 * s.block_size, s.cost, s.groups_per_replica)
        for g in p.groups:
            self.queues.add(live[g.replica], WorkGroup(deque(keys[i] for i in p.members(g)), g.cost))
        self.metrics.plans.append(p.summary())
        return len(window) < s.window

    def _expected_output(self, req: Request) -> float:
        """Output tokens the plan counts on: the mean so far, half the limit before any result."""
        cap = req.sampling.max_tokens
        return min(cap, self._out_tokens / self._out_seen) if self._out_seen else cap / 2

    def _estimate(self, req: Request) -> float:
        return self.settings.cost.of(len(req.prompt_ids), self._expected_output(req))

    def _wire(self, key: int) -> WireRequest:
        req = self._inflight[key]
        budget = req.sampling.max_tokens if req.constraint is not None else None
        return WireRequest(key, array("i", req.prompt_ids), req.sampling, budget, req.choice_hook, req.token_veto)

    def _report(self, r: int, ref) -> ReplicaReport | None:
        try:
            report = self.ray.get(ref)
        except self.ray.exceptions.RayError as e:  # the actor died (killed, crashed, node lost)
            self._lose(r, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
            return None
        self.metrics.figures[r] = report.figures
        return report

    def _results(self, r: int, report: ReplicaReport) -> Iterator[Result]:
        for w in report.results:
            req = self._inflight.pop(w.key, None)
            self._sent[r].discard(w.key)
            if req is None:  # answered already (a replica declared lost came back): never twice
                continue
            self._out_tokens += w.usage.generated_tokens
            self._out_seen += 1
            yield Result(req.id, w.token_ids, w.text, w.finish_reason, w.usage, w.error, req.user_data, w.choices,
                         w.prompt_logprob)

    def _lose(self, r: int, reason: str) -> None:
        """Re-queue what replica r held, then hand its queue to the others."""
        if r not in self.queues.live:
            return
        self.metrics.lost.append([r, reason])
        self.queues.remove(r)
        held = [k for k in sorted(self._sent[r]) if k in self._inflight]
        self._sent[r].clear()
        self.metrics.requeued += len(held)
        if not self.queues.live:
            raise FleetError(f"all {len(self.actors)} replicas are gone (last: {reason}); "
                             "finished rows are kept, rerun with --resume")
        if held:
            cost = sum(self._estimate(self._inflight[k]) for k in held)
            self.queues.add(self.queues.least_loaded(), WorkGroup(deque(held), cost), front=True)
        try:
            self.ray.kill(self.actors[r])
        except Exception:  # noqa: BLE001 - it is gone already
            pass

    def close(self) -> None:
        kill_actors(self.ray, self.actors)


def kill_actors(ray, actors) -> None:
    for actor in actors:
        try:
            ray.kill(actor)
        except Exception:  # noqa: BLE001 - already dead
            pass
