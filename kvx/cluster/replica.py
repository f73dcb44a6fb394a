"""One replica: the body of a Ray actor holding an Engine (the model is loaded once per actor).

The driver sends batches of requests and collects results in one call, `exchange`. Inside, the
engine runs on its own thread over a source that yields what the driver sent, PAUSE while the
engine holds work but nothing new has come, and blocks while the engine is idle. No Ray import:
fleet.py wraps this class with `ray.remote`.
"""
from __future__ import annotations

import os
import sys
import threading
import time
from array import array
from collections import deque
from dataclasses import dataclass, field
from typing import Iterator

from kvx.job.runtime import EngineOptions, Runtime, build_runtime, check_engine_options
from kvx.engine.api import PAUSE, ChoiceHook, ChoiceTrace, Pause, Request, Result, SamplingParams, TokenVeto, Usage
from kvx.errors import KvxError
from kvx.heap import frozen_heap


@dataclass
class WireRequest:
    key: int  # the driver's handle for the request
    prompt: array  # token ids, int32
    sampling: SamplingParams
    budget: int | None  # the grammar's token budget (the request is constrained), None: free text
    choice_hook: ChoiceHook | None = None  # plain data (the calibration table): it travels with the request
    token_veto: TokenVeto | None = None  # the --examples copy guard (its vocabulary stays behind, by hash)


@dataclass
class WireResult:
    key: int
    token_ids: list[int]
    text: str
    finish_reason: str
    usage: Usage
    error: str | None
    choices: list[ChoiceTrace] = field(default_factory=list)
    prompt_logprob: float | None = None  # a scoring request's


@dataclass
class ReplicaReport:
    results: list[WireResult]
    figures: dict  # engine snapshot + busy_s + requests the replica finished
    failure: str | None = None  # the engine thread died: this replica is lost


def _size_thread_pools(threads: int) -> None:
    """numba's pool (the CPU kernels) holds `threads` workers, not one per core of the machine:
    idle workers of replicas sharing a box spin on the cores the other replicas compute on
    (measured: 2 replicas x 1 thread on 2 cores ran 5-10x slower with numba's default pool)."""
    os.environ["NUMBA_NUM_THREADS"] = str(threads)
    numba = sys.modules.get("numba")
    if numba is not None:  # imported already: its pool starts at the first kernel call, from config
        numba.config.NUMBA_NUM_THREADS = threads


@dataclass
class _Inbox:
    waiting: deque = field(default_factory=deque)
    finished: list = field(default_factory=list)
    in_engine: int = 0  # sent to the engine, result not back yet
    busy_since: float | None = None
    busy_s: float = 0.0
    done: int = 0
    failure: str | None = None


class ReplicaWorker:
    def __init__(self, index: int, schema: dict, opts: EngineOptions, factory: str | None, threads: int):
        self.index = index
        self.error: str | None = None
        self.error_option: str | None = None  # the option the error names as {option}: the driver shows its flag
        if factory:  # tests: the same stand-in engine as the driver (KVX_RUNTIME_FACTORY)
            os.environ["KVX_RUNTIME_FACTORY"] = factory
        else:  # whatever the worker inherited, the driver asked for the real engine
            os.environ.pop("KVX_RUNTIME_FACTORY", None)
        self.threads = threads
        if threads > 0:
            _size_thread_pools(threads)
        try:
            check_engine_options(opts)  # on the replica's machine, not the driver's
            self.runtime: Runtime | None = build_runtime(schema, opts)
        except KvxError as e:
            self.runtime, self.error, self.error_option = None, e.template, e.option
            return
        self._box = _Inbox()
        self._cv = threading.Condition()
        threading.Thread(target=self._run, name=f"kvx-replica-{index}", daemon=True).start()

    def ready(self) -> dict:
        if self.runtime is None:
            return {"error": self.error, "option": self.error_option}
        return {"max_model_len": self.runtime.max_model_len, "model_name": self.runtime.model_name,
                "pid": os.getpid()}

    def exchange(self, batch: list[WireRequest], wait_s: float) -> ReplicaReport:
        """Queue `batch`, then return the results finished so far (waiting up to wait_s for one)."""
        box = self._box
        with self._cv:
            box.waiting.extend(batch)
            self._cv.notify_all()
            deadline = time.monotonic() + wait_s
            while not box.finished and box.failure is None and (box.waiting or box.in_engine):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cv.wait(left)
            results, box.finished = box.finished, []
            busy = box.busy_s + (time.monotonic() - box.busy_since if box.busy_since is not None else 0.0)
            figures = {"replica": self.index, "busy_s": round(busy, 3), "requests_done": box.done,
                       "engine": self.runtime.engine.metrics.snapshot()}
            return ReplicaReport(results, figures, box.failure)

    # --- the engine's thread -----------------------------------------------------------------
    def _run(self) -> None:
        if self.threads > 0:  # here, not in __init__: OpenMP's thread count is per calling thread
            import torch

            torch.set_num_threads(self.threads)
        try:
            with frozen_heap():  # the loaded runtime stays out of the engine loop's collections
                for result in self.runtime.engine.generate(self._source()):
                    self._finished(result)
        except Exception as e:  # noqa: BLE001 - reported to the driver, which re-queues the work
            with self._cv:
                self._box.failure = f"replica {self.index}: engine failed: {type(e).__name__}: {e}"
                self._cv.notify_all()

    def _source(self) -> Iterator[Request | Pause]:
        box = self._box
        while True:
            with self._cv:
                while not box.waiting and not box.in_engine:
                    self._cv.wait()  # idle: block until the driver sends work
                if not box.waiting:
                    item = None
                else:
                    item = box.waiting.popleft()
                    if not box.in_engine:
                        box.busy_since = time.monotonic()
                    box.in_engine += 1
            yield PAUSE if item is None else self._request(item)

    def _request(self, w: WireRequest) -> Request:
        constraint = self.runtime.constraint(w.budget) if w.budget is not None else None
        return Request(id=str(w.key), prompt_ids=w.prompt.tolist(), sampling=w.sampling,
                       constraint=constraint, choice_hook=w.choice_hook, token_veto=w.token_veto,
                       user_data=w.key)

    def _finished(self, r: Result) -> None:
        with self._cv:
            box = self._box
            box.finished.append(WireResult(r.user_data, list(r.token_ids), r.text, r.finish_reason, r.usage, r.error,
                                             r.choices, r.prompt_logprob))
            box.in_engine -= 1
            box.done += 1
            if not box.in_engine and box.busy_since is not None:
                box.busy_s += time.monotonic() - box.busy_since
                box.busy_since = None
            self._cv.notify_all()
