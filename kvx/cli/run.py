"""Run `kvx extract`: check everything that can be wrong up front (exit 2), then the job."""
from __future__ import annotations

import signal
import time

from kvx.cli.extract import ExtractArgs
from kvx.cli.job import CHOICE_MODES, Job, JobSettings
from kvx.cli.options import check_choice, check_positive, parse_size
from kvx.cli.progress import ProgressView, job_stats, print_summary, show_progress, write_stats
from kvx.cli.runtime import EngineOptions, build_runtime
from kvx.cli.sink import RowSink
from kvx.cli.validation import RecordChecker, load_schema
from kvx.errors import ConfigError
from kvx.io.readers import input_format, open_input
from kvx.io.writers import done_ids, open_output, output_format
from kvx.copy_check import CopyCheck
from kvx.prompts import (SCHEMA_STYLES, TRUNCATE_MODES, PromptBuilder, PromptError, PromptSpec, load_examples,
                         load_template, read_text_option)

EXIT_OK, EXIT_FAILURES, EXIT_INTERRUPTED = 0, 1, 130
DTYPES = ("auto", "float32", "bfloat16")
ATTENTION = ("auto", "torch", "triton")
KV_DTYPES = ("auto", "float32", "bfloat16", "float16", "int8")
WHITESPACE = ("compact", "flexible")


def engine_options(a: ExtractArgs) -> EngineOptions:
    return EngineOptions(
        model=a.model,
        dtype=check_choice(a.dtype, DTYPES, "--dtype"),
        attention=check_choice(a.attention, ATTENTION, "--attention"),
        kv_dtype=check_choice(a.kv_dtype, KV_DTYPES, "--kv-dtype"),
        kv_memory=parse_size(a.kv_memory, "--kv-memory"),
        batch_tokens=check_positive(a.batch_tokens, "--batch-tokens", 16),
        max_seqs=check_positive(a.max_seqs, "--max-seqs"),
        speculate=check_positive(a.speculate, "--speculate", 0),
        whitespace=check_choice(a.whitespace, WHITESPACE, "--whitespace"),
        lenient=a.lenient,
    )


def check_job_options(a: ExtractArgs) -> JobSettings:
    check_positive(a.max_tokens, "--max-tokens")
    check_positive(a.retries, "--retries", 0)
    check_positive(a.max_failures, "--max-failures", 0)
    input_format(a.input)
    output_format(a.output)
    if a.input == "-" and a.resume and a.output is None:
        raise ConfigError("--resume needs an output file (-o FILE)")
    return JobSettings(max_tokens=a.max_tokens, retries=a.retries, seed=a.seed,
                       choices=check_choice(a.choices, CHOICE_MODES, "--choices"),
                       truncate=check_choice(a.truncate, TRUNCATE_MODES, "--truncate"), copy_guard=a.copy_guard)


def prompt_spec(a: ExtractArgs, checker: RecordChecker) -> PromptSpec:
    return PromptSpec(
        field=a.field,
        template=load_template(a.template) if a.template else None,
        system=read_text_option(a.system, "--system"),
        examples=load_examples(a.examples, checker.problem) if a.examples else [],
        raw=a.raw,
        describe_schema=not a.no_schema_prompt,
        schema_style=check_choice(a.schema_style, SCHEMA_STYLES, "--schema-style"),
    )


def run_extract(a: ExtractArgs) -> int:
    settings = check_job_options(a)
    opts = engine_options(a)
    schema = load_schema(a.schema)
    checker = RecordChecker(schema)
    spec = prompt_spec(a, checker)
    source = open_input(a.input, a.id_field)
    finished = done_ids(a.output) if a.resume else set()
    runtime = build_runtime(schema, opts)
    try:
        builder = PromptBuilder(spec, schema, runtime.tokenizer)
    except PromptError as e:
        raise ConfigError(f"--examples {a.examples}: {e}") from None
    writer = open_output(a.output, schema, resume=a.resume)

    metrics = runtime.engine.metrics.snapshot
    total = None if source.total is None else max(source.total - len(finished), 0)
    view = ProgressView(total, metrics, show_progress(a.quiet))
    sink = RowSink(writer, ordered=a.ordered, on_commit=view.advance)
    copies = CopyCheck([ex.output for ex in spec.examples], schema) if spec.examples else None
    job = Job(source, sink, builder, runtime, checker, settings, finished, copies)
    previous = signal.signal(signal.SIGTERM, _interrupt)  # a polite kill stops like Ctrl-C
    started = time.perf_counter()
    try:
        outcome = job.run()
    finally:
        signal.signal(signal.SIGTERM, previous)
        view.stop()
    stats = job_stats(sink.counts, outcome, time.perf_counter() - started, metrics(), runtime.model_name,
                      builder.shared_prefix_tokens(), settings)
    if a.stats:
        write_stats(a.stats, stats)
    if not a.quiet:
        print_summary(stats)
    if outcome.interrupted:
        return EXIT_INTERRUPTED
    return EXIT_FAILURES if sink.counts.failed > a.max_failures else EXIT_OK


def _interrupt(signum, frame):
    raise KeyboardInterrupt
