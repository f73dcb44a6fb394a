"""One engine in a child process per worker, so a runaway compile is killed at a hard limit
instead of hanging the run. The child loads the tokenizer and the engine once, then compiles
schemas and walks their instances on request.

Timings are taken in the child around compile() alone: wall (perf_counter) and CPU (process_time,
all the child's threads, which counts xgrammar's compile threads too)."""
from __future__ import annotations

import multiprocessing as mp
import os
import time
import traceback
from dataclasses import dataclass, field


@dataclass
class Outcome:
    status: str  # "compiled", "refused", "killed" (over the hard limit), "failed" (worker died)
    error: str = ""
    crash: bool = False  # refused by an exception that is not the engine's own refusal
    wall_ms: float = 0.0
    cpu_ms: float = 0.0
    # per instance: [raw accepted (any text), post-check passed (kvx) or None]; None if not walked
    walks: list | None = None
    walk_error: str = ""

    def to_json(self) -> dict:
        return self.__dict__.copy()

    @classmethod
    def from_json(cls, row: dict) -> "Outcome":
        return cls(**row)


def _child(engine_name: str, conn, sys_path: list[str], log_path: str) -> None:
    import os
    import sys

    sys.path[:] = sys_path
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 2)  # engines' own warnings (xgrammar prints per schema) go to a log, not the table
    from benchmarks.grammar_bench.engines import make_engine
    from kvx.heap import frozen_heap

    engine = make_engine(engine_name)
    conn.send("ready")
    with frozen_heap():  # as `kvx extract` runs its job: the loaded engine stays out of full collections
        _serve(engine, conn)


def _serve(engine, conn) -> None:
    from benchmarks.grammar_bench.engines import Refused

    while True:
        job = conn.recv()
        if job is None:
            return
        schema_text, instances = job
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            compiled, error, crash = engine.compile(schema_text), "", False
        except Refused as err:
            compiled, error, crash = None, str(err), err.crash
        wall, cpu = (time.perf_counter() - t0) * 1e3, (time.process_time() - c0) * 1e3
        conn.send(("compiled" if compiled else "refused", error, crash, wall, cpu))
        if compiled is None:
            continue
        try:
            walks = []
            for value, texts_ids in instances:
                raw = any(compiled.accepts(ids) for ids in texts_ids)
                walks.append([raw, compiled.post_check(value)])
            conn.send(("walked", walks))
        except Exception as err:  # an engine bug while walking: reported, the worker goes on
            conn.send(("walk-error", f"{type(err).__name__}: {err}"[:300] + traceback.format_exc(limit=2)[-200:]))


@dataclass
class Worker:
    engine: str  # a name in engines.ENGINES, or "module:factory"
    kill_after_s: float
    walk_limit_s: float
    log_path: str = os.devnull
    _proc: mp.Process | None = field(default=None, repr=False)
    _conn: object = field(default=None, repr=False)

    def _start(self) -> None:
        import sys

        # torch's OpenMP threads (kvx's matchers use torch while walking instances) spin for a while
        # after their work by default, and that spin landed in the next compile's process_time: +5 ms
        # at kvx's p50 (26.1 against 20.7). Passive threads sleep at once; the compile's own threads
        # (xgrammar's) are counted as before. Read by the child's OpenMP runtime when it loads.
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        self._proc = ctx.Process(target=_child, args=(self.engine, child, list(sys.path), self.log_path), daemon=True)
        self._proc.start()
        child.close()
        self._conn = parent
        if not parent.poll(300) or parent.recv() != "ready":
            raise RuntimeError(f"{self.engine} worker did not start")

    def _kill(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.join(5)
        self._proc = self._conn = None

    def close(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            try:
                self._conn.send(None)
                self._proc.join(5)
            except (OSError, EOFError):
                pass
        self._kill()

    def run(self, schema_text: str, instances: list) -> Outcome:
        if self._proc is None or not self._proc.is_alive():
            self._start()
        self._conn.send((schema_text, instances))
        t0 = time.perf_counter()
        try:
            if not self._conn.poll(self.kill_after_s):
                self._kill()
                ms = (time.perf_counter() - t0) * 1e3
                return Outcome("killed", f"compile still running after {self.kill_after_s:g} s", wall_ms=ms, cpu_ms=ms)
            status, error, crash, wall, cpu = self._conn.recv()
            out = Outcome(status, error, crash, wall, cpu)
            if status != "compiled":
                return out
            if not self._conn.poll(self.walk_limit_s):
                self._kill()
                out.walk_error = f"instance walk still running after {self.walk_limit_s:g} s"
                return out
            kind, payload = self._conn.recv()
            if kind == "walked":
                out.walks = payload
            else:
                out.walk_error = payload
            return out
        except (EOFError, OSError, BrokenPipeError) as err:  # the child died (a segfault, memory)
            self._kill()
            return Outcome("failed", f"worker died: {type(err).__name__}")
