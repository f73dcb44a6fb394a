"""Run `kvx extract`: check everything that can be wrong up front (exit 2), then the job."""
from __future__ import annotations

import dataclasses
import signal
import time

from kvx.cli.extract_args import ExtractArgs
from kvx.job.job import Job
from kvx.job.settings import ChoiceMode, JobSettings
from kvx.cli.options import check_choice, check_positive, check_seconds, flag, parse_size
from kvx.cli.progress import ProgressView, job_stats, print_summary, show_progress, write_stats
from kvx.job.runtime import EngineOptions, Runtime, build_runtime, check_engine_options
from kvx.job.sink import RowSink
from kvx.job.validation import RecordChecker, load_schema
from kvx.cluster.options import ClusterOptions
from kvx.engine.api import Attention, Dtype, KVDtype
from kvx.errors import ConfigError
from kvx.heap import frozen_heap
from kvx.copy_check import CopyCheck
from kvx.cut_text import CutText
from kvx.grounding import Ungrounded
from kvx.io.done_rows import DoneRows
from kvx.io.fingerprint import Fingerprint, job_fingerprint
from kvx.io.output_lock import output_lock
from kvx.io.readers import InputSource, input_format, open_input
from kvx.io.writers import RowWriter, check_output_path, open_output, output_format, read_done
from kvx.grammar.options import ExtraKeys, GrammarOptions, Whitespace
from kvx.prompts import (PromptBuilder, PromptError, PromptSpec, SchemaStyle, Truncate, field_list_budget,
                         load_examples, load_template, read_text_option, shared_prompt_problem)

EXIT_OK, EXIT_FAILURES, EXIT_INTERRUPTED = 0, 1, 130


def engine_options(a: ExtractArgs) -> EngineOptions:
    opts = EngineOptions(
        model=a.model,
        dtype=check_choice(a.dtype, Dtype, "dtype"),
        attention=check_choice(a.attention, Attention, "attention"),
        kv_dtype=check_choice(a.kv_dtype, KVDtype, "kv_dtype"),
        kv_memory=parse_size(a.kv_memory, flag("kv_memory")),
        batch_tokens=check_positive(a.batch_tokens, "batch_tokens", 16),
        max_seqs=check_positive(a.max_seqs, "max_seqs"),
        speculate=check_positive(a.speculate, "speculate", 0),
        grammar=GrammarOptions(whitespace=check_choice(a.whitespace, Whitespace, "whitespace"), lenient=a.lenient,
                               extra_keys=check_choice(a.extra_keys, ExtraKeys, "extra_keys"),
                               numbers="parquet" if output_format(a.output) == "parquet" else "json",
                               compile_deadline=check_seconds(a.compile_deadline, "compile_deadline")),
    )
    if is_local(a):  # replicas check on their own machine (kvx/cluster/replica.py)
        check_engine_options(opts)
    return opts


def is_local(a: ExtractArgs) -> bool:
    """One in-process engine, no Ray."""
    return a.replicas == 1 and a.ray_address is None


def cluster_options(a: ExtractArgs) -> ClusterOptions:
    return ClusterOptions(replicas=a.replicas, ray_address=a.ray_address, replica_cpus=a.replica_cpus,
                          replica_gpus=a.replica_gpus)


def check_job_options(a: ExtractArgs) -> JobSettings:
    check_positive(a.max_tokens, "max_tokens")
    check_positive(a.retries, "retries", 0)
    check_positive(a.max_failures, "max_failures", 0)
    check_positive(a.no_repeat_ngram, "no_repeat_ngram", 0)
    check_positive(a.replicas, "replicas")
    if a.replica_cpus is not None and a.replica_cpus <= 0:
        raise ConfigError(f"--replica-cpus {a.replica_cpus:g}: must be more than 0")
    if a.replica_gpus < 0:
        raise ConfigError(f"--replica-gpus {a.replica_gpus:g}: must be at least 0")
    input_format(a.input)
    output_format(a.output)
    if a.input == "-" and a.resume and a.output is None:
        raise ConfigError("--resume needs an output file (-o FILE)")
    if a.force and not a.resume:
        raise ConfigError("--force only applies to --resume (without --resume the output is replaced anyway)")
    return JobSettings(max_tokens=a.max_tokens, retries=a.retries, seed=a.seed,
                       choices=check_choice(a.choices, ChoiceMode, "choices"), mentions=a.mentions,
                       truncate=check_choice(a.truncate, Truncate, "truncate"), copy_guard=a.copy_guard,
                       ungrounded=check_choice(a.ungrounded, Ungrounded, "ungrounded"),
                       no_repeat_ngram=a.no_repeat_ngram, cut_text=check_choice(a.cut_text, CutText, "cut_text"),
                       copy_codes=a.copy_codes, copy_digits=a.copy_digits)


def prompt_spec(a: ExtractArgs, checker: RecordChecker) -> PromptSpec:
    return PromptSpec(
        field=a.field,
        template=load_template(a.template) if a.template else None,
        system=read_text_option(a.system, "--system"),
        examples=load_examples(a.examples, checker.problem) if a.examples else [],
        raw=a.raw,
        describe_schema=not a.no_schema_prompt,
        schema_style=check_choice(a.schema_style, SchemaStyle, "schema_style"),
    )


