"""`kvx extract` end to end on the fake engine: rows, statuses, retries, ordering, options, exit codes."""
import json

import jsonschema
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from kvx_cli_helpers import REPO, TICKET_SCHEMA, assert_one_line_error, read_jsonl, write_jsonl
from kvx_fake_runtime import LONG_SUMMARY

from kvx.cli.main import main
from kvx.engine.calibration import ContextualCalibration

SAMPLES = REPO / "samples" / "tickets.jsonl"
SCHEMA = json.loads(TICKET_SCHEMA.read_text())
pytestmark = pytest.mark.usefixtures("fake_engine")


def extract(tmp_path, *args, input=SAMPLES, out="out.jsonl"):
    out_path = tmp_path / out
    code = main(["extract", str(input), "--schema", str(TICKET_SCHEMA), "-o", str(out_path), "-q", *map(str, args)])
    return code, out_path


def input_ids(path=SAMPLES):
    return [json.loads(line)["id"] for line in path.read_text().splitlines()]


def test_every_input_gives_one_valid_row(tmp_path):
    code, out = extract(tmp_path)
    rows = read_jsonl(out)
    assert code == 0
    assert sorted(r["id"] for r in rows) == sorted(input_ids())
    for r in rows:
        assert r["status"] == "ok" and r["error"] is None and r["attempts"] == 1
        jsonschema.validate(r["record"], SCHEMA)
        assert r["usage"]["prompt_tokens"] > 0 and r["usage"]["generated_tokens"] > 0


def test_rows_come_as_they_finish_unless_ordered(tmp_path):
    _, out = extract(tmp_path)
    assert [r["id"] for r in read_jsonl(out)] != input_ids()  # the fake engine finishes out of order
    _, out = extract(tmp_path, "--ordered", out="ordered.jsonl")
    assert [r["id"] for r in read_jsonl(out)] == input_ids()


def test_retry_then_invalid_never_dropped(tmp_path):
    src = write_jsonl(tmp_path / "in.jsonl", [
        {"id": "a", "text": "Please refund order 123"},
        {"id": "b", "text": "FAKE:flaky the app crashes"},
        {"id": "c", "text": "FAKE:invalid what is this"},
    ])
    code, out = extract(tmp_path, "--ordered", input=src)
    rows = {r["id"]: r for r in read_jsonl(out)}
    assert code == 1
    assert rows["a"]["status"] == "ok" and rows["a"]["attempts"] == 1
    assert rows["b"]["status"] == "ok" and rows["b"]["attempts"] == 2  # the sampled retry fixed it
    jsonschema.validate(rows["b"]["record"], SCHEMA)
    c = rows["c"]
    assert c["status"] == "invalid" and c["attempts"] == 3 and c["record"] is None
    assert c["error"].startswith("line 3 (id c): schema: ") and "\n" not in c["error"]
    code, _ = extract(tmp_path, "--max-failures", "1", input=src, out="tolerant.jsonl")
    assert code == 0
    code, out = extract(tmp_path, "--retries", "0", input=src, out="noretry.jsonl")
    assert {r["id"]: r["status"] for r in read_jsonl(out)}["b"] == "invalid"


