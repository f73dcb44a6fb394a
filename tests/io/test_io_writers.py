"""Writers: typed Parquet columns from JSON Schema, and the crash states --resume must survive."""
import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kvx.io.arrow_schema import MAX_COLUMNS, DoesNotFit, column_for
from kvx.io.parquet_writer import MERGED_KEY, ParquetWriter, merge_parts, parts_dir
from kvx.io.fingerprint import job_fingerprint
from kvx.io.records import OutputRow, RowUsage
from kvx.io.writers import open_output, read_done

REPO = Path(__file__).resolve().parents[2]
ENUM = pa.dictionary(pa.int32(), pa.string())


def test_column_types_from_schemas():
    inv = column_for(json.loads((REPO / "schemas" / "invoice.json").read_text())).type
    assert inv.field("issue_date").type == pa.string()
    assert inv.field("currency").type == ENUM
    assert inv.field("seller").type.field("email").type == pa.string()
    item = inv.field("line_items").type.value_type
    assert item.field("quantity").type == pa.int64() and item.field("unit_price").type == pa.float64()
    assert inv.field("tax_rate_percent").type == pa.float64()  # ["number", "null"]
    plan = column_for(json.loads((REPO / "schemas" / "sql_query_plan.json").read_text())).type
    assert plan.field("limit").type == pa.int64() and plan.field("intent").type == pa.string()
    assert plan.field("filters").type.value_type.field("value").type == pa.string()  # mixed anyOf: JSON text
    assert plan.field("order_by").type.field("direction").type == ENUM


def test_mixed_and_free_form_values_kept_as_json_text():
    col = column_for({"type": "object", "properties": {
        "v": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
        "n": {"anyOf": [{"type": "integer"}, {"type": "number"}]},
        "free": {"type": "object"},
        "whole": {"type": "integer"}, "big": {"type": "integer"}, "exact": {"type": "number"}}})
    assert col.stored({"v": 3, "n": 2, "free": {"a": [1]}, "whole": 2.0, "big": 2**63 - 1, "exact": 2**60}) == {
        "v": "3", "n": 2.0, "free": '{"a": [1]}', "whole": 2,  # 2.0 is an integer to JSON Schema
        "big": 2**63 - 1, "exact": float(2**60),  # the edges: int64's largest; a float64 holds 2**60 exactly
        "_extra": None}  # open object: no extra keys here


@pytest.mark.parametrize("schema, value, where, what", [
    ({"type": "integer"}, 2**63, "/x/1", "(9223372036854775808) is past int64"),
    ({"type": "integer"}, -(2**63) - 1, "/x/1", "is past int64"),
    ({"type": "number"}, 10**400, "/x/1", "is past float64"),
    ({"type": "number"}, 2**53 + 1, "/x/1", "(9007199254740993) would be rounded by float64"),
    ({"anyOf": [{"type": "integer"}, {"type": "number"}]}, 2**53 + 1, "/x/1", "would be rounded"),
    ({"properties": {"a": {"type": "string"}}}, "no type: any value", "/x/1", "is not an object"),
    ({"type": "integer"}, 1.5, "/x/1", "(1.5) is not an integer"),
])
def test_a_value_its_column_cannot_hold_is_named_not_stored_as_null(schema, value, where, what):
    col = column_for({"type": "object", "properties": {"x": {"type": "array", "items": schema}, "a~/b": schema}})
    assert col.stored({"x": [None, None]})["x"] == [None, None]  # null stays null
    with pytest.raises(DoesNotFit) as e:
        col.stored({"x": [None, value]})
    assert f"the value at {where} " in str(e.value) and what in str(e.value)
    with pytest.raises(DoesNotFit, match="at /a~0~1b "):
        col.stored({"a~/b": value})


def rows(ids, status="ok"):
    rec = {"category": "billing", "priority": "low", "sentiment": "neutral", "summary": "short text",
           "requires_refund": False, "tags": ["x"]}
    return [OutputRow(i, status, rec if status == "ok" else None, None, 1, RowUsage(5, 2, 9)) for i in ids]


