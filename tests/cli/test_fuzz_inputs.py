"""Fuzzing the input side of a job: random bytes, random JSON values and random CSV go through the
readers, a whole job (fake engine) and the JSONL writer. Nothing may raise; the output has one row
per input record; every id is written once, except repeats, which are `error` rows saying so."""
import csv
import io
import json
import re
import tempfile
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kvx_cli_helpers import TICKET_SCHEMA
from kvx_fake_runtime import fake_runtime

from kvx.job.job import Job, JobSettings
from kvx.job.runtime import EngineOptions
from kvx.job.sink import RowSink
from kvx.job.validation import RecordChecker
from kvx.errors import ConfigError
from kvx.io.readers import open_input
from kvx.io.writers import open_output
from kvx.prompts import PromptBuilder, PromptSpec

SCHEMA = json.loads(TICKET_SCHEMA.read_text())
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# every code point, lone surrogates included: a JSON text can spell those with \ud800
ANY_CHAR = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=())
TEXT = st.text(ANY_CHAR, max_size=30)
SCALAR = st.none() | st.booleans() | st.integers(-10**20, 10**20) | st.floats(allow_nan=False) | TEXT
JSON_VALUE = st.recursive(SCALAR, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
                          max_leaves=8)
RECORD = st.fixed_dictionaries({}, optional={"id": st.sampled_from(["a", "b", 1, "1"]) | JSON_VALUE,
                                             "text": TEXT | JSON_VALUE})


def run_job(data: bytes, suffix: str) -> list[dict]:
    """The rows a whole job writes for this input file, in input order (read back from the JSONL output)."""
    with tempfile.TemporaryDirectory() as d:
        src, out = Path(d) / f"in{suffix}", Path(d) / "out.jsonl"
        src.write_bytes(data)
        runtime = fake_runtime(SCHEMA, EngineOptions())
        sink = RowSink(open_output(str(out), SCHEMA), ordered=True)
        job = Job(open_input(str(src)), sink, PromptBuilder(PromptSpec(), SCHEMA, runtime.tokenizer), runtime,
                  RecordChecker(SCHEMA), JobSettings(retries=0))
        outcome = job.run()
        assert outcome.failure is None and not outcome.interrupted
        return [json.loads(line.decode("utf-8")) for line in out.read_bytes().split(b"\n") if line]  # valid UTF-8 JSON


def assert_ids_once(rows: list[dict]) -> None:
    repeats = [r for r in rows if r["error"] is not None and ": duplicate id, first at " in r["error"]]
    firsts = Counter(r["id"] for r in rows if r not in repeats)
    assert all(n == 1 for n in firsts.values()), firsts
    assert all(r["id"] in firsts and r["status"] == "error" for r in repeats)


def jsonl_records(data: bytes) -> int:
    lines = data.split(b"\n")
    if lines and lines[0].startswith(b"\xef\xbb\xbf"):
        lines[0] = lines[0][3:]
    return sum(bool(line.strip()) for line in lines)


@FUZZ
@given(st.binary(max_size=300))
def test_random_bytes_as_jsonl(data):
    rows = run_job(data, ".jsonl")
    assert len(rows) == jsonl_records(data)
    assert_ids_once(rows)


@FUZZ
@given(st.lists(RECORD | JSON_VALUE, max_size=8), st.booleans())
def test_random_json_values_as_jsonl(values, ascii_only):
    lines = [json.dumps(v, ensure_ascii=ascii_only) for v in values]
    data = "".join(line + "\n" for line in lines).encode("utf-8", "surrogatepass")  # raw surrogates: bad UTF-8
    rows = run_job(data, ".jsonl")
    assert len(rows) == len(values)
    assert_ids_once(rows)
    for number, (line, value, row) in enumerate(zip(lines, values, rows), start=1):
        if not _is_utf8(line) or not isinstance(value, dict):
            assert row["status"] == "error" and row["id"] == str(number)
        elif isinstance(value.get("id"), str):  # stored with lone surrogates spelled as their escape
            assert row["id"] == re.sub("[\ud800-\udfff]", lambda m: f"\\u{ord(m.group()):04x}", value["id"])
        if row["status"] == "ok":
            assert isinstance(value, dict) and isinstance(value.get("text"), (str, int, float, dict, list))


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


@FUZZ
@given(st.lists(st.lists(TEXT, min_size=1, max_size=4), max_size=8), st.booleans())
def test_random_csv(rows_in, bom):
    buf = io.StringIO()
    csv.writer(buf).writerows([["id", "text", "other"], *rows_in])
    data = (b"\xef\xbb\xbf" if bom else b"") + buf.getvalue().encode("utf-8", "surrogatepass")
    rows = run_job(data, ".csv")
    assert len(rows) == len(rows_in)
    assert_ids_once(rows)


@FUZZ
@given(st.binary(max_size=300), st.sampled_from([".csv", ".parquet"]))
def test_random_bytes_as_csv_or_parquet(data, suffix):
    try:
        rows = run_job(data, suffix)
    except ConfigError:  # a file that is not Parquet at all: exit 2 before any work, which is allowed
        assert suffix == ".parquet"
        return
    assert_ids_once(rows)