def fingerprint_of(a: ExtractArgs, schema: dict, spec: PromptSpec) -> Fingerprint:
    """What makes two runs the same job, for --resume: schema, model, and how records become prompts."""
    return job_fingerprint(schema, a.model, {**dataclasses.asdict(spec), "id_field": a.id_field})


def prompt_builder(a: ExtractArgs, spec: PromptSpec, schema: dict, runtime: Runtime) -> PromptBuilder:
    try:
        builder = PromptBuilder(spec, schema, runtime.tokenizer, field_list_budget(runtime.max_model_len))
    except PromptError as e:
        raise ConfigError(f"--examples {a.examples}: {e}") from None
    except (TypeError, ValueError, UnicodeError) as e:  # the tokenizer refuses the system text
        raise ConfigError(f"cannot tokenize the shared prompt ({type(e).__name__}: {e})") from None
    problem = shared_prompt_problem(builder.shared_prefix_tokens(), runtime.max_model_len, spec.describe_schema)
    if problem:
        raise ConfigError(problem)
    return builder


def run_extract(a: ExtractArgs) -> int:
    settings = check_job_options(a)
    opts = engine_options(a)
    schema = load_schema(a.schema, a.schema_dir or ())
    checker = RecordChecker(schema)
    spec = prompt_spec(a, checker)
    check_output_path(a.output, a.input, {"--stats": a.stats})
    source = open_input(a.input, a.id_field)
    check_columns(source, spec)
    fingerprint = fingerprint_of(a, schema, spec)
    with output_lock(a.output):  # held until the last row is committed (and Parquet merged)
        finished = read_done(a.output, schema, fingerprint, a.force) if a.resume else DoneRows()
        runtime = _runtime(a, schema, opts)
        try:
            check_room_for_a_record(a.max_tokens, runtime)
            builder = prompt_builder(a, spec, schema, runtime)
            writer = open_output(a.output, schema, fingerprint, resume=a.resume)
            copies = CopyCheck([ex.output for ex in spec.examples], schema) if spec.examples else None
            return run_job(a, source, writer, builder, runtime, checker, settings, finished, copies)
        finally:
            runtime.close()


def check_room_for_a_record(max_tokens: int, runtime: Runtime) -> None:
    """--max-tokens below the shortest record the schema allows would cut every output (retried,
    then invalid, three generations a record): exit 2 before the work, naming what fits."""
    shortest = runtime.shortest_record
    if max_tokens < shortest:
        raise ConfigError(f"{{option}} {max_tokens} cannot hold the shortest record the schema allows: {shortest} "
                          "tokens of this model's (its end-of-text token included); give it at least that",
                          option="max_tokens")


def check_columns(source: InputSource, spec: PromptSpec) -> None:
    """A CSV or Parquet input without a column the prompts read would give only error rows: exit 2."""
    if source.columns is None:
        return
    for column in (name.split(".")[0] for name in spec.fields_read()):  # a dotted name's column is its first part
        if column not in source.columns:
            how = "use a column in --template" if spec.template is not None else "name the text's column with --field"
            raise ConfigError(f"{source.name}: no column {column!r} (its columns: "
                              f"{', '.join(source.columns) or 'none'}); {how}")


def _runtime(a: ExtractArgs, schema: dict, opts: EngineOptions) -> Runtime:
    if is_local(a):
        return build_runtime(schema, opts)
    from kvx.cluster.fleet_runtime import build_fleet_runtime

    return build_fleet_runtime(schema, opts, cluster_options(a))


def run_job(a: ExtractArgs, source: InputSource, writer: RowWriter, builder: PromptBuilder, runtime: Runtime,
            checker: RecordChecker, settings: JobSettings, finished: DoneRows, copies: CopyCheck | None) -> int:
    metrics = runtime.engine.metrics.snapshot
    total = None if source.total is None else max(source.total - len(finished), 0)
    view = ProgressView(total, metrics, show_progress(a.quiet))
    sink = RowSink(writer, ordered=a.ordered, on_commit=view.advance)
    job = Job(source, sink, builder, runtime, checker, settings, finished, copies, listener=view)
    previous = signal.signal(signal.SIGTERM, _interrupt)  # a polite kill stops like Ctrl-C
    started = time.perf_counter()
    try:
        with frozen_heap():  # the loaded model, tokenizer and grammar stay out of the job's collections
            outcome = job.run()
    finally:
        signal.signal(signal.SIGTERM, previous)
        view.stop()
    stats = job_stats(sink.counts, outcome, time.perf_counter() - started, metrics(), runtime.model_name,
                      builder.shared_prefix_tokens(), settings, copy_guarded=copies is not None and settings.copy_guard,
                      field_list_shortened=builder.field_list.shortened if builder.field_list else None)
    if a.stats:
        write_stats(a.stats, stats)
    if outcome.failure is not None:
        raise outcome.failure  # one line on stderr (exit 2), or a quiet exit when stdout was closed
    if not a.quiet:
        print_summary(stats)
    if outcome.interrupted:
        return EXIT_INTERRUPTED
    return EXIT_FAILURES if sink.counts.failed > a.max_failures else EXIT_OK


def _interrupt(signum, frame):
    raise KeyboardInterrupt
