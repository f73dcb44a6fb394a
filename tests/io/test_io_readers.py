"""Readers stream records and turn unreadable lines into error records naming the place."""
import csv
import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kvx.errors import ConfigError
from kvx.io.readers import open_input, read_csv, read_jsonl


def test_jsonl_ids_errors_and_blank_lines():
    data = b'{"id": 7, "text": "a"}\n\n{"text": "no id"}\n{bad\n\xff\xfe\n"str"\n{"id": true, "text": "b"}'
    recs = list(read_jsonl(io.BytesIO(data)))
    assert [(r.index, r.id, r.where) for r in recs] == [
        (0, "7", "line 1"), (1, "3", "line 3"), (2, "4", "line 4"), (3, "5", "line 5"), (4, "6", "line 6"),
        (5, "7", "line 7")]
    assert recs[0].fields == {"id": 7, "text": "a"} and recs[0].error is None
    assert recs[2].error.startswith("not valid JSON") and recs[2].fields is None
    assert recs[3].error == "not valid UTF-8 (byte 0xff at column 1)"
    assert recs[4].error == "expected a JSON object, got str"
    # a boolean id cannot name a row: an error row, under the line number
    assert recs[5].error == "the id field 'id' holds a boolean, not a string or a number" and recs[5].fields is None


def test_csv_multiline_cells_and_bad_bytes():
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerows([["id", "text"], ["a", "two\nlines"], ["b", "ok"]])
    data = buf.getvalue().encode() + b'c,caf\xe9\n'
    recs = list(read_csv(io.BytesIO(data)))
    assert [(r.id, r.where) for r in recs[:2]] == [("a", "row 1"), ("b", "row 2")]
    assert recs[0].fields["text"] == "two\nlines"
    assert recs[2].error == "not valid UTF-8" and recs[2].where == "row 3"


def test_parquet_streams_by_batches(tmp_path):
    path = tmp_path / "in.parquet"
    pq.write_table(pa.table({"id": [f"r{i}" for i in range(2500)], "text": ["t"] * 2500}), path, row_group_size=700)
    src = open_input(str(path))
    assert src.total == 2500 and src.format == "parquet"
    ids = [r.id for r in src.records]
    assert ids == [f"r{i}" for i in range(2500)]


def test_totals_and_bad_paths(tmp_path):
    p = tmp_path / "a.ndjson"
    p.write_text(json.dumps({"text": "x"}) + "\n\n" + json.dumps({"text": "y"}) + "\n")
    assert open_input(str(p)).total == 2
    with pytest.raises(ConfigError, match="no such input file"):
        open_input(str(tmp_path / "none.jsonl"))
    with pytest.raises(ConfigError, match="unknown input format"):
        open_input(str(tmp_path / "x.xml"))
