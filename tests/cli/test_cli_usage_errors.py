"""A bad option, schema or path exits 2 before any work, with one line on stderr and no traceback."""
import json

import pytest
from kvx_cli_helpers import REPO, TICKET_SCHEMA, assert_one_line_error, run_kvx, write_jsonl

from kvx.cli.main import main

SAMPLES = REPO / "samples" / "tickets.jsonl"
pytestmark = pytest.mark.usefixtures("fake_engine")


def bad_schema_files(tmp_path):
    (tmp_path / "notjson.json").write_text('{"type": "object",, }')
    (tmp_path / "badtype.json").write_text(json.dumps({"type": "object", "properties": {"a": {"type": 12}}}))
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "noplace.txt").write_text("Just text, no placeholder")
    write_jsonl(tmp_path / "badex.jsonl", [{"input": "hi", "output": {"category": "weather"}}])
    write_jsonl(tmp_path / "in.jsonl", [{"id": 1, "text": "x"}])


CASES = [
    (["--schema", "{t}/missing.json"], ["missing.json: no such schema file"]),
    (["--schema", "{t}/notjson.json"], ["notjson.json: not valid JSON", "line 1 column"]),
    (["--schema", "{t}/badtype.json"], ["not a valid JSON Schema", "/properties/a/type"]),
    (["--schema", "{t}/list.json"], ["must be an object"]),
    (["--kv-memory", "lots"], ["--kv-memory 'lots': not a size"]),
    (["--dtype", "float8"], ["--dtype 'float8': choose one of"]),
    (["--attention", "cuda"], ["--attention 'cuda'"]),
    (["--kv-dtype", "int4"], ["--kv-dtype 'int4'"]),
    (["--whitespace", "pretty"], ["--whitespace"]),
    (["--extra-keys", "all"], ["--extra-keys 'all': choose one of declared, schema"]),
    (["--compile-deadline", "0"], ["--compile-deadline 0.0: must be a number of seconds above 0"]),
    (["--max-tokens", "0"], ["--max-tokens 0: must be at least 1"]),
    (["--retries", "-1"], ["--retries -1"]),
    (["--speculate", "-2"], ["--speculate -2: must be at least 0"]),
    (["--no-repeat-ngram", "-1"], ["--no-repeat-ngram -1: must be at least 0"]),
    (["--cut-text", "word"], ["--cut-text 'word'"]),
    (["--template", "{t}/noplace.txt"], ["no {field} placeholder"]),
    (["--template", "{t}/nothere.txt"], ["--template", "cannot read"]),
    (["--system", "@{t}/nothere.txt"], ["--system"]),
    (["--examples", "{t}/badex.jsonl"], ["badex.jsonl line 1: output does not match the schema", "required property"]),
    (["--output", "{t}/out.xlsx"], ["out.xlsx: unknown output format"]),
    (["--max-tokens", "many"], ["Invalid value for '--max-tokens'"]),
    (["--choices", "best"], ["--choices 'best': choose one of greedy, rank, calibrated"]),
    (["--truncate", "end"], ["--truncate 'end': choose one of none, head, tail, middle"]),
    (["--ungrounded", "drop"], ["--ungrounded 'drop': choose one of null, keep"]),
    (["--schema-style", "yaml"], ["--schema-style 'yaml': choose one of fields, json"]),
    (["--frobnicate"], ["No such option: --frobnicate"]),
]


@pytest.mark.parametrize("extra,needles", CASES, ids=[c[0][0] + ":" + c[0][-1].split("/")[-1] for c in CASES])
def test_bad_option_exits_2_with_one_line(tmp_path, capsys, extra, needles):
    bad_schema_files(tmp_path)
    extra = [a.replace("{t}", str(tmp_path)) for a in extra]
    args = ["extract", str(tmp_path / "in.jsonl"), "-o", str(tmp_path / "out.jsonl")]
    if "--schema" not in extra:
        args += ["--schema", str(TICKET_SCHEMA)]
    code = main(args + extra)
    assert code == 2
    assert_one_line_error(capsys.readouterr().err, *needles)
    assert not (tmp_path / "out.jsonl").exists()  # no work was done


@pytest.mark.parametrize("argv,needle", [
    (["extract", "nothere.jsonl", "--schema", str(TICKET_SCHEMA)], "nothere.jsonl: no such input file"),
    (["extract", "notes.txt", "--schema", str(TICKET_SCHEMA)], "notes.txt: unknown input format"),
    (["extract", str(SAMPLES)], "Missing option '--schema'"),
    (["extract", "-", "--schema", str(TICKET_SCHEMA), "--resume"], "--resume needs an output file"),
    (["nosuchcommand"], "No such command"),
])
def test_usage_errors(capsys, argv, needle):
    assert main(argv) == 2
    assert_one_line_error(capsys.readouterr().err, needle)


def test_corrupt_parquet_input(tmp_path, capsys):
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 this is not parquet")
    assert main(["extract", str(tmp_path / "bad.parquet"), "--schema", str(TICKET_SCHEMA)]) == 2
    assert_one_line_error(capsys.readouterr().err, "bad.parquet: not a readable Parquet file")


def test_resume_from_a_foreign_file(tmp_path, capsys):
    (tmp_path / "out.jsonl").write_text('{"not": "a kvx row"}\n')
    args = ["extract", str(SAMPLES), "--schema", str(TICKET_SCHEMA), "-o", str(tmp_path / "out.jsonl"), "--resume"]
    assert main(args) == 2  # no fingerprint: not known to be this job's output
    assert_one_line_error(capsys.readouterr().err, "out.jsonl has no kvx fingerprint", "--force")
    assert main(args + ["--force"]) == 2  # and with --force, its rows are not kvx rows
    assert_one_line_error(capsys.readouterr().err, "out.jsonl line 1: not a kvx output row")


def test_subprocess_error_has_no_traceback(tmp_path):
    proc = run_kvx(["extract", SAMPLES, "--schema", tmp_path / "none.json", "-o", tmp_path / "o.jsonl"])
    assert proc.returncode == 2
    assert_one_line_error(proc.stderr.decode(), "none.json: no such schema file")
    assert proc.stdout == b""


def test_a_table_without_the_text_column_exits_2_naming_its_columns(tmp_path, capsys):
    """CSV and Parquet know their columns before any record is read: a --field or --template
    placeholder that names none of them would only give error rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "in.csv").write_text("id,body\n1,hello\n")
    pq.write_table(pa.table({"id": ["1"], "doc": [{"body": "hello"}]}), tmp_path / "in.parquet")
    (tmp_path / "t.txt").write_text("Text: {body} {note}")
    cases = [("in.csv", [], "in.csv: no column 'text' (its columns: id, body); name the text's column with --field"),
             ("in.parquet", [], "in.parquet: no column 'text' (its columns: id, doc)"),
             ("in.parquet", ["--field", "body.x"], "no column 'body' (its columns: id, doc)"),
             ("in.csv", ["--template", str(tmp_path / "t.txt")], "no column 'note' (its columns: id, body); use a column in --template")]
    for name, extra, needle in cases:
        code = main(["extract", str(tmp_path / name), "--schema", str(TICKET_SCHEMA), "-o", str(tmp_path / "o.jsonl"), *extra])
        assert code == 2
        assert_one_line_error(capsys.readouterr().err, needle)
    for name, extra in [("in.csv", ["--field", "body"]), ("in.parquet", ["--field", "doc.body"])]:  # present: no error
        assert main(["extract", str(tmp_path / name), "--schema", str(TICKET_SCHEMA), "-o", str(tmp_path / "o.jsonl"), "-q", *extra]) == 0
