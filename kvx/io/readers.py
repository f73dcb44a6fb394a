"""Streaming readers: JSONL/NDJSON (file or '-' = stdin), CSV and Parquet, one InputRecord at a time.

Nothing reads a whole file: JSONL and CSV go line by line, Parquet batch by batch. A line that cannot
be read (bad UTF-8, bad JSON, not an object, a lone surrogate, nesting past json_values.MAX_DEPTH, an
unclosed CSV quote, a damaged Parquet row group) becomes an InputRecord with `error` set, never an
exception, so one bad line cannot stop a run. A UTF-8 byte order mark before the first line is
skipped. Every source flags repeated ids (kvx/io/duplicates.py).
"""
from __future__ import annotations

import csv
import io
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Iterator

from kvx.errors import ConfigError, one_line
from kvx.io.duplicates import flag_duplicates
from kvx.io.ids import record_id
from kvx.io.json_values import decode_problem, surrogate_at, value_problem
from kvx.io.records import InputRecord

FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".csv": "csv", ".parquet": "parquet"}
COUNT_LINES_UP_TO = 512 << 20  # count lines for the progress total only in files this small
BOM = b"\xef\xbb\xbf"
csv.field_size_limit(1 << 30)  # long texts are the norm here; the default is 128 KiB


@dataclass
class InputSource:
    name: str  # what the user passed
    format: str  # "jsonl" | "csv" | "parquet"
    total: int | None  # records expected, when cheap to know (for the progress bar)
    records: Iterator[InputRecord]
    columns: tuple[str, ...] | None = None  # every record's field names (CSV header, Parquet schema); None: JSONL


def input_format(path: str) -> str:
    if path == "-":
        return "jsonl"
    fmt = FORMATS.get(Path(path).suffix.lower())
    if fmt is None:
        raise ConfigError(f"{path}: unknown input format (use .jsonl, .ndjson, .csv, .parquet or '-')")
    return fmt


def open_input(path: str, id_field: str = "id") -> InputSource:
    """The input's records, each id's repeats flagged; ConfigError (exit 2) if it cannot be opened."""
    source = _open_source(path, id_field)
    source.records = flag_duplicates(source.records)
    return source


def _open_source(path: str, id_field: str) -> InputSource:
    fmt = input_format(path)
    if path == "-":
        if sys.stdin is None:  # started with stdin closed (`<&-`)
            raise ConfigError("stdin is closed: pass an input file, or pipe JSONL into kvx")
        return InputSource("<stdin>", fmt, None, read_jsonl(sys.stdin.buffer, id_field))
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{path}: no such input file")
    if fmt == "parquet":
        return _open_parquet(p, id_field)
    total = _count_lines(p, fmt) if p.stat().st_size <= COUNT_LINES_UP_TO else None
    reader = read_jsonl if fmt == "jsonl" else read_csv
    return InputSource(path, fmt, total, _from_file(p, reader, id_field), _csv_header(p) if fmt == "csv" else None)


def _csv_header(path: Path) -> tuple[str, ...] | None:
    """The CSV's column names, read as read_csv reads them (None where it cannot: its error row says why)."""
    try:
        with open(path, "rb") as f:
            lines = _CsvLines(f)
            header = next(csv.reader(lines), None)
            return None if header is None or lines.cut else tuple(header)
    except (OSError, csv.Error):
        return None


def _from_file(path: Path, reader, id_field: str) -> Iterator[InputRecord]:
    with open(path, "rb") as f:
        yield from reader(f, id_field)


def _record(index: int, number: int, where: str, fields: dict | None, error: str | None,
            id_field: str) -> InputRecord:
    """An InputRecord whose id comes from `fields` (else the line/row number); a bad id is its error."""
    if fields is None:
        return InputRecord(index, str(number), where, None, error)
    rid, id_problem = record_id(fields, id_field, number)
    problem = error or id_problem
    return InputRecord(index, rid, where, None if problem else fields, problem)


def read_jsonl(f: BinaryIO, id_field: str = "id") -> Iterator[InputRecord]:
    index = 0
    for lineno, raw in enumerate(f, start=1):
        if lineno == 1 and raw.startswith(BOM):
            raw = raw[len(BOM):]  # a UTF-8 byte order mark (Windows editors) is not part of the record
        if not raw.strip():
            continue  # blank lines (a trailing newline, spacing) are not records
        fields, error = _parse_json_line(raw)
        yield _record(index, lineno, f"line {lineno}", fields, error, id_field)
        index += 1


def _parse_json_line(raw: bytes) -> tuple[dict | None, str | None]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return None, f"not valid UTF-8 (byte 0x{raw[e.start]:02x} at column {e.start + 1})"
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        return None, decode_problem(e)
    except RecursionError:
        return None, "not usable JSON (nested too deeply)"
    except ValueError as e:  # e.g. an integer of more than 4,300 digits
        return None, f"not usable JSON ({one_line(e, 120)})"
    if not isinstance(value, dict):
        return None, f"expected a JSON object, got {type(value).__name__}"
    problem = value_problem(value)  # the id is still read from a refused record, for its row
    return value, (f"not usable JSON: {problem}" if problem else None)