SCHEMA = json.loads((REPO / "schemas" / "ticket.json").read_text())
FP = job_fingerprint(SCHEMA, "test-model", {})


def done_ids(out):
    return read_done(str(out), SCHEMA, FP).ids


def test_parquet_parts_merge_and_resume(tmp_path):
    out = tmp_path / "o.parquet"
    w = open_output(str(out), SCHEMA, FP)
    for r in rows(["a", "b"]):
        w.add(r)
    assert w.commit() == 2 and len(list(parts_dir(out).glob("part-*.parquet"))) == 1
    for r in rows(["c"], "error"):
        w.add(r)
    w.commit()
    # crash here: parts exist, no merged file yet
    assert done_ids(str(out)) == {"a", "b", "c"}
    w2 = open_output(str(out), SCHEMA, FP, resume=True)
    for r in rows(["d"]):
        w2.add(r)
    w2.close()
    t = pq.read_table(out)
    assert sorted(t.column("id").to_pylist()) == ["a", "b", "c", "d"] and not parts_dir(out).exists()
    assert t.schema.field("record").type.field("category").type == ENUM
    assert t.to_pylist()[0]["usage"] == {"prompt_tokens": 5, "cached_tokens": 2, "generated_tokens": 9,
                                             "truncated_tokens": 0}


def test_ungrounded_values_are_a_map_column_and_old_outputs_resume(tmp_path):
    """`ungrounded` maps a JSON pointer to the value as JSON text; an output an older kvx wrote
    (no such column) resumes, its rows getting null there."""
    out = tmp_path / "o.parquet"
    w = open_output(str(out), SCHEMA, FP)
    a, b = rows(["a", "b"])
    b.ungrounded = {"/customer_name": "Ada Lovelace", "/tags/0": 7}
    w.add(a), w.add(b)
    w.close()
    t = pq.read_table(out)
    assert t.column("ungrounded").to_pylist() == [None, [("/customer_name", '"Ada Lovelace"'), ("/tags/0", "7")]]
    pq.write_table(t.drop_columns(["ungrounded"]), out)  # as kvx wrote it before the column existed
    w2 = open_output(str(out), SCHEMA, FP, resume=True)
    w2.add(rows(["c"])[0])
    w2.close()
    t = pq.read_table(out)
    assert t.column("id").to_pylist() == ["a", "b", "c"] and t.column("ungrounded").to_pylist() == [None] * 3


def test_crash_between_merge_rename_and_part_cleanup(tmp_path):
    out = tmp_path / "o.parquet"
    w = ParquetWriter(str(out), column_for(SCHEMA), FP)
    for r in rows(["a", "b"]):
        w.add(r)
    w.commit()
    kept = {p.name: p.read_bytes() for p in parts_dir(out).glob("*")}
    merge_parts(out, w.schema)
    parts_dir(out).mkdir()  # simulate: renamed into place, killed before the parts were deleted
    for name, data in kept.items():
        (parts_dir(out) / name).write_bytes(data)
    (parts_dir(out) / "part-x-000009.parquet.tmp").write_bytes(b"half a file")
    assert json.loads(pq.read_schema(out).metadata[MERGED_KEY]) == list(kept)
    assert done_ids(str(out)) == {"a", "b"}
    assert list(parts_dir(out).iterdir()) == []  # merged parts and the torn tmp are gone
    w2 = ParquetWriter(str(out), column_for(SCHEMA), FP, resume=True)
    w2.close()
    assert sorted(pq.read_table(out).column("id").to_pylist()) == ["a", "b"]  # never duplicated


