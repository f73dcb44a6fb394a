"""`kvx extract`: the command line of the main job (options only; the work is in run.py).

Defaults and choices come from where each option is owned: EngineConfig and its Literals
(kvx/engine/api.py), JobSettings (kvx/job/settings.py), PromptSpec (kvx/prompts.py),
DEFAULT_MODEL (kvx/models/resolve.py); all load without torch, so `kvx --help` stays quick."""
from __future__ import annotations

from typing import Optional, get_args

import typer

from kvx.cli.extract_args import ExtractArgs
from kvx.job.settings import JobSettings
from kvx.cluster.options import ClusterOptions
from kvx.engine.api import Attention, Dtype, EngineConfig, KVDtype
from kvx.grammar.options import ExtraKeys, GrammarOptions, Whitespace
from kvx.models.resolve import DEFAULT_MODEL
from kvx.prompts import PromptSpec


def _listed(choices) -> str:
    return ", ".join(get_args(choices))


def extract(
    input: str = typer.Argument(..., help="Input .jsonl/.ndjson, .csv, .parquet, or '-' for JSONL on stdin."),
    schema: str = typer.Option(..., "--schema", "-s", help="JSON Schema file each record must match."),
    schema_dir: Optional[list[str]] = typer.Option(None, "--schema-dir", help="Folder of saved schemas that the schema's "
                                                   "http(s) $refs name, found by their $id or at host/path (repeatable; "
                                                   "nothing is fetched)."),
    output: Optional[str] = typer.Option(None, "--output", "-o", help="Output .jsonl or .parquet (default: JSONL on stdout)."),
    model: str = typer.Option(DEFAULT_MODEL, help="Model name, GGUF file or HF folder."),
    field: str = typer.Option(PromptSpec.field, help="Input field holding the text (dotted names reach nested fields)."),
    id_field: str = typer.Option("id", help="Input field with the record id (else the line/row number)."),
    template: Optional[str] = typer.Option(None, help="Prompt template FILE with {field} placeholders."),
    system: Optional[str] = typer.Option(None, help="System prompt TEXT, or @FILE."),
    examples: Optional[str] = typer.Option(None, help='Few-shot FILE: JSONL of {"input": ..., "output": ...}.'),
    raw: bool = typer.Option(PromptSpec.raw, help="Plain-text prompt; do not apply the model's chat template."),
    no_schema_prompt: bool = typer.Option(False, "--no-schema-prompt", help="Do not describe the schema in the prompt."),
    schema_style: str = typer.Option(PromptSpec.schema_style, help="Schema in the prompt: fields (a readable list) or json."),
    choices: str = typer.Option(JobSettings.choices, help="Closed choices (enums, true/false, null or a value): greedy, "
                                "rank (whole values by likelihood), calibrated (rank against a content-free prompt) or channel "
                                "(calibrated, plus how likely the text is under each value of an enum field)."),
    mentions: bool = typer.Option(JobSettings.mentions, "--mentions/--no-mentions", help="With --choices calibrated or "
                                  "channel: an enum value whose words the text keeps using gains against the others (the model "
                                  "decides where the text names none)."),
    truncate: str = typer.Option(JobSettings.truncate, help="A text too long for the context: none (error row), or keep its "
                                 "head, tail or middle (both ends)."),
    copy_guard: bool = typer.Option(JobSettings.copy_guard, "--copy-guard/--no-copy-guard", help="With --examples: keep records from "
                                    "repeating an example's values that their own text does not contain."),
    ungrounded: str = typer.Option(JobSettings.ungrounded, help="A value the record's text does not hold, in a nullable "
                                   "free-text or number field (a name, a reference, an amount), or a string there that repeats "
                                   "the record's own enum choice: null (write null) or keep. "
                                   "Either way the row's 'ungrounded' column names it."),
    no_repeat_ngram: int = typer.Option(JobSettings.no_repeat_ngram, help="No run of N tokens twice in one string value "
                                        "unless the text has it too (stops free text that loops; runs without letters count "
                                        "at 3N), and an object that names a key twice closes there (0 = off)."),
    cut_text: str = typer.Option(JobSettings.cut_text, help="Free text that ran into its maxLength (cut mid-sentence by the "
                                 "grammar): sentence (end it at its last full sentence) or keep."),
    copy_codes: bool = typer.Option(JobSettings.copy_codes, "--copy-codes/--no-copy-codes", help="A nullable string field "
                                    "with a pattern (an id, a reference): once the model starts one, it writes a span of "
                                    "the record's text that fits the field, where the text has one."),
    copy_digits: bool = typer.Option(JobSettings.copy_digits, "--copy-digits/--no-copy-digits", help="Digits in a string "
                                     "value (a summary, a name) only as the record's text has them; fields with a pattern, "
                                     "format or enum are left to the schema."),
    ordered: bool = typer.Option(False, help="Write rows in input order (default: as they finish)."),
    resume: bool = typer.Option(False, help="Skip ids already in the output; append the rest."),
    force: bool = typer.Option(False, "--force", help="With --resume: append even if the output was written with another schema, model or prompt."),
    retries: int = typer.Option(JobSettings.retries, help="Retries (with seeded sampling) for an output that fails validation."),
    seed: int = typer.Option(JobSettings.seed, help="Base seed of the retry sampling."),
    max_failures: int = typer.Option(0, help="Exit 0 even with up to N rows not ok."),
    max_tokens: int = typer.Option(JobSettings.max_tokens, help="Output tokens per record at most."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar and no summary."),
    stats: Optional[str] = typer.Option(None, help="Write the run's figures as JSON to FILE."),
    lenient: bool = typer.Option(GrammarOptions.lenient, help="Ignore schema keywords the grammar cannot enforce (jsonschema still checks)."),
    whitespace: str = typer.Option(GrammarOptions.whitespace, help=f"JSON layout the grammar allows: {_listed(Whitespace)}."),
    extra_keys: str = typer.Option(GrammarOptions.extra_keys, help=f"Keys an object's schema does not declare, where it says nothing of others: {_listed(ExtraKeys)} (declared: not written, and a schema naming no type is written as the type its keywords describe; schema: any key and any value, as JSON Schema allows)."),
    compile_deadline: float = typer.Option(GrammarOptions.compile_deadline, metavar="SECONDS", help="CPU seconds the grammar compiler may work before it refuses the schema as too large (the default ends every compile within 1 s)."),
    kv_memory: Optional[str] = typer.Option(None, help="KV cache pool size, e.g. 2GiB (default: a share of free memory)."),
    batch_tokens: int = typer.Option(EngineConfig.batch_tokens, help="Token budget of one engine step."),
    max_seqs: int = typer.Option(EngineConfig.max_seqs, help="Sequences decoded together at most."),
    speculate: int = typer.Option(EngineConfig.speculative_tokens, help="Greedy draft tokens per step copied from the text (same output, fewer steps; 0 = off)."),
    dtype: str = typer.Option(EngineConfig.dtype, help=f"Weights dtype: {_listed(Dtype)}."),
    attention: str = typer.Option(EngineConfig.attention, help=f"Attention backend: {_listed(Attention)}."),
    kv_dtype: str = typer.Option(EngineConfig.kv_dtype, help=f"KV cache dtype: {_listed(KVDtype)}."),
    replicas: int = typer.Option(1, help="Engine replicas on Ray, each with its own model (needs kvx[ray])."),
    ray_address: Optional[str] = typer.Option(None, help="Ray cluster to join (default: start a local one)."),
    replica_cpus: Optional[float] = typer.Option(None, help="CPUs (and torch threads) per replica (default: the cluster's CPUs shared out)."),
    replica_gpus: float = typer.Option(ClusterOptions.replica_gpus, help="GPUs per replica."),
    threads: Optional[int] = typer.Option(None, help="CPU threads for the model (default: the cores this process may use)."),
) -> None:
    """Extract one schema-valid JSON record per input text."""
    args = ExtractArgs.from_options(locals())
    from kvx.cli.threads import prepare_threads

    # before torch loads (OpenMP reads its settings once); replicas on one machine share its cores
    prepare_threads(args.threads, shared=args.replicas > 1)
    from kvx.cli.run import run_extract

    raise typer.Exit(run_extract(args))
