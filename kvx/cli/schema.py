"""`kvx schema check SCHEMA [--model M] [--json] [--extra-keys declared|schema] [--schema-dir DIR] [--compile-deadline S]`: can the grammar enforce this schema, and how fast."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from kvx.cli.options import check_choice, check_seconds, user_message
from kvx.errors import KvxError
from kvx.grammar.options import ExtraKeys, GrammarOptions
from kvx.models.resolve import DEFAULT_MODEL

schema_app = typer.Typer(help="Work with JSON Schemas.", no_args_is_help=True, add_completion=False)


@schema_app.command("check")
def check(
    schema: str = typer.Argument(..., help="JSON Schema file."),
    model: str = typer.Option(DEFAULT_MODEL, help="Model whose tokenizer the grammar is built for."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    extra_keys: str = typer.Option(GrammarOptions.extra_keys, help="As kvx extract's --extra-keys."),
    schema_dir: Optional[list[str]] = typer.Option(None, "--schema-dir", help="As kvx extract's --schema-dir."),
    compile_deadline: float = typer.Option(GrammarOptions.compile_deadline, metavar="SECONDS", help="As kvx extract's --compile-deadline."),
) -> None:
    """Compile SCHEMA to a token grammar and report what it enforces (exit 2 if unsupported)."""
    from kvx.job.validation import load_schema

    options = GrammarOptions(extra_keys=check_choice(extra_keys, ExtraKeys, "extra_keys"),
                             compile_deadline=check_seconds(compile_deadline, "compile_deadline"))
    loaded = load_schema(schema, schema_dir or ())  # a file that is not JSON / not a schema: one-line message, exit 2
    raise typer.Exit(run_schema_check(schema, model, as_json, loaded=loaded, options=options))


def _load_tokenizer(model_spec: str | None):
    from kvx.models import load_tokenizer

    return load_tokenizer(model_spec)


def _read_schema(schema_path: str) -> dict:
    from kvx.job.schema_files import bundle_files

    path = Path(schema_path)
    try:
        schema = json.loads(path.read_text(encoding="utf-8-sig"))  # a BOM is not part of the schema
        return bundle_files(schema, path) if isinstance(schema, dict) else schema
    except OSError as err:
        raise KvxError(f"{schema_path}: cannot read schema ({err.strerror})") from None
    except json.JSONDecodeError as err:
        raise KvxError(f"{schema_path}:{err.lineno}: invalid JSON ({err.msg})") from None


def prompt_report(schema: dict, tokenizer, context: int) -> dict:
    """The prompt part every record shares (system text + schema description) against the model's
    context, as `kvx extract` builds it: it refuses to start when that leaves no room for the record."""
    from kvx.prompts import PromptBuilder, PromptSpec, field_list_budget, shared_prompt_problem

    builder = PromptBuilder(PromptSpec(), schema, tokenizer, field_list_budget(context))
    tokens = builder.shared_prefix_tokens()
    fields = builder.field_list
    return dict(prompt_tokens=tokens, context=context, prompt_problem=shared_prompt_problem(tokens, context, True),
                field_list_shortened=fields.shortened if fields else None)


def run_schema_check(schema_path: str, model_spec: str | None, as_json: bool, tokenizer=None,
                     loaded: dict | None = None, options: GrammarOptions = GrammarOptions()) -> int:
    """Print the report (or the one-line reason) and return the exit code: 0 supported, 2 not (or
    supported, but `kvx extract` would refuse the prompt it makes). With the model's tokenizer loaded
    here its context is known and the prompt is measured too. `loaded`: the schema already read
    (the command reads the file once)."""
    from kvx.grammar.check import schema_report
    from kvx.code_spans import code_fields
    from kvx.cut_text import TextCut
    from kvx.digit_guard import shaped_places
    from kvx.grounding import grounded_fields
    from kvx.job.schema_files import bundled_files
    from kvx.record_fields import pointer

    context = None
    try:
        schema = loaded if loaded is not None else _read_schema(schema_path)
        if tokenizer is None:
            tokenizer = _load_tokenizer(model_spec)
            context = tokenizer.context_length
        report = {"schema": schema_path, **schema_report(schema, tokenizer, options),
                  "grounded": sorted(map(pointer, grounded_fields(schema))),
                  "cut_at_sentence": sorted(map(pointer, TextCut.of(schema).fields)),
                  "codes_from_text": sorted(map(pointer, code_fields(schema))),
                  "digits_left_to_schema": sorted(map(pointer, shaped_places(schema))),
                  "files": bundled_files(schema)}
        if context is not None:
            report.update(prompt_report(schema, tokenizer, context))
    except KvxError as err:
        if as_json:
            print(json.dumps({"schema": schema_path, "supported": False, "error": user_message(err)}))
        else:
            print(f"unsupported: {user_message(err)}")
        return 2
    code = 2 if report.get("prompt_problem") else 0
    if as_json:
        print(json.dumps(report))
        return code
    print(f"supported: yes ({schema_path})")
    if report["files"]:
        print(f"files bundled in ($ref): {', '.join(report['files'])}")
    print(f"automaton: {report['dfa_states']} states in {report['rules']} rules")
    print(f"compile time: {report['compile_ms']:.1f} ms (+ {report['tokenizer_prep_ms']:.0f} ms one-time tokenizer tables)")
    print(f"first mask: {report['first_mask_ms']:.2f} ms")
    if report["near_deadline"]:
        print(f"warning: the compile took {report['compile_cpu_ms'] / 1e3:.3g} s of CPU, near its "
              f"{options.compile_deadline:g} s deadline: a busier or slower machine may refuse it "
              "(--compile-deadline gives it longer)")
    for w in report["warnings"]:
        print(f"warning: {w}")
    if report["post_checks"]:
        print("checked after generation: " + ", ".join(report["post_checks"]))
    if report["grounded"]:
        print("checked against each record's text (null where it lacks the value; --ungrounded): "
              + ", ".join(report["grounded"]))
    if report["cut_at_sentence"]:
        print("ended at their last full sentence where the grammar cuts them at maxLength (--cut-text): "
              + ", ".join(report["cut_at_sentence"]))
    if report["codes_from_text"]:
        print("codes written as a span of each record's text where it holds one (--copy-codes): "
              + ", ".join(report["codes_from_text"]))
    shaped = report["digits_left_to_schema"]
    print("digits in string values only as each record's text has them (--copy-digits)"
          + (f", but where the schema shapes them: {', '.join(shaped)}" if shaped else ""))
    if "prompt_tokens" in report:
        print(f"prompt: {report['prompt_problem']}" if code else
              f"prompt: {report['prompt_tokens']:,} tokens shared by every record (system text + schema) "
              f"of the model's {report['context']:,}"
              + (f"; the schema's field list is shortened to fit ({report['field_list_shortened']})"
                 if report.get("field_list_shortened") else ""))
    return code
