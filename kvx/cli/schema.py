"""`kvx schema check SCHEMA`: can the grammar enforce this schema, and how big is it?"""
from __future__ import annotations

import typer

schema_app = typer.Typer(help="Work with JSON Schemas.", no_args_is_help=True, add_completion=False)


@schema_app.command("check")
def check(
    schema: str = typer.Argument(..., help="JSON Schema file."),
    model: str = typer.Option("smollm2-135m", help="Model whose tokenizer the grammar is built for."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Compile SCHEMA to a token grammar and report what it enforces (exit 2 if unsupported)."""
    from kvx.cli.validation import load_schema

    try:
        from kvx.grammar.check import run_schema_check
    except ImportError:  # the grammar's own report is not there: compile and report the basics
        run_schema_check = basic_check
    load_schema(schema)  # a file that is not JSON / not a schema: one-line message, exit 2
    raise typer.Exit(run_schema_check(schema, model, as_json))


def basic_check(schema_path: str, model_spec: str, as_json: bool) -> int:
    """Compile the schema for the model's tokenizer; UnsupportedSchema (a KvxError) exits 2."""
    import json

    from kvx.cli.validation import load_schema
    from kvx.grammar import compile_schema
    from kvx.models import load_tokenizer

    grammar = compile_schema(load_schema(schema_path), load_tokenizer(model_spec))
    report = {"schema": schema_path, "supported": True, "dfa_states": grammar.stats.dfa_states,
              "compile_ms": round(grammar.stats.compile_ms, 1), "warnings": grammar.warnings,
              "checked_after_generation": grammar.post_checks}
    if as_json:
        typer.echo(json.dumps(report, indent=2))
    else:
        typer.echo(f"{schema_path}: supported ({report['dfa_states']} DFA states, {report['compile_ms']} ms)")
        for w in grammar.warnings:
            typer.echo(f"  warning: {w}")
        if grammar.post_checks:
            typer.echo(f"  checked by jsonschema after generation: {', '.join(grammar.post_checks)}")
    return 0