def read_csv(f: BinaryIO, id_field: str = "id") -> Iterator[InputRecord]:
    """Rows under the header line. A quote never closed would swallow the rest of the file into
    one cell: that row becomes an error row and reading goes on at the line after it."""
    lines = _CsvLines(f)
    rows = csv.reader(lines)
    try:
        header = next(rows, None)
    except csv.Error as e:
        header, problem = None, f"not valid CSV (the header line cannot be read: {e})"
    else:
        problem = "not valid CSV (a quote opened in the header is never closed)" if lines.cut and header else None
    if problem:  # without a header no row can be read: one error row says why
        yield _record(0, 1, "line 1", None, problem, id_field)
    if problem or header is None:  # header is None: an empty file
        return
    number = 0
    while True:
        first_line = lines.offset + rows.line_num + 1
        try:
            cells = next(rows)
        except StopIteration:
            return
        except csv.Error as e:  # a NUL byte, a cell over the size limit
            number += 1
            yield _record(number - 1, number, f"row {number}", None, f"not valid CSV ({e})", id_field)
            continue
        if not cells:
            continue  # a blank line
        number += 1
        if lines.cut:  # csv reached the end of the file inside this row: an unclosed quote
            before = dict(zip(header, cells[:-1]))  # the last cell is the one that ran on; the others are whole
            yield _record(number - 1, number, f"row {number}", before, f"not valid CSV (a quote opened on line "
                          f"{first_line} is never closed; reading goes on at line {first_line + 1})", id_field)
            if not lines.restart(first_line):
                return
            rows = csv.reader(lines)
            continue
        yield _csv_record(number, header, cells, id_field)


class _CsvLines:
    """The file's text lines for csv.reader (BOM skipped, bad bytes kept as surrogates), noting
    whether csv asked for more inside a row after the last line; can start again at a later line."""

    def __init__(self, f: BinaryIO):
        self.f, self.offset, self.cut = f, 0, False
        self._open()

    def _open(self) -> None:
        # utf-8-sig drops a byte order mark; surrogateescape keeps undecodable bytes (one bad row, not fatal)
        self.text = io.TextIOWrapper(self.f, encoding="utf-8-sig", errors="surrogateescape", newline="")

    def __iter__(self):
        return self

    def __next__(self) -> str:
        line = self.text.readline()
        if not line:
            self.cut = True
            raise StopIteration
        return line

    def restart(self, after_line: int) -> bool:
        """Read again from the line after `after_line`; False where the input cannot seek back."""
        if not self.f.seekable():
            return False
        self.text.detach()  # keep self.f open
        self.f.seek(0)
        self._open()
        for _ in range(after_line):
            self.text.readline()
        self.offset, self.cut = after_line, False
        return True


def _csv_record(number: int, header: list[str], cells: list[str], id_field: str) -> InputRecord:
    where = f"row {number}"
    row = {name: cells[i] if i < len(cells) else None for i, name in enumerate(header)}
    if any(isinstance(x, str) and surrogate_at(x) >= 0 for kv in row.items() for x in kv):
        return _record(number - 1, number, where, None, "not valid UTF-8", id_field)
    return _record(number - 1, number, where, row, None, id_field)


def _open_parquet(path: Path, id_field: str) -> InputSource:
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except Exception as e:  # pyarrow raises several types for a damaged file
        raise ConfigError(f"{path}: not a readable Parquet file ({e})") from None
    return InputSource(str(path), "parquet", pf.metadata.num_rows, _read_parquet(pf, id_field),
                       tuple(pf.schema_arrow.names))


def _read_parquet(pf, id_field: str, batch_size: int = 1024) -> Iterator[InputRecord]:
    """Row group by row group: a damaged group's unread rows become error rows; later groups go on."""
    number, groups = 0, pf.metadata.num_row_groups
    for g in range(groups):
        first, end = number + 1, number + pf.metadata.row_group(g).num_rows
        try:
            for batch in pf.iter_batches(batch_size=batch_size, row_groups=[g]):
                for row in batch.to_pylist():
                    number += 1
                    yield _record(number - 1, number, f"row {number}", row, None, id_field)
        except Exception as e:  # noqa: BLE001 - pyarrow raises OSError, ArrowInvalid, ... for a bad page
            reason = one_line(e, 200)
            problem = f"unreadable: row group {g + 1} of {groups} (rows {first}-{end}) is damaged ({reason})"
            ids = _group_ids(pf, g, id_field, first)
            while number < end:
                number += 1
                rid = ids[number - first] if ids else str(number)
                yield InputRecord(number - 1, rid, f"row {number}", None, problem)


def _group_ids(pf, group: int, id_field: str, first: int) -> list[str] | None:
    """The ids of a damaged row group, where its id column can still be read."""
    try:
        values = pf.read_row_group(group, columns=[id_field]).column(0).to_pylist()
    except Exception:  # noqa: BLE001 - the id column is damaged too, or there is none
        return None
    return [record_id({id_field: v}, id_field, first + i)[0] for i, v in enumerate(values)]


def _count_lines(path: Path, fmt: str) -> int:
    """Records in a small file: non-blank lines (JSONL) or lines minus the header (CSV)."""
    count = 0
    with open(path, "rb") as f:
        for line in f:
            count += bool(line.strip())
    return max(count - 1, 0) if fmt == "csv" else count
