"""One extraction job: input records -> prompts -> engine -> validate / retry -> output rows.

Rows leave as sequences finish. A record that fails validation is re-queued with sampling
(seeded, so a rerun makes the same choices) up to `retries` times, then written as `invalid`.
Input problems become `error` rows; nothing is dropped. Ctrl-C stops cleanly: finished rows are
committed, the rest is left for `--resume`. So does a write that fails (disk full, stdout closed):
the job stops, keeps what was committed and reports the failure in its outcome.

The greedy first try ranks closed choices (`--choices`, kvx/engine/choices.py); with `calibrated`
the job first decodes the content-free prompts that calibrate them (kvx/engine/calibration.py);
`channel` also scores each record's text under every value of its enum fields (kvx/channel.py),
in windows of CHANNEL_WINDOW records: a window's scoring requests run, then its records. With
`--mentions` (calibrated or channel) each record's hook also weighs the enum values its text names
(kvx/mentions.py).
A record text too long for the context is cut (`--truncate`) or becomes an error row. With
`--examples`, ok records are checked for values copied from the examples (kvx/copy_check.py).
Greedy decodes carry token guards: no loops in free text (kvx/repeat_guard.py), no digits a
string's text lacks (kvx/digit_guard.py), and with `--examples` no example values (CopyGuard).
Nullable free-text and number fields whose value the text lacks are set to null or kept
(`--ungrounded`, kvx/grounding.py), and counted either way; free text the grammar cut at its
maxLength ends at its last full sentence (`--cut-text`, kvx/cut_text.py).
"""
from __future__ import annotations

import itertools
import zlib
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Protocol

from kvx.job.settings import JobSettings
from kvx.job.runtime import Runtime
from kvx.job.sink import RowSink
from kvx.job.validation import RecordChecker
from kvx.channel import ChannelHook, ChannelScores, collect, enum_fields, point_owners, scoring_requests
from kvx.copy_check import CopyCheck, CopyGuard
from kvx.cut_text import TextCut
from kvx.grounding import Grounding, UngroundedValue
from kvx.record_fields import Place, pointer
from kvx.code_spans import CodeGuard, CodeSpans, code_fields
from kvx.digit_guard import DigitGuard, shaped_places
from kvx.json_cursor import JsonCursor
from kvx.key_repeat import KeyRepeatGuard
from kvx.repeat_guard import RepeatGuard
from kvx.spelling import Spelling
from kvx.engine.api import AnyVeto, ChoiceHook, Constraint, Request, Result, SamplingParams, TokenVeto
from kvx.engine.calibration import CONTENT_FREE_TEXTS, ContextualCalibration
from kvx.errors import KvxError, OutputClosed, OutputError, one_line
from kvx.io.done_rows import DoneRows
from kvx.io.readers import InputSource
from kvx.io.records import InputRecord, OutputRow, RowUsage
from kvx.prompts import MIN_ROOM, PromptBuilder, PromptError

CHANNEL_WINDOW = 128  # records scored, then decoded, together (--choices channel)


@dataclass
class Attempt:
    record: InputRecord
    prompt_ids: list[int]
    max_tokens: int
    number: int = 0  # 0 = the greedy first try
    usage: RowUsage = field(default_factory=RowUsage)
    text: str = ""  # the record's text (its user turn), read by the token guards, the channel scores and the grounding check
    hook: ChoiceHook | None = None  # its own (channel scores, mentions); None: the job's (calibration)
    codes: CodeSpans | None = None  # its text's spans for the schema's code fields, where it has some (--copy-codes)


@dataclass
class JobOutcome:
    read: int = 0  # input records seen
    skipped: int = 0  # already in the output (--resume)
    retries: int = 0  # generations beyond the first
    interrupted: bool = False
    failure: KvxError | None = None  # the output could not be written: the job stopped there
    truncated_records: int = 0  # records whose text was cut to fit the context (--truncate)
    truncated_tokens: int = 0
    copying_records: int = 0  # ok records holding a value copied from --examples their text lacks
    copied_fields: Counter = field(default_factory=Counter)  # pointer -> records copying it there
    calibration_points: int = 0  # decision points the content-free runs calibrated
    channel_requests: int = 0  # scoring requests run for --choices channel
    channel_prompt_tokens: int = 0  # their prompt tokens (in their rows' usage too)
    ungrounded_records: int = 0  # ok records with a value their text lacks in a nullable field
    ungrounded_fields: Counter = field(default_factory=Counter)  # pointer -> records with one there
    cut_records: int = 0  # ok records with free text ended at its last full sentence (--cut-text)
    cut_fields: Counter = field(default_factory=Counter)  # pointer -> values ended so there
    code_records: int = 0  # ok records whose text holds a span for a code field (--copy-codes)
    codes_copied: int = 0  # code values written as a span of their text