def test_bad_input_lines_become_error_rows(tmp_path, capsys):
    src = tmp_path / "bad.jsonl"
    src.write_bytes(b"".join([
        b'{"id": "ok1", "text": "My parcel never arrived, order ORD-1"}\n',
        b'{"id": "broken", "text": "unterminated\n',
        b'{"id": "nofield", "body": "text is under another name"}\n',
        b'\n',
        b'{"id": "bytes", "text": "caf\xe9 au lait"}\n',
        b'["an", "array"]\n',
        json.dumps({"id": "long", "text": "very long ticket " * 400}).encode() + b"\n",
        b'{"id": "engine", "text": "FAKE:engine-error"}\n',
        b'{"text": "no id here, refund please"}\n',
        b'{"id": "blank", "text": " \\n\\t "}\n',
    ]))
    code, out = extract(tmp_path, input=src)
    rows = {r["id"]: r for r in read_jsonl(out)}
    assert code == 1
    assert set(rows) == {"ok1", "2", "nofield", "5", "6", "long", "engine", "9", "blank"}
    assert rows["ok1"]["status"] == "ok" and rows["9"]["status"] == "ok"
    expect = {
        "2": "line 2: not valid JSON",
        "nofield": "line 3 (id nofield): missing field 'text'",
        "5": "line 5: not valid UTF-8 (byte 0xe9",
        "6": "line 6: expected a JSON object",
        "long": "line 7 (id long): prompt is ",
        "engine": "line 8 (id engine): sequence failed in the engine",
        "blank": "line 10 (id blank): field 'text' is empty",
    }
    for rid, start in expect.items():
        assert rows[rid]["status"] == "error" and rows[rid]["record"] is None
        assert rows[rid]["error"].startswith(start), rows[rid]["error"]
    assert "Traceback" not in capsys.readouterr().err


def test_csv_and_parquet_inputs(tmp_path):
    import csv

    csv_path = tmp_path / "in.csv"
    with open(csv_path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["ticket", "body"])
        w.writerow(["x1", "Line one,\nwith a comma and a newline, refund"])
        w.writerow(["x2", "second ticket text"])
    code, out = extract(tmp_path, "--id-field", "ticket", "--field", "body", "--ordered", input=csv_path)
    rows = read_jsonl(out)
    assert code == 0 and [r["id"] for r in rows] == ["x1", "x2"]
    assert rows[0]["record"]["requires_refund"] is True  # the multi-line cell arrived whole
    code, out = extract(tmp_path, "--ordered", input=REPO / "samples" / "tickets.parquet", out="p.jsonl")
    assert code == 0 and [r["id"] for r in read_jsonl(out)] == input_ids()


def test_parquet_output_has_schema_types(tmp_path):
    code, out = extract(tmp_path, out="out.parquet")
    assert code == 0
    table = pq.read_table(out)
    assert table.num_rows == 60 and not (tmp_path / "out.parquet.parts").exists()
    rec = table.schema.field("record").type
    enum = pa.dictionary(pa.int32(), pa.string())
    assert rec.field("category").type == enum and rec.field("priority").type == enum
    assert rec.field("summary").type == pa.string()
    assert rec.field("requires_refund").type == pa.bool_()
    assert pa.types.is_list(rec.field("tags").type) and rec.field("tags").type.value_type == pa.string()
    assert table.schema.field("usage").type.field("prompt_tokens").type == pa.int64()
    for row in table.to_pylist():
        jsonschema.validate({k: v for k, v in row["record"].items() if v is not None or k in ("product",)}, SCHEMA)


def test_a_value_parquet_cannot_hold_is_retried_then_named_never_stored_as_null(tmp_path):
    schema = json.loads(TICKET_SCHEMA.read_text())
    schema["properties"]["order_number"] = {"type": "integer"}  # valid past int64 too
    schema_path = tmp_path / "schema.json"
    schema_path.write_text(json.dumps(schema))
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "text": "refund order 7"},
                                              {"id": "big", "text": "FAKE:bigint refund it"}])

    def run(out):
        return main(["extract", str(src), "--schema", str(schema_path), "-o", str(tmp_path / out), "-q", "--ordered"])

    assert run("out.parquet") == 1
    rows = {r["id"]: r for r in pq.read_table(tmp_path / "out.parquet").to_pylist()}
    assert rows["a"]["status"] == "ok"
    big = rows["big"]
    assert big["status"] == "invalid" and big["record"] is None and big["attempts"] == 3
    assert big["error"] == ("line 2 (id big): the value at /order_number (1180591620717411303424) is past int64: "
                            "the Parquet output cannot hold it (a .jsonl output can)")
    assert run("out.jsonl") == 0  # JSON holds it: the same record is kept whole
    assert read_jsonl(tmp_path / "out.jsonl")[1]["record"]["order_number"] == 2**70


