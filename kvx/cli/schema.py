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
    from kvx.grammar.check import run_schema_check

    load_schema(schema)  # a file that is not JSON / not a schema: one-line message, exit 2
    raise typer.Exit(run_schema_check(schema, model, as_json))