class PhaseListener(Protocol):
    """Told what the job is doing while no row can finish (e.g. the progress bar's text)."""

    def phase(self, what: str) -> None: ...  # "" = decoding records


class Job:
    def __init__(self, source: InputSource, sink: RowSink, builder: PromptBuilder, runtime: Runtime,
                 checker: RecordChecker, settings: JobSettings, done: DoneRows | None = None,
                 copy_check: CopyCheck | None = None, listener: PhaseListener | None = None):
        self.source, self.sink, self.builder, self.runtime = source, sink, builder, runtime
        self.checker, self.settings = checker, settings
        self.listener = listener
        self.done = done or DoneRows()
        self.copy_check = copy_check
        self.outcome = JobOutcome()
        self.calibration: ContextualCalibration | None = None
        self._retry: deque[Attempt] = deque()
        self._records = iter(source.records)
        self._attempts = self._fresh()
        self._constraints: dict[int, Callable[[], Constraint] | None] = {}  # max_tokens -> constraint factory
        self._figures_started = False  # the engine's figures were reset for this job (its first run)
        self._exhausted = False  # every input record has been read
        # the top-level enums scored per record: by the channel (--choices channel) and by the values
        # their text names (--mentions, with calibrated or channel)
        scored = settings.choices == "channel" or settings.uses_mentions
        self._enums = enum_fields(checker.validator.schema) if scored else []
        self._channel = settings.choices == "channel" and bool(self._enums)
        self._owners: dict[tuple, str | None] = {}  # choice point -> its top-level field (channel.point_owners)
        self.grounding = Grounding.of(checker.validator.schema)
        self.text_cut = TextCut.of(checker.validator.schema)
        self.codes = code_fields(checker.validator.schema) if settings.copy_codes else {}
        self._shaped = shaped_places(checker.validator.schema)  # strings whose digits the schema shapes (--copy-digits)
        self._shortest = runtime.shortest_record  # output tokens of the shortest valid record
        vocab = runtime.grammar.vocab if runtime.grammar is not None else None
        self._spelling = Spelling(vocab.token_bytes, vocab.hash) if vocab is not None else None  # the guards' tokens

    def run(self) -> JobOutcome:
        try:
            if self.settings.choices in ("calibrated", "channel") and self._has_work():
                self._calibrate()
            while True:
                results = self._generate(self._window() if self._channel else self._requests())
                try:
                    for result in results:
                        self._finish(result)
                finally:
                    getattr(results, "close", lambda: None)()
                if self._exhausted and not self._retry:
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

    def _has_work(self) -> bool:
        """Whether a record is left to decode: the first fresh attempt is drawn (error rows before it
        are written as usual) and put back. An empty input or a finished --resume skips the
        calibration's decodes; a stream calibrates once its first record has come."""
        first = next(self._attempts, None)
        if first is None:
            return False
        self._attempts = itertools.chain([first], self._attempts)
        return True

    def _calibrate(self) -> None:
        """Decode the content-free prompts once; their choices calibrate every record's."""
        self.calibration = ContextualCalibration()
        self._phase(f"calibrating: {len(CONTENT_FREE_TEXTS)} content-free prompts")
        requests = []
        for i, text in enumerate(CONTENT_FREE_TEXTS):
            ids = self.builder.content_free_ids(text)
            room = min(self.settings.max_tokens, self.runtime.max_model_len - len(ids))
            if room >= MIN_ROOM:
                requests.append(Request(id=f"content-free-{i}", prompt_ids=ids, sampling=SamplingParams(max_tokens=room),
                                        constraint=self._constraint(room)))
        results = self.calibration.learn(self.runtime.engine, requests)
        if self._enums:
            self._owners = point_owners(results, self.builder.tokenizer.decode)
        self._figures_started = True
        self.outcome.calibration_points = self.calibration.num_points
        self._phase("")

    def _generate(self, requests: Iterable[Request]) -> Iterator[Result]:
        """The engine's results; one job, one set of figures: every run after the first (the
        calibration's, the channel's, the retry rounds) adds to the same figures."""
        results = self.runtime.engine.generate(requests, reset_metrics=not self._figures_started)
        self._figures_started = True
        return results

    def _constraint(self, max_tokens: int) -> Callable[[], Constraint] | None:
        if max_tokens not in self._constraints:
            self._constraints[max_tokens] = self.runtime.constraint(max_tokens)
        return self._constraints[max_tokens]

    def _fresh(self) -> Iterator[Attempt]:
        """Input records admitted as first attempts, pulled lazily (error rows are written here)."""
        for record in self._records:
            attempt = self._admit(record)
            if attempt is not None:
                yield attempt
        self._exhausted = True

    def _requests(self) -> Iterator[Request]:
        """Retries first (they block rows from finishing), then fresh input, pulled lazily."""
        while True:
            while self._retry:
                yield self._request(self._retry.popleft())
            attempt = next(self._attempts, None)
            if attempt is None:
                return
            yield self._request(attempt)

    def _window(self) -> list[Request]:
        """--choices channel: the pending retries, then the next CHANNEL_WINDOW records, whose
        scoring requests run first (each record's ChannelHook holds its scores)."""
        retries = [self._request(self._retry.popleft()) for _ in range(len(self._retry))]
        fresh = list(itertools.islice(self._attempts, CHANNEL_WINDOW))  # fewer: _fresh has set _exhausted
        self._score_channel(fresh)
        return retries + [self._request(a) for a in fresh]

    def _score_channel(self, attempts: list[Attempt]) -> None:
        tokenizer, context = self.builder.tokenizer, self.runtime.max_model_len
        by_key = {str(a.record.index): a for a in attempts}
        reqs = [r for key, a in by_key.items() for r in scoring_requests(self._enums, tokenizer, a.text, key, context)]
        self.outcome.channel_requests += len(reqs)
        if reqs:
            self._phase(f"channel: scoring {len(reqs)} prompts for the next {len(attempts)} records")
        results = list(self._generate(reqs))
        self._phase("")
        for r in results:  # the scoring prompts are read for this row: its usage counts them
            u = r.usage
            by_key[r.user_data[0]].usage.add(u.prompt_tokens, u.cached_prompt_tokens, u.generated_tokens)
            self.outcome.channel_prompt_tokens += u.prompt_tokens
        scores = collect(self._enums, results)
        for key, a in by_key.items():
            a.hook = self._record_hook(scores.get(key, ChannelScores()), a.text)

    def _record_hook(self, scores: ChannelScores, text: str) -> ChannelHook:
        """A record's own choice hook: the calibration, plus its channel scores and, with --mentions,
        the values its text names."""
        if self.settings.uses_mentions:
            scores = scores.with_mentions(self._enums, text)
        return ChannelHook(self._enums, scores, self.calibration, self._owners)

    def _phase(self, what: str) -> None:
        if self.listener is not None:
            self.listener.phase(what)

    def _admit(self, record: InputRecord) -> Attempt | None:
        self.outcome.read += 1
        if self.done.has(record):
            self.outcome.skipped += 1
            return None
        self.sink.expect(record.index)
        if record.error is not None:
            return self._fail(record, record.error)
        try:
            user = self.builder.user_text(record.fields)
            ids, cut = self._fit(record, self.builder.user_ids(user))
        except PromptError as e:
            return self._fail(record, str(e))
        except (TypeError, ValueError, UnicodeError, RecursionError) as e:  # what a tokenizer raises on odd text
            return self._fail(record, f"cannot tokenize the text ({type(e).__name__}: {one_line(e, 160)})")
        room = self.runtime.max_model_len - len(ids)
        if room < MIN_ROOM:
            return self._fail(record, f"prompt is {len(ids)} tokens; the model's context is "
                                      f"{self.runtime.max_model_len} (shorten the text or the template, or --truncate)")
        if room < self._shortest:  # every output would be cut: say so instead of three cut generations
            return self._fail(record, f"prompt is {len(ids)} tokens; the model's context of {self.runtime.max_model_len} "
                                      f"leaves {room}, and the shortest record the schema allows takes {self._shortest} "
                                      "(shorten the text or the template, or --truncate)")
        attempt = Attempt(record, ids, min(self.settings.max_tokens, room), text=user)
        if self.codes:
            spans = CodeSpans.of(self.codes, user)
            attempt.codes = spans if spans.spans else None
        attempt.usage.truncated_tokens = cut
        if cut:
            self.outcome.truncated_records += 1
            self.outcome.truncated_tokens += cut
        return attempt

    def _fit(self, record: InputRecord, ids: list[int]) -> tuple[list[int], int]:
        """With --truncate, a prompt that leaves less than --max-tokens of the context is cut to
        leave that much (or what the rest of the prompt allows); (ids, tokens cut)."""
        limit = self.runtime.max_model_len
        if self.settings.truncate == "none" or len(ids) + self.settings.max_tokens <= limit:
            return ids, 0
        return self.builder.truncated_ids(record.fields, max(limit - self.settings.max_tokens, limit // 2),
                                          self.settings.truncate)

    def _fail(self, record: InputRecord, message: str, attempt: Attempt | None = None) -> None:
        row = OutputRow(record.id, "error", error=record.message(message))
        if attempt is not None:
            row.attempts, row.usage = attempt.number + 1, attempt.usage
        self.sink.put(record.index, row)
        return None

    def _request(self, attempt: Attempt) -> Request:
        s = self.settings
        sampling = SamplingParams(max_tokens=attempt.max_tokens, rank_choices=s.choices != "greedy")
        if attempt.number > 0:  # sampled retries draw every token, choices included
            sampling.temperature, sampling.top_p = s.retry_temperature, s.retry_top_p
            sampling.seed = zlib.crc32(f"{s.seed}:{attempt.record.id}:{attempt.number}".encode())
        if attempt.hook is None and self._enums and not self._channel:
            # calibrated with --mentions (channel: once its window is scored); made here, not on
            # admission: the first record is admitted before the calibration it reads has run
            attempt.hook = self._record_hook(ChannelScores(), attempt.text)
        return Request(id=f"{attempt.record.index}.{attempt.number}", prompt_ids=attempt.prompt_ids,
                       sampling=sampling, constraint=self._constraint(attempt.max_tokens),
                       choice_hook=attempt.hook or self.calibration, token_veto=self._guard(attempt),
                       user_data=attempt)

    def _guard(self, attempt: Attempt) -> TokenVeto | None:
        """With a grammar (whose vocabulary spells the tokens): no loops in free text or keys, no digits
        the text lacks in a string; with --examples, no example values either."""
        if self._spelling is None:
            return None
        guards: list[TokenVeto] = []
        cursor = JsonCursor(self._spelling)  # one scan of the output for the guards that read its JSON
        if self.copy_check is not None and self.settings.copy_guard:
            guards.append(CopyGuard(self.copy_check, attempt.text, self._spelling))
        if self.settings.no_repeat_ngram > 0:
            guards += [RepeatGuard(attempt.text, self.settings.no_repeat_ngram, self._spelling),
                       KeyRepeatGuard(cursor)]
        if attempt.codes is not None:
            guards.append(CodeGuard(attempt.codes, cursor))
        if self.settings.copy_digits:
            guards.append(DigitGuard(attempt.text, cursor, self._shaped))
        return None if not guards else guards[0] if len(guards) == 1 else AnyVeto(guards)

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
            found = self.grounding.ungrounded(value, attempt.text)
            value, cut = self._cut(self._nulled(value, found))
            problem = self.sink.writer.unfit(value)  # a Parquet column's limits (an integer past int64)
        if problem is None:
            self._write_ok(attempt, value, found, cut)
        elif attempt.number < self.settings.retries:
            attempt.number += 1
            self.outcome.retries += 1
            self._retry.append(attempt)
        else:
            row = OutputRow(record.id, "invalid", None, record.message(problem), attempt.number + 1, attempt.usage)
            self.sink.put(record.index, row)

    def _write_ok(self, attempt: Attempt, value: Any, found: list[UngroundedValue], cut: list[Place]) -> None:
        """Writes a valid record's row and counts what was done to it (ok records only)."""
        ungrounded = None
        if found:
            self.outcome.ungrounded_records += 1
            self.outcome.ungrounded_fields.update({pointer(f.pattern) for f in found})
            ungrounded = {pointer(f.path): f.value for f in found}
        if cut:
            self.outcome.cut_records += 1
            self.outcome.cut_fields.update(set(map(pointer, cut)))
        self._check_copies(value, attempt.text)  # what is written: a nulled copy is no copy
        if attempt.codes is not None:
            self.outcome.code_records += 1
            self.outcome.codes_copied += attempt.codes.copied(value)
        record = attempt.record
        self.sink.put(record.index, OutputRow(record.id, "ok", value, None, attempt.number + 1, attempt.usage,
                                              ungrounded))

    def _nulled(self, record: Any, found: list[UngroundedValue]) -> Any:
        """The record with its ungrounded values set to null under `--ungrounded null` (kept if null
        would break the schema, e.g. a `oneOf` that two branches then match)."""
        if not found or self.settings.ungrounded == "keep":
            return record
        nulled = self.grounding.nulled(record, [f.path for f in found])
        return nulled if self.checker.problem(nulled) is None else record

    def _cut(self, record: Any) -> tuple[Any, list[Place]]:
        """The record with free text the grammar cut at its maxLength ended at its last full sentence
        (`--cut-text sentence`), unless that would break the schema; and the places so ended."""
        if self.settings.cut_text == "keep":
            return record, []
        cut, where = self.text_cut.cut(record)
        if not where or self.checker.problem(cut) is not None:
            return record, []
        return cut, where

    def _check_copies(self, record: Any, text: str) -> None:
        if self.copy_check is None:
            return
        copied = self.copy_check.copied(record, text)
        if copied:
            self.outcome.copying_records += 1
            self.outcome.copied_fields.update(set(copied))