def test_prompt_options_reach_the_engine(tmp_path, monkeypatch):
    import kvx_fake_runtime

    engines = []
    real = kvx_fake_runtime.fake_runtime
    monkeypatch.setattr(kvx_fake_runtime, "fake_runtime", lambda s, o: engines.append(real(s, o)) or engines[-1])
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": 1, "subject": "Refund", "body": "Charged twice"},
                                              {"id": 2, "subject": "Hi"}])
    (tmp_path / "t.txt").write_text("Subject: {subject}\nBody: {body} {{literal}}")
    (tmp_path / "sys.txt").write_text("You triage tickets for ACME.")
    write_jsonl(tmp_path / "ex.jsonl", [{"input": "Where is my order ORD-9?", "output": {
        "category": "shipping", "priority": "medium", "sentiment": "neutral", "summary": "asks where order is",
        "requires_refund": False}}])
    code, out = extract(tmp_path, "--template", tmp_path / "t.txt", "--system", f"@{tmp_path / 'sys.txt'}",
                        "--examples", tmp_path / "ex.jsonl", "--ordered", input=src)
    rows = read_jsonl(out)
    assert code == 1 and [r["status"] for r in rows] == ["ok", "error"]
    assert rows[1]["error"] == "line 2: missing field 'body'"  # id 2 is line 2: named once
    engine = engines[0].engine
    content_free = [r for r in engine.seen_requests if r.id.startswith("content-free")]
    records = [r for r in engine.seen_requests if not r.id.startswith("content-free")]
    prompt = engine.tokenizer.decode(records[0].prompt_ids)
    assert prompt.startswith("<|im_start|>system\nYou triage tickets for ACME.")
    assert '\n- category: one of "billing", "technical"' in prompt  # the schema is described by default, as fields
    # --choices calibrated (the default) first sends the template with content-free fields
    assert engine.tokenizer.decode(content_free[0].prompt_ids).endswith(
        "Subject: N/A\nBody: N/A {literal}<|im_end|>\n<|im_start|>assistant\n")
    assert "Where is my order ORD-9?<|im_end|>\n<|im_start|>assistant\n{\"category\": \"shipping\"" in prompt
    assert prompt.endswith("Subject: Refund\nBody: Charged twice {literal}<|im_end|>\n<|im_start|>assistant\n")


def test_stats_file(tmp_path):
    code, _ = extract(tmp_path, "--stats", tmp_path / "s" / "stats.json")
    stats = json.loads((tmp_path / "s" / "stats.json").read_text())
    assert code == 0 and stats["records_done"] == 60 and stats["ok"] == 60 and stats["interrupted"] is False
    assert {"cache_hit_rate", "batch_utilisation", "kv_pool_pressure"} <= set(stats["engine"])


