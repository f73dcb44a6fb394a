"""Live progress on stderr (only on a TTY), the end-of-run summary table, and the --stats figures."""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Callable

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from kvx.cli.fleet_view import fleet_progress, fleet_rows
from kvx.job.job import JobOutcome, JobSettings
from kvx.job.sink import RowCounts


class ProgressView:
    """records done/total, records/s, tokens/s, prefix-cache hit rate, batch use, KV pool pressure."""

    def __init__(self, total: int | None, metrics: Callable[[], dict], enabled: bool):
        self.metrics = metrics
        self.started = time.perf_counter()
        self.done = 0
        self._progress = None
        if enabled:
            self._progress = Progress(
                TextColumn("[bold]extract"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                TextColumn("{task.fields[figures]}"), TextColumn("[dim]{task.fields[phase]}"),
                console=Console(stderr=True), refresh_per_second=4, transient=False,
            )
            self._task = self._progress.add_task("extract", total=total, figures="", phase="")
            self._progress.start()

    def advance(self, n: int) -> None:
        self.done += n
        if self._progress is None:
            return
        m = self.metrics()
        rate = self.done / max(time.perf_counter() - self.started, 1e-9)
        figures = (f"{rate:.1f} rec/s  {m.get('output_tokens_per_s', 0):.0f} tok/s  "
                   f"cache {m.get('cache_hit_rate', 0):.0%}  batch {m.get('batch_utilisation', 0):.0%}  "
                   f"KV {m.get('kv_pool_pressure', 0):.0%}") + fleet_progress(m)
        self._progress.update(self._task, advance=n, figures=figures)

    def phase(self, what: str) -> None:
        """What the job does while no row can finish (calibrating, channel scoring); "" = decoding."""
        if self._progress is not None:
            self._progress.update(self._task, phase=what)

    def stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()


def show_progress(quiet: bool) -> bool:
    return not quiet and sys.stderr.isatty() and os.environ.get("TERM") != "dumb"


def job_stats(counts: RowCounts, outcome: JobOutcome, elapsed: float, engine: dict, model: str,
              shared_prefix_tokens: int, settings: JobSettings, copy_guarded: bool = False,
              field_list_shortened: str | None = None) -> dict:
    """The figures of one run, as printed in the summary and written by --stats (copy_guarded: the
    --examples copy guard ran; field_list_shortened: how the schema's field list was cut to fit the
    prompt, or None)."""
    return {
        "model": model,
        "records_read": outcome.read,
        "records_skipped_resume": outcome.skipped,
        "records_done": counts.done,
        "ok": counts.ok,
        "invalid": counts.invalid,
        "error": counts.error,
        "retries": outcome.retries,
        "interrupted": outcome.interrupted,
        "elapsed_s": round(elapsed, 3),
        "records_per_s": round(counts.done / elapsed, 3) if elapsed > 0 else 0.0,
        "shared_prefix_tokens": shared_prefix_tokens,
        "field_list_shortened": field_list_shortened,
        "choices": settings.choices,
        "calibration_points": outcome.calibration_points,
        "channel_requests": outcome.channel_requests,
        "channel_prompt_tokens": outcome.channel_prompt_tokens,
        "mentions": settings.uses_mentions,
        "truncate": settings.truncate,
        "truncated_records": outcome.truncated_records,
        "truncated_tokens": outcome.truncated_tokens,
        "records_copying_examples": outcome.copying_records,
        "copied_example_fields": dict(outcome.copied_fields.most_common()),
        "ungrounded": settings.ungrounded,
        "records_with_ungrounded_values": outcome.ungrounded_records,
        "ungrounded_fields": dict(outcome.ungrounded_fields.most_common()),
        "no_repeat_ngram": settings.no_repeat_ngram,
        "cut_text": settings.cut_text,
        "records_cut_at_sentence": outcome.cut_records,
        "cut_fields": dict(outcome.cut_fields.most_common()),
        "copy_codes": settings.copy_codes,
        "records_with_code_spans": outcome.code_records,
        "codes_copied": outcome.codes_copied,
        "copy_digits": settings.copy_digits,
        "copy_guard": copy_guarded,
        "warnings": copy_warnings(outcome, counts.ok) + field_list_warnings(field_list_shortened),
        "engine": engine,
    }


def copy_warnings(outcome: JobOutcome, ok: int) -> list[str]:
    if not outcome.copying_records:
        return []
    fields = _most_counted(outcome.copied_fields)
    return [f"{outcome.copying_records} of {ok} ok records copy a value from --examples that their text does not "
            f"contain ({fields}): the model repeats the example instead of reading the text"]


def field_list_warnings(shortened: str | None) -> list[str]:
    if shortened is None:
        return []
    return [f"the schema's field list was too long for the prompt and was shortened ({shortened}); the output "
            "still follows the whole schema"]


def _most_counted(counts: dict[str, int], most: int = 4) -> str:
    """'/a 5, /b 2': the `most` commonest pointers and their counts."""
    return ", ".join(f"{p} {n}" for p, n in sorted(counts.items(), key=lambda kv: -kv[1])[:most])


def write_stats(path: str, stats: dict) -> None:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(json.dumps(stats, indent=2) + "\n", "utf-8")
    os.replace(tmp, p)


def print_summary(stats: dict) -> None:
    e = stats["engine"]
    table = Table(title="kvx extract", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column(justify="right")
    rows = [
        ("records", f"{stats['records_done']} done ({stats['ok']} ok, {stats['invalid']} invalid, "
                    f"{stats['error']} error)" + (f", {stats['records_skipped_resume']} resumed" if stats["records_skipped_resume"] else "")),
        ("retries", str(stats["retries"])),
        ("time", f"{stats['elapsed_s']:.1f} s"),
        ("records/s", f"{stats['records_per_s']:.2f}"),
        ("output tokens/s", f"{e.get('output_tokens_per_s', 0):.1f}"),
        ("prefix cache hit rate", f"{e.get('cache_hit_rate', 0):.1%}"),
        ("batch utilisation", f"{e.get('batch_utilisation', 0):.1%}"),
        ("peak KV pool pressure", f"{e.get('peak_kv_pool_pressure', 0):.1%}"),
    ]
    rows += fleet_rows(e)
    if stats["choices"] != "greedy":
        rows.append(("ranked choices", f"{e.get('ranked_choices', 0)} ({e.get('choices_overruling_greedy', 0)} "
                                       f"unlike greedy; {stats['choices']}" + ", --mentions" * bool(stats["mentions"]) + ")"))
    if stats["channel_requests"]:
        rows.append(("channel scoring", f"{stats['channel_requests']} requests, {stats['channel_prompt_tokens']:,} tokens"))
    if stats["truncated_records"]:
        rows.append(("truncated", f"{stats['truncated_records']} records, {stats['truncated_tokens']} tokens cut "
                                  f"(--truncate {stats['truncate']})"))
    if stats["records_with_ungrounded_values"]:
        fields = _most_counted(stats["ungrounded_fields"])
        done = "set to null" if stats["ungrounded"] == "null" else "kept"
        rows.append(("not in the text", f"{stats['records_with_ungrounded_values']} records ({fields}): {done} "
                                        f"(--ungrounded {stats['ungrounded']})"))
    if stats["records_cut_at_sentence"]:
        fields = _most_counted(stats["cut_fields"])
        rows.append(("cut at maxLength", f"{stats['records_cut_at_sentence']} records ({fields}): ended at their last "
                                         f"full sentence (--cut-text {stats['cut_text']})"))
    if stats["records_with_code_spans"]:
        rows.append(("codes from the text", f"{stats['codes_copied']} values copied; {stats['records_with_code_spans']} "
                                            f"records' texts hold a fitting span (--copy-codes)"))
    if e.get("vetoed_tokens"):
        guards = [f"looping text or keys (--no-repeat-ngram {stats['no_repeat_ngram']})"] * bool(stats["no_repeat_ngram"]) \
            + ["values of --examples"] * bool(stats["copy_guard"]) \
            + ["codes the text lacks (--copy-codes)"] * bool(stats["records_with_code_spans"]) \
            + ["digits the text lacks (--copy-digits)"] * bool(stats["copy_digits"])
        rows.append(("tokens refused", f"{e['vetoed_tokens']:,}: {', '.join(guards)}"))
    if stats["interrupted"]:
        rows.append(("interrupted", "yes: rerun with --resume to finish"))
    for name, value in rows:
        table.add_row(name, value)
    console = Console(stderr=True)
    console.print(table)
    for warning in stats["warnings"]:
        console.print(f"[bold yellow]warning:[/] {warning}")
