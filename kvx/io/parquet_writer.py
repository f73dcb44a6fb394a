"""Parquet output with typed columns, durable and resumable.

While a job runs, each committed batch is its own small Parquet file in `OUT.parquet.parts/`,
written to `*.tmp`, fsynced, then renamed (atomic): a part either exists whole or not at all.
On close the parts are merged into `OUT.parquet` (again tmp + fsync + rename). The merged file's
metadata lists the parts it absorbed, so a crash between the rename and deleting the parts cannot
double-count them: `--resume` first deletes parts the finished file already names. Every file
(parts and merged) carries the job's fingerprint in its metadata (kvx/io/fingerprint.py).
"""
from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from kvx.errors import ConfigError, OutputError, one_line
from kvx.io.arrow_schema import Column, DoesNotFit, output_schema, ungrounded_entries
from kvx.io.commit_policy import BufferedWriter, CommitPolicy, fsync_dir
from kvx.io.done_rows import DoneRows
from kvx.io.fingerprint import Fingerprint
from kvx.io.records import OutputRow

MERGED_KEY = b"kvx.merged_parts"
FINGERPRINT_KEY = b"kvx.fingerprint"


def parts_dir(path: Path) -> Path:
    return path.with_name(path.name + ".parts")


class ParquetWriter(BufferedWriter):
    io_errors = (OSError, pa.ArrowException)

    def __init__(self, path: str, record: Column, fingerprint: Fingerprint | None = None, resume: bool = False,
                 policy: CommitPolicy | None = None):
        super().__init__(policy or CommitPolicy(max_rows=512, max_seconds=2.0), path)
        self.path = Path(path)
        self.parts = parts_dir(self.path)
        self.record = record
        meta = {FINGERPRINT_KEY: fingerprint.to_json().encode()} if fingerprint is not None else None
        self.schema = output_schema(record).with_metadata(meta)
        self._run = f"{time.time_ns():x}"  # part names are unique across runs
        self._seq = 0
        try:
            if resume:
                drop_merged_parts(self.path)
            else:
                shutil.rmtree(self.parts, ignore_errors=True)
                self.path.unlink(missing_ok=True)
            self.parts.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ConfigError(f"{self.path}: cannot write the output ({e.strerror or e})") from None

    def unfit(self, record: Any) -> str | None:
        try:
            self.record.stored(record)
        except DoesNotFit as e:
            return str(e)
        return None

    def add(self, row: OutputRow) -> int:
        d = row.to_dict()
        d["record"] = self.record.stored(d["record"])  # the job checked it with unfit()
        d["ungrounded"] = ungrounded_entries(d["ungrounded"])
        return self._buffer(d)

    def _flush(self, batch: list[dict]) -> None:
        self._seq += 1
        final = self.parts / f"part-{self._run}-{self._seq:06d}.parquet"
        _write_atomically(pa.Table.from_pylist(batch, schema=self.schema), final, self.schema)

    def close(self) -> int:
        n = self.commit()
        if self.failed is None:  # after a failed write the parts stay for --resume
            try:
                merge_parts(self.path, self.schema)
            except self.io_errors as e:
                reason = one_line(e, 300)
                raise OutputError(f"cannot merge the parts of {self.path} ({reason}); the committed rows stay "
                                  f"in {self.parts}/: fix it and rerun with --resume") from None
        return n


def _write_atomically(table: pa.Table, final: Path, schema: pa.Schema) -> None:
    tmp = final.with_name(final.name + ".tmp")
    with pq.ParquetWriter(tmp, schema) as w:
        w.write_table(table)
    _fsync_file(tmp)
    os.replace(tmp, final)
    fsync_dir(final.parent)


def _fsync_file(path: Path) -> None:
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def _part_files(parts: Path) -> list[Path]:
    return sorted(parts.glob("part-*.parquet")) if parts.is_dir() else []