@pytest.mark.parametrize("keep", ["none", "head", "tail", "middle"])
def test_truncate_keeps_every_row_and_reports_the_cut(tmp_path, monkeypatch, keep):
    """The fake model's context is 4096 code points: two texts longer than that among short ones."""
    import kvx_fake_runtime

    engines = []
    real = kvx_fake_runtime.fake_runtime
    monkeypatch.setattr(kvx_fake_runtime, "fake_runtime", lambda s, o: engines.append(real(s, o)) or engines[-1])
    long_text = "refund " + "x" * 5000 + " END"
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": 1, "text": "short one"}, {"id": 2, "text": long_text},
                                              {"id": 3, "text": long_text + "!"}, {"id": 4, "text": "short two"}])
    code, out = extract(tmp_path, "--truncate", keep, "--ordered", "--max-tokens", "300",
                        "--stats", tmp_path / "stats.json", input=src)
    rows, stats = read_jsonl(out), json.loads((tmp_path / "stats.json").read_text())
    assert [r["id"] for r in rows] == ["1", "2", "3", "4"]  # the row count is kept either way
    cuts = [r["usage"]["truncated_tokens"] for r in rows]
    if keep == "none":
        assert code == 1 and [r["status"] for r in rows] == ["ok", "error", "error", "ok"] and cuts == [0] * 4
        assert "context is 4096" in rows[1]["error"] and "--truncate" in rows[1]["error"]
        return
    assert code == 0 and all(r["status"] == "ok" for r in rows)
    assert cuts[0] == cuts[3] == 0 and cuts[1] > 1000 and cuts[2] == cuts[1] + 1
    assert stats["truncated_records"] == 2 and stats["truncated_tokens"] == sum(cuts) and stats["truncate"] == keep
    seen = [r for r in engines[0].engine.seen_requests if r.id.startswith("1.")]
    assert len(seen[0].prompt_ids) + 300 <= 4096  # room left for --max-tokens
    user = engines[0].engine.tokenizer.decode(seen[0].prompt_ids).rsplit("<|im_start|>user\n", 1)[1]
    assert user.startswith("refund") == (keep != "tail") and ("END<|im_end|>" in user) == (keep != "head")


def test_examples_copied_by_the_model_are_warned(tmp_path):
    """The fake model answers tags ["fake"] for every text: with an example whose output has that tag,
    every record copies an example value its text lacks."""
    write_jsonl(tmp_path / "ex.jsonl", [{"input": "My order never came.", "output": {
        "category": "shipping", "priority": "high", "sentiment": "negative", "summary": "order did not arrive",
        "requires_refund": False, "tags": ["fake"]}}])
    code, _ = extract(tmp_path, "--examples", tmp_path / "ex.jsonl", "--stats", tmp_path / "stats.json")
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert code == 0 and stats["records_copying_examples"] == 60 and stats["copied_example_fields"] == {"/tags/*": 60}
    assert stats["warnings"] and stats["warnings"][0].startswith("60 of 60 ok records copy a value from --examples")
    code, _ = extract(tmp_path, "--stats", tmp_path / "plain.json")
    assert json.loads((tmp_path / "plain.json").read_text())["warnings"] == []


def test_channel_windows_keep_every_record_and_its_retries(tmp_path):
    """--choices channel (the default) scores records in windows of CHANNEL_WINDOW: across windows,
    with retries carried into the next one, every id gets one row, as with --choices calibrated."""
    from kvx.job.job import CHANNEL_WINDOW

    n = 2 * CHANNEL_WINDOW + 5
    marks = {7: "FAKE:flaky ", CHANNEL_WINDOW - 1: "FAKE:flaky ", CHANNEL_WINDOW + 3: "FAKE:invalid ", n - 1: "FAKE:flaky "}
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": f"r{i}", "text": marks.get(i, "") + f"parcel {i} is late"}
                                              for i in range(n)])
    stats = tmp_path / "stats.json"
    code, out = extract(tmp_path, "--ordered", "--stats", stats, input=src)
    rows = read_jsonl(out)
    assert code == 1 and [r["id"] for r in rows] == [f"r{i}" for i in range(n)]
    assert [r["id"] for r in rows if r["attempts"] == 2] == [f"r{i}" for i in (7, CHANNEL_WINDOW - 1, n - 1)]
    assert [r["id"] for r in rows if r["status"] != "ok"] == [f"r{CHANNEL_WINDOW + 3}"]
    s = json.loads(stats.read_text())
    assert s["choices"] == "channel" and s["channel_requests"] == 13 * n  # ticket.json: 6 + 4 + 3 enum values
    _, out2 = extract(tmp_path, "--ordered", "--choices", "calibrated", input=src, out="calibrated.jsonl")
    calibrated = read_jsonl(out2)
    assert [(r["id"], r["status"], r["attempts"]) for r in calibrated] == [(r["id"], r["status"], r["attempts"]) for r in rows]
    # the scoring prompts count in each row's usage: 13 of them a record, beyond what calibrated reads
    extra = [a["usage"]["prompt_tokens"] - b["usage"]["prompt_tokens"] for a, b in zip(rows, calibrated)]
    assert all(x > 13 for x in extra) and sum(extra) == s["channel_prompt_tokens"]


