"""Streaming readers: JSONL/NDJSON (file or '-' = stdin), CSV and Parquet, one InputRecord at a time.

Nothing reads a whole file: JSONL and CSV go line by line, Parquet batch by batch. A line that cannot
be read (bad UTF-8, bad JSON, not an object) becomes an InputRecord with `error` set, never an
exception, so one bad line cannot stop a run.
"""
from __future__ import annotations

import csv
import io
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Iterator

from kvx.errors import ConfigError
from kvx.io.records import InputRecord

FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".csv": "csv", ".parquet": "parquet"}
COUNT_LINES_UP_TO = 512 << 20  # count lines for the progress total only in files this small
csv.field_size_limit(1 << 30)  # long texts are the norm here; the default is 128 KiB


@dataclass
class InputSource:
    name: str  # what the user passed
    format: str  # "jsonl" | "csv" | "parquet"
    total: int | None  # records expected, when cheap to know (for the progress bar)
    records: Iterator[InputRecord]


def input_format(path: str) -> str:
    if path == "-":
        return "jsonl"
    fmt = FORMATS.get(Path(path).suffix.lower())
    if fmt is None:
        raise ConfigError(f"{path}: unknown input format (use .jsonl, .ndjson, .csv, .parquet or '-')")
    return fmt


def open_input(path: str, id_field: str = "id") -> InputSource:
    fmt = input_format(path)
    if path == "-":
        return InputSource("<stdin>", fmt, None, read_jsonl(sys.stdin.buffer, id_field))
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{path}: no such input file")
    if fmt == "parquet":
        return _open_parquet(p, id_field)
    total = _count_lines(p, fmt) if p.stat().st_size <= COUNT_LINES_UP_TO else None
    reader = read_jsonl if fmt == "jsonl" else read_csv
    return InputSource(path, fmt, total, _from_file(p, reader, id_field))


def _from_file(path: Path, reader, id_field: str) -> Iterator[InputRecord]:
    with open(path, "rb") as f:
        yield from reader(f, id_field)


def record_id(fields: dict[str, Any], id_field: str, number: int) -> str:
    value = fields.get(id_field)
    if value is None or isinstance(value, (bool, dict, list)):
        return str(number)
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def read_jsonl(f: BinaryIO, id_field: str = "id") -> Iterator[InputRecord]:
    index = 0
    for lineno, raw in enumerate(f, start=1):
        if not raw.strip():
            continue  # blank lines (a trailing newline, spacing) are not records
        where = f"line {lineno}"
        fields, error = _parse_json_line(raw)
        rid = record_id(fields, id_field, lineno) if fields is not None else str(lineno)
        yield InputRecord(index, rid, where, fields, error)
        index += 1


def _parse_json_line(raw: bytes) -> tuple[dict | None, str | None]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return None, f"not valid UTF-8 (byte 0x{raw[e.start]:02x} at column {e.start + 1})"
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        return None, f"not valid JSON ({e.msg} at column {e.colno})"
    if not isinstance(value, dict):
        return None, f"expected a JSON object, got {type(value).__name__}"
    return value, None


def read_csv(f: BinaryIO, id_field: str = "id") -> Iterator[InputRecord]:
    # surrogateescape keeps undecodable bytes as lone surrogates so one bad row is reported, not fatal
    text = io.TextIOWrapper(f, encoding="utf-8", errors="surrogateescape", newline="")
    rows = csv.DictReader(text)
    number = 0
    while True:
        number += 1
        where = f"row {number}"
        try:
            row = next(rows)
        except StopIteration:
            return
        except csv.Error as e:
            yield InputRecord(number - 1, str(number), where, None, f"not valid CSV ({e})")
            continue
        row.pop(None, None)  # cells beyond the header have no name
        bad = next((k for k, v in row.items() if _has_surrogates(k) or _has_surrogates(v)), None)
        if bad is not None:
            yield InputRecord(number - 1, str(number), where, None, "not valid UTF-8")
            continue
        yield InputRecord(number - 1, record_id(row, id_field, number), where, row)


def _has_surrogates(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        value.encode("utf-8")
        return False
    except UnicodeEncodeError:
        return True


def _open_parquet(path: Path, id_field: str) -> InputSource:
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except Exception as e:  # pyarrow raises several types for a damaged file
        raise ConfigError(f"{path}: not a readable Parquet file ({e})") from None
    return InputSource(str(path), "parquet", pf.metadata.num_rows, _read_parquet(pf, id_field))


def _read_parquet(pf, id_field: str, batch_size: int = 1024) -> Iterator[InputRecord]:
    number = 0
    for batch in pf.iter_batches(batch_size=batch_size):
        for row in batch.to_pylist():
            number += 1
            yield InputRecord(number - 1, record_id(row, id_field, number), f"row {number}", row)


def _count_lines(path: Path, fmt: str) -> int:
    """Records in a small file: non-blank lines (JSONL) or lines minus the header (CSV)."""
    count = 0
    with open(path, "rb") as f:
        for line in f:
            count += bool(line.strip())
    return max(count - 1, 0) if fmt == "csv" else count