def merge_parts(path: Path, schema: pa.Schema) -> None:
    """Fold OUT (if any) and all committed parts into OUT, atomically; then remove the parts."""
    parts = parts_dir(path)
    files = _part_files(parts)
    names = [f.name for f in files]
    meta = dict(schema.metadata or {})
    meta[MERGED_KEY] = json.dumps(names).encode()
    tmp = path.with_name(path.name + ".tmp")
    with pq.ParquetWriter(tmp, schema.with_metadata(meta)) as w:
        sources = ([path] if path.exists() else []) + files
        for src in sources:
            pf = pq.ParquetFile(src)
            for i in range(pf.num_row_groups):  # row group by row group: memory stays flat
                w.write_table(_conformed(pf.read_row_group(i), schema).replace_schema_metadata(meta))
    _fsync_file(tmp)
    os.replace(tmp, path)
    fsync_dir(path.parent)
    shutil.rmtree(parts, ignore_errors=True)


def _conformed(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """`table` in `schema`; a column an older kvx did not write (e.g. `ungrounded`) is null."""
    for f in schema:
        if f.name not in table.column_names:
            table = table.append_column(f, pa.nulls(table.num_rows, f.type))
    return table.select(schema.names).cast(schema)


def drop_merged_parts(path: Path) -> None:
    """Before resuming: remove half-written tmp files and parts that OUT already contains."""
    parts = parts_dir(path)
    path.with_name(path.name + ".tmp").unlink(missing_ok=True)
    if not parts.is_dir():
        return
    for tmp in parts.glob("*.tmp"):
        tmp.unlink()
    merged = set(_merged_names(path)) if path.exists() else set()
    for f in _part_files(parts):
        if f.name in merged:
            f.unlink()


def _merged_names(path: Path) -> list[str]:
    try:
        meta = pq.read_schema(path).metadata or {}
    except Exception as e:
        raise ConfigError(f"{path}: not a readable Parquet file ({e}); cannot --resume from it") from None
    return json.loads(meta.get(MERGED_KEY, b"[]"))


def _outputs(path: Path) -> list[Path]:
    """OUT (if any) and its committed parts (call after drop_merged_parts)."""
    return ([path] if path.exists() else []) + _part_files(parts_dir(path))


def parquet_fingerprints(schemas: list[tuple[Path, pa.Schema]]) -> list[Fingerprint | None]:
    """The fingerprints of OUT and its parts (parquet_schemas; None for a file without one)."""
    return [Fingerprint.from_json((schema.metadata or {}).get(FINGERPRINT_KEY, b"")) for _, schema in schemas]


def check_record_type(schemas: list[tuple[Path, pa.Schema]], record_type: pa.DataType) -> None:
    """ConfigError if OUT or a part (parquet_schemas) holds records of another Arrow type: even
    --force cannot put both in one file (the merge would fail after all the work)."""
    for src, schema in schemas:
        if "record" in schema.names and schema.field("record").type != record_type:
            # a big schema's type is thousands of characters: cut, the message stays readable
            raise ConfigError(f"--resume: {src} holds records of another type ({one_line(schema.field('record').type, 120)}), "
                              f"which cannot share a Parquet file with this schema's ({one_line(record_type, 120)}); "
                              f"write to another -o, or rerun without --resume to replace it")


def parquet_schemas(path: Path) -> list[tuple[Path, pa.Schema]]:
    """(file, its Arrow schema) for OUT and its committed parts: each footer read once."""
    out = []
    for src in _outputs(path):
        try:
            out.append((src, pq.read_schema(src)))
        except Exception as e:  # noqa: BLE001 - pyarrow raises several types for a damaged file
            raise ConfigError(f"{src}: not a readable Parquet file ({e}); cannot --resume from it") from None
    return out


def parquet_done_rows(path: Path, done: DoneRows) -> None:
    """Add the rows in OUT plus its committed parts to `done` (call after drop_merged_parts)."""
    for src in _outputs(path):
        try:
            table = pq.read_table(src, columns=["id", "error"])
        except Exception as e:  # noqa: BLE001 - pyarrow raises several types for a damaged file
            raise ConfigError(f"{src}: not a kvx output file ({e}); cannot --resume from it") from None
        for rid, error in zip(table.column("id").to_pylist(), table.column("error").to_pylist()):
            done.add(str(rid), error)