@pytest.mark.parametrize("mode", ["null", "keep"])
def test_values_the_text_lacks_become_null_and_are_counted(tmp_path, mode):
    """The fake model names the customer "Ada Lovelace" for FAKE:name texts: where the text does not
    hold the name it is invented (null by default, kept with --ungrounded keep; counted either way)."""
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": 1, "text": "FAKE:name my order is late"},
                                              {"id": 2, "text": "FAKE:name ada LOVELACE here, order late"},
                                              {"id": 3, "text": "plain text"}])
    code, out = extract(tmp_path, "--ordered", "--ungrounded", mode, "--stats", tmp_path / "stats.json", input=src)
    rows, stats = read_jsonl(out), json.loads((tmp_path / "stats.json").read_text())
    names = [r["record"]["customer_name"] for r in rows]
    assert code == 0 and names == [None if mode == "null" else "Ada Lovelace", "Ada Lovelace", None]
    assert all(jsonschema.validate(r["record"], SCHEMA) is None for r in rows)
    assert stats["records_with_ungrounded_values"] == 1 and stats["ungrounded_fields"] == {"/customer_name": 1}
    assert stats["ungrounded"] == mode
    assert [r["ungrounded"] for r in rows] == [{"/customer_name": "Ada Lovelace"}, None, None]  # which row, what value


@pytest.mark.parametrize("mode", ["null", "keep"])
def test_a_copied_value_set_to_null_is_not_counted_as_copied(tmp_path, mode):
    """The example's customer is the fake model's "Ada Lovelace": the copy warning counts what is
    written, so a name --ungrounded null removed is not a copy."""
    write_jsonl(tmp_path / "ex.jsonl", [{"input": "Ada Lovelace here: my order is late.", "output": {
        "category": "shipping", "priority": "high", "sentiment": "negative", "summary": "order is late",
        "requires_refund": False, "customer_name": "Ada Lovelace"}}])
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": 1, "text": "FAKE:name my order is late"}])
    code, _ = extract(tmp_path, "--examples", tmp_path / "ex.jsonl", "--ungrounded", mode,
                      "--stats", tmp_path / "stats.json", input=src)
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert code == 0 and stats["records_with_ungrounded_values"] == 1
    assert stats["copied_example_fields"] == ({} if mode == "null" else {"/customer_name": 1})


def test_the_progress_view_is_told_what_runs_while_no_row_can_finish(tmp_path, monkeypatch):
    """Calibration, then each window's channel scoring, then decoding (""): the bar says which."""
    from kvx.cli.progress import ProgressView
    from kvx.job.job import CHANNEL_WINDOW

    told = []
    monkeypatch.setattr(ProgressView, "phase", lambda self, what: told.append(what))
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": i, "text": f"parcel {i} is late"} for i in range(CHANNEL_WINDOW + 5)])
    assert extract(tmp_path, input=src)[0] == 0
    assert told == ["calibrating: 3 content-free prompts", "",
                    f"channel: scoring {13 * CHANNEL_WINDOW} prompts for the next {CHANNEL_WINDOW} records", "",
                    "channel: scoring 65 prompts for the next 5 records", ""]
    told.clear()
    assert extract(tmp_path, "--choices", "greedy", input=src, out="greedy.jsonl")[0] == 0
    assert told == []


