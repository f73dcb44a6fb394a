"""One extraction job: input records -> prompts -> engine -> validate / retry -> output rows.

Rows leave as sequences finish. A record that fails validation is re-queued with sampling
(seeded, so a rerun makes the same choices) up to `retries` times, then written as `invalid`.
Input problems become `error` rows; nothing is dropped. Ctrl-C stops cleanly: finished rows are
committed, the rest is left for `--resume`. So does a write that fails (disk full, stdout closed):
the job stops, keeps what was committed and reports the failure in its outcome.
"""
from __future__ import annotations

import zlib
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Iterator

from kvx.cli.runtime import Runtime
from kvx.cli.sink import RowSink
from kvx.cli.validation import RecordChecker
from kvx.engine.api import Request, Result, SamplingParams
from kvx.errors import KvxError, OutputClosed, OutputError
from kvx.io.done_rows import DoneRows
from kvx.io.readers import InputSource
from kvx.io.records import InputRecord, OutputRow, RowUsage
from kvx.prompts import MIN_ROOM, PromptBuilder, PromptError


@dataclass
class JobSettings:
    max_tokens: int = 256
    retries: int = 2
    retry_temperature: float = 0.7
    retry_top_p: float = 0.95
    seed: int = 0


@dataclass
class Attempt:
    record: InputRecord
    prompt_ids: list[int]
    max_tokens: int
    number: int = 0  # 0 = the greedy first try
    usage: RowUsage = field(default_factory=RowUsage)


@dataclass
class JobOutcome:
    read: int = 0  # input records seen
    skipped: int = 0  # already in the output (--resume)
    retries: int = 0  # generations beyond the first
    interrupted: bool = False
    failure: KvxError | None = None  # the output could not be written: the job stopped there


class Job:
    def __init__(self, source: InputSource, sink: RowSink, builder: PromptBuilder, runtime: Runtime,
                 checker: RecordChecker, settings: JobSettings, done: DoneRows | None = None):
        self.source, self.sink, self.builder, self.runtime = source, sink, builder, runtime
        self.checker, self.settings = checker, settings
        self.done = done or DoneRows()
        self.outcome = JobOutcome()
        self._retry: deque[Attempt] = deque()
        self._records = iter(source.records)
        self._constraints: dict[int, Any] = {}  # max_tokens -> constraint factory

    def run(self) -> JobOutcome:
        try:
            while True:
                results = self.runtime.engine.generate(self._requests())
                try:
                    for result in results:
                        self._finish(result)
                finally:
                    getattr(results, "close", lambda: None)()
                if not self._retry:  # input exhausted and no retry pending
                    break
        except KeyboardInterrupt:
            self.outcome.interrupted = True
        except (OutputError, OutputClosed) as e:
            self.outcome.failure = e
        finally:
            self._finish_sink()
        return self.outcome

    def _finish_sink(self) -> None:
        try:
            self.sink.finish()
        except (OutputError, OutputClosed) as e:  # the last commit (or the Parquet merge) failed
            self.outcome.failure = self.outcome.failure or e

    def _requests(self) -> Iterator[Request]:
        """Retries first (they block rows from finishing), then fresh input, pulled lazily."""
        while True:
            while self._retry:
                yield self._request(self._retry.popleft())
            record = next(self._records, None)
            if record is None:
                return
            attempt = self._admit(record)
            if attempt is not None:
                yield self._request(attempt)

    def _admit(self, record: InputRecord) -> Attempt | None:
        self.outcome.read += 1
        if self.done.has(record):
            self.outcome.skipped += 1
            return None
        self.sink.expect(record.index)
        if record.error is not None:
            return self._fail(record, record.error)
        try:
            ids = self.builder.prompt_ids(record.fields)
        except PromptError as e:
            return self._fail(record, str(e))
        except (TypeError, ValueError, UnicodeError, RecursionError) as e:  # what a tokenizer raises on odd text
            return self._fail(record, f"cannot tokenize the text ({type(e).__name__}: {' '.join(str(e).split())[:160]})")
        room = self.runtime.max_model_len - len(ids)
        if room < MIN_ROOM:
            return self._fail(record, f"prompt is {len(ids)} tokens; the model's context is "
                                      f"{self.runtime.max_model_len} (shorten the text or the template)")
        return Attempt(record, ids, min(self.settings.max_tokens, room))

    def _fail(self, record: InputRecord, message: str, attempt: Attempt | None = None) -> None:
        row = OutputRow(record.id, "error", error=record.message(message))
        if attempt is not None:
            row.attempts, row.usage = attempt.number + 1, attempt.usage
        self.sink.put(record.index, row)
        return None

    def _request(self, attempt: Attempt) -> Request:
        s = self.settings
        sampling = SamplingParams(max_tokens=attempt.max_tokens)
        if attempt.number > 0:
            sampling.temperature, sampling.top_p = s.retry_temperature, s.retry_top_p
            sampling.seed = zlib.crc32(f"{s.seed}:{attempt.record.id}:{attempt.number}".encode())
        if attempt.max_tokens not in self._constraints:
            self._constraints[attempt.max_tokens] = self.runtime.constraint(attempt.max_tokens)
        return Request(id=f"{attempt.record.index}.{attempt.number}", prompt_ids=attempt.prompt_ids,
                       sampling=sampling, constraint=self._constraints[attempt.max_tokens], user_data=attempt)

    def _finish(self, result: Result) -> None:
        attempt: Attempt = result.user_data
        record = attempt.record
        u = result.usage
        attempt.usage.add(u.prompt_tokens, u.cached_prompt_tokens, u.generated_tokens)
        if result.finish_reason == "error":
            self._fail(record, result.error or "the engine failed on this record", attempt)
            return
        value, problem = self.checker.check(result.text, result.finish_reason)
        if problem is None:
            self.sink.put(record.index, OutputRow(record.id, "ok", value, None, attempt.number + 1, attempt.usage))
        elif attempt.number < self.settings.retries:
            attempt.number += 1
            self.outcome.retries += 1
            self._retry.append(attempt)
        else:
            row = OutputRow(record.id, "invalid", None, record.message(problem), attempt.number + 1, attempt.usage)
            self.sink.put(record.index, row)
