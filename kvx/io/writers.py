"""Choose the output writer from -o, and read back the ids a previous run finished (--resume)."""
from __future__ import annotations

from pathlib import Path
from typing import Protocol

from kvx.errors import ConfigError
from kvx.io.arrow_schema import column_for
from kvx.io.jsonl_writer import JsonlWriter, jsonl_done_ids, truncate_partial_line
from kvx.io.parquet_writer import ParquetWriter, drop_merged_parts, parquet_done_ids
from kvx.io.records import OutputRow


class RowWriter(Protocol):
    committed: int

    def add(self, row: OutputRow) -> int: ...  # rows committed by this call (0 = buffered)

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


def done_ids(path: str | None) -> set[str]:
    """Ids already written to `path` by an earlier (possibly killed) run; repairs a torn tail first."""
    if path is None or path == "-":
        raise ConfigError("--resume needs an output file (-o FILE)")
    p = Path(path)
    if output_format(path) == "parquet":
        drop_merged_parts(p)
        return parquet_done_ids(p)
    if p.exists():
        truncate_partial_line(p)
    return jsonl_done_ids(p)


def open_output(path: str | None, schema: dict, resume: bool = False) -> RowWriter:
    if output_format(path) == "parquet":
        return ParquetWriter(path, column_for(schema), resume=resume)
    return JsonlWriter(None if path in (None, "-") else path, resume=resume)
