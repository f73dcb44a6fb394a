"""The `kvx` command: sub-commands, and the one place errors become one-line messages + exit codes.

Exit codes: 0 all rows ok, 1 some rows not ok (beyond --max-failures), 2 usage or environment error
(bad option, schema, input path, model, output locked or unwritable; during work: the output could
not be written, committed rows kept), 130 interrupted (Ctrl-C / SIGTERM; finished rows are kept),
141 stdout closed by its reader (`| head`), quietly.
"""
from __future__ import annotations

import os
import sys
import warnings

import typer

from kvx.cli.extract import extract
from kvx.cli.models import models
from kvx.cli.options import user_message
from kvx.cli.schema import schema_app
from kvx.errors import KvxError, OutputClosed

EXIT_USAGE, EXIT_INTERRUPTED = 2, 130


class KvxApp(typer.Typer):
    def __call__(self, *args, **kwargs):  # the console script entry point
        sys.exit(main())


app = KvxApp(
    name="kvx",
    help="Batch structured extraction from a local LLM: one schema-valid JSON record per input text.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
app.command("extract")(extract)
app.command("models")(models)
app.add_typer(schema_app, name="schema")


def main(argv: list[str] | None = None) -> int:
    # a schema pattern with `||`, `&&`, `--` or `~~` in a class: Python's re (the record check's)
    # warns that it may read them as set operations one day; it reads them as characters today, as
    # the grammar does, and a library's source line is no message for the user
    warnings.filterwarnings("ignore", message=r"Possible (nested set|set )", category=FutureWarning)
    command = typer.main.get_command(app)
    try:
        rv = command.main(args=argv, prog_name="kvx", standalone_mode=False)
        return rv if isinstance(rv, int) else 0
    except typer.Exit as e:
        return e.exit_code
    except typer.TyperException as e:  # click's usage errors (typer vendors click)
        if type(e).__name__ == "NoArgsIsHelpError":
            e.show()  # bare `kvx`: the help text
            return EXIT_USAGE
        code = getattr(e, "exit_code", EXIT_USAGE)
        return _fail(e.format_message(), code, hint="(see kvx --help)" if code == EXIT_USAGE else "")
    except (typer.Abort, KeyboardInterrupt):
        print("kvx: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except OutputClosed as e:  # `kvx ... | head -1`: the reader has what it wanted
        _silence_stdout()
        return e.exit_code
    except KvxError as e:
        return _fail(user_message(e), e.exit_code)


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush does not fail on the closed pipe."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, AttributeError, ValueError):
        pass


def _fail(message: str, code: int, hint: str = "") -> int:
    line = " ".join(message.split())  # exactly one line, whatever the message held
    print(f"kvx: error: {line}" + (f" {hint}" if hint else ""), file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
