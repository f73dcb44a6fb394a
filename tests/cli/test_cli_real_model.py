"""`kvx extract` with the real default model (SmolLM2-135M) on a few samples: every ok row validates
with jsonschema, Parquet columns carry the schema's types, and stdin -> stdout works in a pipe."""
import json
import re

import jsonschema
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from kvx_cli_helpers import HERE, REPO, TICKET_SCHEMA, read_jsonl, run_kvx

from kvx.cli.main import main

SCHEMA = json.loads(TICKET_SCHEMA.read_text())
LINES = (REPO / "samples" / "tickets.jsonl").read_text("utf-8").splitlines()
FAST = ["--max-tokens", "64", "--kv-memory", "64MiB", "-q"]


@pytest.fixture(autouse=True)
def real_engine(monkeypatch):
    monkeypatch.delenv("KVX_RUNTIME_FACTORY", raising=False)


def test_jsonl_rows_validate(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(LINES[:3] + ['{"id": "bad", "text": '] ) + "\n")
    out = tmp_path / "out.jsonl"
    code = main(["extract", str(src), "--schema", str(TICKET_SCHEMA), "-o", str(out), "--ordered",
                 "--stats", str(tmp_path / "stats.json"), *FAST])
    rows = read_jsonl(out)
    assert [r["id"] for r in rows] == ["T-1001", "T-1002", "T-1003", "4"]
    assert rows[3]["status"] == "error" and rows[3]["error"].startswith("line 4: not valid JSON")
    assert code == 1
    ok = [r for r in rows if r["status"] == "ok"]
    assert len(ok) >= 2
    for r in ok:
        jsonschema.validate(r["record"], SCHEMA, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    assert sum(r["usage"]["cached_tokens"] for r in ok) > 0  # the shared prompt prefix came from the cache
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["records_done"] == 4 and stats["engine"]["cache_hit_rate"] > 0


def test_parquet_output_types(tmp_path):
    src = tmp_path / "in.parquet"
    pq.write_table(pq.read_table(REPO / "samples" / "tickets.parquet").slice(10, 3), src)
    out = tmp_path / "out.parquet"
    code = main(["extract", str(src), "--schema", str(TICKET_SCHEMA), "-o", str(out), *FAST])
    table = pq.read_table(out)
    assert code in (0, 1) and table.num_rows == 3
    rec = table.schema.field("record").type
    enum = pa.dictionary(pa.int32(), pa.string())
    assert [rec.field(n).type for n in ("category", "priority", "sentiment")] == [enum] * 3
    assert rec.field("requires_refund").type == pa.bool_()
    assert rec.field("summary").type == pa.string() and rec.field("order_id").type == pa.string()
    assert pa.types.is_list(rec.field("tags").type) and rec.field("tags").type.value_type == pa.string()
    for row in table.to_pylist():
        if row["status"] == "ok":
            # Parquet fills absent optional properties with null; the schema allows null for those
            record = {k: v for k, v in row["record"].items() if v is not None or k in ("product", "customer_name", "order_id")}
            jsonschema.validate(record, SCHEMA)


def test_stdin_to_stdout_pipe():
    stdin = ("\n".join(LINES[20:22]) + "\n").encode()
    proc = run_kvx(["extract", "-", "--schema", TICKET_SCHEMA, *FAST], stdin=stdin, timeout=300)
    assert proc.returncode in (0, 1) and b"Traceback" not in proc.stderr, proc.stderr.decode()
    rows = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    assert sorted(r["id"] for r in rows) == ["T-1021", "T-1022"]
    for r in rows:
        if r["status"] == "ok":
            jsonschema.validate(r["record"], SCHEMA)


def test_max_tokens_below_the_shortest_record_exits_2_before_any_work(tmp_path, capsys):
    """Every output would be cut at --max-tokens (three generations a record, then `invalid`):
    one line naming the least that fits, which is the grammar's own shortest record and enough."""
    from kvx.grammar import compile_schema
    from kvx.models import load_model

    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(LINES[:2]) + "\n")
    out = tmp_path / "out.jsonl"
    code = main(["extract", str(src), "--schema", str(TICKET_SCHEMA), "-o", str(out), "--max-tokens", "5",
                 "--kv-memory", "64MiB", "-q"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and not out.exists()
    assert "--max-tokens 5 cannot hold the shortest record the schema allows" in err
    shortest = int(re.search(r"allows: (\d+) tokens", err).group(1))
    grammar = compile_schema(SCHEMA, load_model(None, dtype="float32").tokenizer)
    assert shortest == grammar.matcher().min_tokens_to_finish()
    code = main(["extract", str(src), "--schema", str(TICKET_SCHEMA), "-o", str(out), "--max-tokens", str(shortest),
                 "--kv-memory", "64MiB", "-q"])
    rows = read_jsonl(out)
    assert code in (0, 1) and len(rows) == 2
    assert not any("hit --max-tokens" in (r["error"] or "") for r in rows)  # the budget closes every record


def test_a_prompt_leaving_less_than_the_shortest_record_is_an_error_row(tmp_path, monkeypatch):
    """Room past MIN_ROOM but short of the shortest record: an error row naming both, not three
    generations cut at the context's end; room for exactly that record is enough."""
    src = tmp_path / "in.jsonl"
    src.write_text(LINES[0] + "\n")
    monkeypatch.setenv("KVX_RUNTIME_FACTORY", "kvx_short_context_runtime:short_context_runtime")
    monkeypatch.syspath_prepend(str(HERE))

    def run(context: int, name: str) -> dict:
        monkeypatch.setenv("KVX_TEST_CONTEXT", str(context))
        out = tmp_path / name
        # --truncate none, as by default: a long text is not cut; --no-schema-prompt: the field list,
        # fitted to half the context, would change the prompt with it
        main(["extract", str(src), "--schema", str(TICKET_SCHEMA), "-o", str(out), "--max-tokens", "64",
              "--kv-memory", "64MiB", "-q", "--truncate", "none", "--no-schema-prompt"])
        (row,) = read_jsonl(out)
        return row

    prompt = int(re.match(r"line 1 \(id T-1001\): prompt is (\d+) tokens", run(60, "tiny.jsonl")["error"]).group(1))
    row = run(prompt + 20, "short.jsonl")  # room 20: past MIN_ROOM (8), short of a record
    assert row["status"] == "error" and row["attempts"] == 0
    found = re.search(rf"prompt is {prompt} tokens; the model's context of {prompt + 20} leaves 20, and the shortest "
                      r"record the schema allows takes (\d+) \(", row["error"])
    assert found, row["error"]
    shortest = int(found.group(1))
    row = run(prompt + shortest, "exact.jsonl")
    assert row["status"] in ("ok", "invalid") and "hit --max-tokens" not in (row["error"] or "")