@pytest.mark.parametrize("mode", ["sentence", "keep"])
def test_free_text_cut_at_its_bound_ends_at_its_last_sentence(tmp_path, mode):
    """FAKE:long summaries run into the ticket schema's maxLength mid-sentence: by default they end
    at their last full sentence (counted), with --cut-text keep they stay; other rows are untouched."""
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": 1, "text": "FAKE:long my order is late"},
                                              {"id": 2, "text": "plain text"}])
    code, out = extract(tmp_path, "--ordered", "--cut-text", mode, "--stats", tmp_path / "stats.json", input=src)
    rows, stats = read_jsonl(out), json.loads((tmp_path / "stats.json").read_text())
    whole = LONG_SUMMARY[:LONG_SUMMARY.rindex(".") + 1]
    assert code == 0 and rows[0]["record"]["summary"] == (whole if mode == "sentence" else LONG_SUMMARY)
    assert rows[1]["record"]["summary"].startswith("plain text")  # short of its bound: as written
    assert all(jsonschema.validate(r["record"], SCHEMA) is None for r in rows)
    assert (stats["records_cut_at_sentence"], stats["cut_fields"]) == ((1, {"/summary": 1}) if mode == "sentence" else (0, {}))


def test_a_cut_the_schema_refuses_is_not_made(tmp_path):
    """A schema that wants the summary long elsewhere (allOf at the root): the cut would break it,
    so the record keeps the model's text."""
    schema = {**SCHEMA, "allOf": [{"properties": {"summary": {"minLength": 150}}}]}
    (tmp_path / "s.json").write_text(json.dumps(schema))
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": 1, "text": "FAKE:long my order is late"}])
    code = main(["extract", str(src), "--schema", str(tmp_path / "s.json"), "-o", str(tmp_path / "o.jsonl"), "-q",
                 "--stats", str(tmp_path / "stats.json")])
    rows = read_jsonl(tmp_path / "o.jsonl")
    assert code == 0 and rows[0]["record"]["summary"] == LONG_SUMMARY
    assert json.loads((tmp_path / "stats.json").read_text())["records_cut_at_sentence"] == 0


def _recording_engines(monkeypatch) -> list:
    import kvx_fake_runtime

    engines = []
    real = kvx_fake_runtime.fake_runtime
    monkeypatch.setattr(kvx_fake_runtime, "fake_runtime", lambda s, o: engines.append(real(s, o)) or engines[-1])
    return engines


def test_nothing_to_decode_runs_no_calibration(tmp_path, monkeypatch):
    """A finished --resume and an empty input decode nothing, the content-free prompts included."""
    engines = _recording_engines(monkeypatch)
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": i, "text": f"parcel {i} is late"} for i in range(3)])
    assert extract(tmp_path, input=src)[0] == 0
    assert sum(r.id.startswith("content-free") for r in engines[0].engine.seen_requests) == 3
    code, out = extract(tmp_path, "--resume", "--stats", tmp_path / "stats.json", input=src)
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert code == 0 and len(read_jsonl(out)) == 3 and stats["calibration_points"] == 0
    assert engines[1].engine.seen_requests == []
    (tmp_path / "empty.jsonl").write_text("")
    assert extract(tmp_path, input=tmp_path / "empty.jsonl", out="empty.out.jsonl")[0] == 0
    assert engines[2].engine.seen_requests == []


def test_every_record_ranks_with_the_calibration(tmp_path, monkeypatch):
    """The first record is drawn before the calibration runs: its choice hook still reads it."""
    engines = _recording_engines(monkeypatch)
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": i, "text": f"refund {i} please"} for i in range(3)])
    assert extract(tmp_path, "--mentions", "--choices", "calibrated", input=src)[0] == 0
    records = [r for r in engines[0].engine.seen_requests if not r.id.startswith("content-free")]
    assert len(records) == 3
    bases = {id(r.choice_hook.base) for r in records}  # the fake engine makes no choices: no points to compare
    assert len(bases) == 1 and isinstance(records[0].choice_hook.base, ContextualCalibration)
