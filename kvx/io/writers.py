"""Choose the output writer from -o, and read back what a previous run finished (--resume)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from kvx.errors import ConfigError, KvxError
from kvx.io.arrow_schema import column_for
from kvx.io.done_rows import DoneRows
from kvx.io.fingerprint import Fingerprint, check_resume
from kvx.io.jsonl_writer import JsonlWriter, jsonl_done_rows, jsonl_fingerprints, truncate_partial_line
from kvx.io.parquet_writer import (ParquetWriter, check_record_type, drop_merged_parts, parquet_done_rows,
                                   parquet_fingerprints, parquet_schemas)
from kvx.io.records import OutputRow


class RowWriter(Protocol):
    committed: int
    failed: KvxError | None  # set once a commit failed; nothing is written after it

    def add(self, row: OutputRow) -> int: ...  # rows committed by this call (0 = buffered)

    def unfit(self, record: Any) -> str | None: ...  # why this output cannot hold a valid record exactly

    def commit(self) -> int: ...

    def close(self) -> int: ...


def output_format(path: str | None) -> str:
    if path is None or path == "-":
        return "jsonl"
    suffix = Path(path).suffix.lower()
    if suffix in (".jsonl", ".ndjson", ".json"):
        return "jsonl"
    if suffix == ".parquet":
        return "parquet"
    raise ConfigError(f"{path}: unknown output format (use .jsonl, .ndjson or .parquet)")


def check_output_path(output: str | None, input: str, others: dict[str, str | None]) -> None:
    """ConfigError (exit 2, before any work) if -o is a folder or the input itself (same file, hard
    link or symlink), or if another file the run writes (`others`: option -> path) is one of them."""
    if output not in (None, "-") and Path(output).is_dir():
        raise ConfigError(f"-o {output}: is a folder; name a file in it, e.g. {Path(output) / 'rows.jsonl'}")
    written = [("-o", output), *others.items()]
    for i, (option, path) in enumerate(written):
        if path in (None, "-"):
            continue
        for what, other in [("the input", input), *((f"the {o} file", q) for o, q in written[:i])]:
            if other not in (None, "-") and _same_file(path, other):
                raise ConfigError(f"{option} {path} is {what} ({other}); the run would overwrite it: "
                                  f"choose another file")


def _same_file(a: str, b: str) -> bool:
    try:
        return Path(a).samefile(b)
    except OSError:  # one of them does not exist (yet): they cannot be the same file
        return False


def read_done(path: str | None, schema: dict, fingerprint: Fingerprint, force: bool = False) -> DoneRows:
    """What an earlier (possibly killed) run of this job wrote to `path`; repairs a torn tail first.
    ConfigError if it was another job (fingerprint) and not --force, or cannot be appended to."""
    if path is None or path == "-":
        raise ConfigError("--resume needs an output file (-o FILE)")
    p = Path(path)
    done = DoneRows()
    if output_format(path) == "parquet":
        drop_merged_parts(p)
        schemas = parquet_schemas(p)
        check_resume(parquet_fingerprints(schemas), fingerprint, path, force)
        check_record_type(schemas, column_for(schema).type)
        parquet_done_rows(p, done)
        return done
    check_resume(jsonl_fingerprints(p), fingerprint, path, force)
    if p.exists():
        truncate_partial_line(p)
    jsonl_done_rows(p, done)
    return done


def open_output(path: str | None, schema: dict, fingerprint: Fingerprint | None = None,
                resume: bool = False) -> RowWriter:
    if output_format(path) == "parquet":
        return ParquetWriter(path, column_for(schema), fingerprint, resume=resume)
    return JsonlWriter(None if path in (None, "-") else path, fingerprint, resume=resume)