def test_jsonl_torn_tail_is_cut_on_resume(tmp_path):
    out = tmp_path / "o.jsonl"
    w = open_output(str(out), SCHEMA, FP)
    for r in rows(["a", "b"]):
        w.add(r)
    w.close()
    with open(out, "ab") as f:
        f.write(b'{"id": "c", "status": "o')  # killed mid-write
    assert done_ids(str(out)) == {"a", "b"}
    assert out.read_bytes().endswith(b"}\n")
    w = open_output(str(out), SCHEMA, FP, resume=True)
    for r in rows(["c"]):
        w.add(r)
    w.close()
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == ["a", "b", "c"]


def test_fresh_run_replaces_old_output(tmp_path):
    out = tmp_path / "o.parquet"
    w = open_output(str(out), SCHEMA, FP)
    for r in rows(["a"]):
        w.add(r)
    w.close()
    w = open_output(str(out), SCHEMA, FP)  # no --resume: start over
    assert not out.exists()
    w.close()
    assert pq.read_table(out).num_rows == 0


def test_parquet_write_failure_stops_once_and_keeps_committed_parts(tmp_path, monkeypatch):
    import errno

    from kvx.errors import OutputError
    from kvx.io import parquet_writer

    out = tmp_path / "o.parquet"
    w = open_output(str(out), SCHEMA, FP)
    for r in rows(["a", "b"]):
        w.add(r)
    w.commit()

    def disk_full(*args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(parquet_writer, "_write_atomically", disk_full)
    w.add(rows(["c"])[0])
    with pytest.raises(OutputError, match="No space left on device.*the 2 rows committed before stay"):
        w.commit()
    assert w.close() == 0  # nothing more is written, and no merge is tried
    assert not out.exists() and len(list(parts_dir(out).glob("part-*.parquet"))) == 1
    monkeypatch.undo()
    assert done_ids(out) == {"a", "b"}  # --resume picks up from the committed part


def _columns(t: pa.DataType) -> int:
    if pa.types.is_struct(t):
        return sum(1 + _columns(t.field(i).type) for i in range(t.num_fields))
    return 1 + _columns(t.value_type) if pa.types.is_list(t) else 0


def test_a_wide_recursive_schema_is_cut_shallower_to_a_bounded_type(tmp_path):
    """Eight properties that each $ref the node again: 8**4 structs at the full depth (the corpus's
    renovate schema ran out of memory); the type is cut a level shallower until it fits."""
    node = {"type": "object", "properties": {k: {"$ref": "#/$defs/node"} for k in "abcdefgh"}, "additionalProperties": False}
    schema = {"$defs": {"node": node}, **node}
    col = column_for(schema)
    assert _columns(col.type) <= MAX_COLUMNS
    deep = col.type
    for level in range(2):  # the top levels keep their struct columns
        assert pa.types.is_struct(deep) and deep.num_fields == 8
        deep = deep.field("a").type
    value = {"a": {"b": {"c": {"d": {"a": {}}}}}, "b": None}
    stored = col.stored(value)
    path = tmp_path / "t.parquet"
    pq.write_table(pa.Table.from_pylist([{"r": stored}], schema=pa.schema([pa.field("r", col.type)])), path)
    back = pq.read_table(path).to_pylist()[0]["r"]

    def json_of(v):  # the JSON text levels read back as the value they hold
        if isinstance(v, str):
            return json.loads(v)
        return {k: json_of(x) for k, x in v.items() if x is not None} if isinstance(v, dict) else v
    assert json_of(back) == {"a": {"b": {"c": {"d": {"a": {}}}}}}


@pytest.mark.parametrize("schema", [
    {"anyOf": [{"type": "string"}, {"type": "object"}]},
    {"type": ["string", "object"]},
    {"anyOf": [{"enum": ["{}", "b"]}, {"type": "object"}]},
])
def test_a_string_beside_json_text_is_json_text_too(schema):
    """Else the string "{}" and the object {} would both be stored as {} and read back alike."""
    col = column_for({"type": "object", "properties": {"v": schema}, "additionalProperties": False})
    assert col.type.field("v").type == pa.string()
    assert col.stored({"v": "{}"}) == {"v": '"{}"'} and col.stored({"v": {}}) == {"v": "{}"}
