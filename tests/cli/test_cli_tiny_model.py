"""`kvx extract` on a tiny random GGUF model (a 128-token byte vocabulary, a 512-token context):
ranked and calibrated choices, --truncate and --examples work for any model kvx loads."""
import json
import re
import sys

import jsonschema
import pytest
from kvx_cli_helpers import REPO, read_jsonl, write_jsonl

from kvx.cli.main import main

sys.path.insert(0, str(REPO / "tests" / "models"))
from modelkit import write_looping_tiny_gguf, write_random_tiny_gguf  # noqa: E402

SCHEMA = {"type": "object", "additionalProperties": False, "required": ["kind", "name", "flag"],
          "properties": {"kind": {"enum": ["alpha", "beta", "gamma-ray"]}, "name": {"type": ["string", "null"], "maxLength": 6},
                         "flag": {"type": "boolean"}}}


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory):
    return write_random_tiny_gguf(tmp_path_factory.mktemp("tiny") / "tiny.gguf", seed=2)


@pytest.fixture(autouse=True)
def real_engine(monkeypatch, tmp_path_factory):
    monkeypatch.delenv("KVX_RUNTIME_FACTORY", raising=False)
    monkeypatch.setenv("KVX_CACHE", str(tmp_path_factory.getbasetemp() / "kvx-cache"))


@pytest.mark.parametrize("choices", ["greedy", "rank", "calibrated", "channel"])
def test_choices_truncate_and_examples_on_a_tiny_model(tmp_path, tiny_gguf, choices):
    (tmp_path / "s.json").write_text(json.dumps(SCHEMA))
    texts = ["abc", "x" * 900 + "END", "hello", "y" * 700, "q"]  # one token a character: two exceed the context
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": i, "text": t} for i, t in enumerate(texts)])
    write_jsonl(tmp_path / "ex.jsonl", [{"input": "zz", "output": {"kind": "beta", "name": "Qwerty", "flag": True}}])
    out, stats = tmp_path / "out.jsonl", tmp_path / "stats.json"
    code = main(["extract", str(src), "--schema", str(tmp_path / "s.json"), "--model", str(tiny_gguf), "-o", str(out),
                 "--choices", choices, "--truncate", "middle", "--examples", str(tmp_path / "ex.jsonl"),
                 "--system", "Extract.", "--no-schema-prompt", "--max-tokens", "80", "--ordered", "-q",
                 "--stats", str(stats), "--kv-memory", "16MiB", "--max-failures", "5"])
    rows, s = read_jsonl(out), json.loads(stats.read_text())
    assert code == 0 and [r["id"] for r in rows] == ["0", "1", "2", "3", "4"]
    for r in rows:
        assert r["status"] == "ok", r["error"]
        jsonschema.validate(r["record"], SCHEMA)
        assert "qwerty" not in (r["record"]["name"] or "").lower()  # the example's name is never repeated
    assert [r["usage"]["truncated_tokens"] > 0 for r in rows] == [False, True, False, True, False]
    assert s["truncated_records"] == 2 and s["truncated_tokens"] == sum(r["usage"]["truncated_tokens"] for r in rows)
    assert (s["engine"]["ranked_choices"] > 0) == (choices != "greedy")
    assert (s["calibration_points"] > 0) == (choices in ("calibrated", "channel"))
    assert s["channel_requests"] == (3 * len(texts) if choices == "channel" else 0)  # kind: 3 values a record


def repeated_ngram_at(value: str, text: str, n: int = 3) -> int | None:
    """Where value first writes a window of n characters (one token each here) it already holds,
    case aside, with a letter, that the text lacks (or, without letters, 3n of them): the repeat
    guard's rule."""
    lowered, folded = re.sub(r"\s+", " ", text.lower()), value.lower()
    for end in range(1, len(value) + 1):
        for size, letters in ((n, True), (3 * n, False)):
            gram = folded[max(0, end - size):end]
            if len(gram) == size and gram in folded[:end - 1] and (not letters or any(c.isalpha() for c in gram)) \
                    and gram not in lowered:
                return end - 1
    return None


@pytest.fixture(scope="module")
def looping_gguf(tmp_path_factory):
    return write_looping_tiny_gguf(tmp_path_factory.mktemp("looping") / "looping.gguf", seed=3)


def test_free_text_does_not_loop(tmp_path, looping_gguf, capsys):
    """With the repeat guard (the default) no string repeats a 3-token n-gram its text lacks; without
    it the random model does, and the guarded text is the plain one up to the first such repeat."""
    schema = {"type": "object", "required": ["summary"], "additionalProperties": False,
              "properties": {"summary": {"type": "string", "minLength": 12, "maxLength": 40,
                                          "pattern": "^[A-Za-z0-9 ]+$"}}}  # one token a character
    (tmp_path / "s.json").write_text(json.dumps(schema))
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": i, "text": t} for i, t in enumerate(["abc", "hello", "q", "zz top"])])
    summaries = {}
    for n in (0, 3):
        out, stats = tmp_path / f"out{n}.jsonl", tmp_path / f"stats{n}.json"
        code = main(["extract", str(src), "--schema", str(tmp_path / "s.json"), "--model", str(looping_gguf), "-o", str(out),
                     "--no-repeat-ngram", str(n), "--system", "Extract.", "--no-schema-prompt", "--max-tokens", "60",
                     "--ordered", "--stats", str(stats), "--kv-memory", "16MiB", "--retries", "0"])
        rows = read_jsonl(out)
        assert code == 0 and all(r["status"] == "ok" for r in rows)
        summaries[n] = [r["record"]["summary"] for r in rows]
        refused = json.loads(stats.read_text())["engine"]["vetoed_tokens"]
        assert (refused > 0) == (n > 0)
        summary = capsys.readouterr().err  # the summary table says what the guard did
        row = re.search(r"tokens refused\s*│\s*([\d,]+): looping text or keys \(--no-repeat-ngram 3\)", summary)
        assert (row is not None and row.group(1) == f"{refused:,}") == (n > 0)
    texts = ["abc", "hello", "q", "zz top"]
    assert any(repeated_ngram_at(s, t) is not None for s, t in zip(summaries[0], texts))  # the model loops
    for plain, guarded, text in zip(summaries[0], summaries[3], texts):
        assert repeated_ngram_at(guarded, text) is None, guarded
        first = repeated_ngram_at(plain, text)
        assert guarded == plain if first is None else guarded[:first] == plain[:first] != guarded[:first + 1]


def test_codes_are_copied_from_the_text(tmp_path, tiny_gguf, capsys):
    """A nullable code field (a string with a pattern): by default every code written is a span of
    its record's text; without the guard the random model invents them (kept here to be seen)."""
    schema = {"type": "object", "additionalProperties": False, "required": ["code", "n"],
              "properties": {"code": {"type": ["string", "null"], "pattern": "^[A-Z]{2}-[0-9]{3}$"}, "n": {"type": "integer"}}}
    (tmp_path / "s.json").write_text(json.dumps(schema))
    texts = ["ship AB-123 now", "ref CD-456 or EF-789", "order GH-321 late", "xx IJ-654 yy", "code KL-987",
             "MN-111 ok", "no code", "QR-222 and ST-333"]
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": i, "text": t} for i, t in enumerate(texts)])
    codes = {}
    for flag in ("--copy-codes", "--no-copy-codes"):
        out, stats = tmp_path / f"out{flag}.jsonl", tmp_path / f"stats{flag}.json"
        code = main(["extract", str(src), "--schema", str(tmp_path / "s.json"), "--model", str(tiny_gguf), "-o", str(out),
                     flag, "--ungrounded", "keep", "--max-tokens", "60", "--ordered", "--stats", str(stats),
                     "--kv-memory", "16MiB"])
        rows = read_jsonl(out)
        assert code == 0 and all(r["status"] == "ok" for r in rows)
        codes[flag] = [r["record"]["code"] for r in rows]
        s = json.loads(stats.read_text())
        in_text = [c for c, t in zip(codes[flag], texts) if c is not None and re.search(rf"\b{c}\b", t)]
        assert s["codes_copied"] == (len(in_text) if flag == "--copy-codes" else 0)
        assert s["records_with_code_spans"] == (7 if flag == "--copy-codes" else 0)  # "no code" has none
        assert ("codes from the text" in capsys.readouterr().err) == (flag == "--copy-codes")
    written = [(c, t) for c, t in zip(codes["--copy-codes"], texts) if c is not None]
    assert len(written) >= 4 and all(re.search(rf"\b{c}\b", t) for c, t in written)
    invented = [c for c, t in zip(codes["--no-copy-codes"], texts) if c is not None and c not in t]
    assert len(invented) >= 4  # the model does not copy by itself


def test_undeclared_keys_are_written_only_when_asked(tmp_path, tiny_gguf, capsys):
    """A schema silent about other keys (Pydantic's default): by default records hold only the
    declared keys; `--extra-keys schema` lets the random model add its own (kept here to be seen)."""
    schema = {"type": "object", "required": ["n"],
              "properties": {"n": {"type": "integer"}, "tag": {"type": "string", "maxLength": 8}}}
    (tmp_path / "s.json").write_text(json.dumps(schema))
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": i, "text": t} for i, t in enumerate(["a", "bb", "c d", "eee", "f"])])
    extras = {}
    for mode in ("declared", "schema"):
        out = tmp_path / f"out-{mode}.jsonl"
        code = main(["extract", str(src), "--schema", str(tmp_path / "s.json"), "--model", str(tiny_gguf), "-o", str(out),
                     "--extra-keys", mode, "--max-tokens", "60", "--ordered", "-q", "--kv-memory", "16MiB"])
        rows = read_jsonl(out)
        assert code == 0 and all(r["status"] == "ok" for r in rows)
        for r in rows:
            jsonschema.validate(r["record"], schema)
        extras[mode] = [sorted(set(r["record"]) - set(schema["properties"])) for r in rows]
    assert not any(extras["declared"])
    assert any(extras["schema"])
    assert main(["extract", str(src), "--schema", str(tmp_path / "s.json"), "--model", str(tiny_gguf),
                 "-o", str(tmp_path / "x.jsonl"), "--extra-keys", "some"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["kvx: error: --extra-keys 'some': choose one of declared, schema"]


def first_invented_digit(value: str, text: str) -> int | None:
    """Where value first writes a digit that makes a run of digits no run of the text holds."""
    held = re.findall(r"\d+", text)
    for m in re.finditer(r"\d+", value):
        for end in range(m.start() + 1, m.end() + 1):
            if not any(value[m.start():end] in h for h in held):
                return end - 1
    return None


def test_strings_hold_only_digits_of_their_text(tmp_path, tiny_gguf):
    """--copy-digits (the default): the random model's free text writes no run of digits its text
    lacks; up to the token of the first digit it would have invented, the output is the unguarded run's."""
    schema = {"type": "object", "additionalProperties": False, "required": ["note", "n"],
              "properties": {"note": {"type": "string", "maxLength": 40}, "n": {"type": "integer"}}}
    (tmp_path / "s.json").write_text(json.dumps(schema))
    texts = [f"order {k}{k + 7} of {3 * k} units" for k in range(10, 22)] + ["no digits here", "9 lives"]
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": i, "text": t} for i, t in enumerate(texts)])
    notes = {}
    for flag in ("--copy-digits", "--no-copy-digits"):
        out = tmp_path / f"out{flag}.jsonl"
        code = main(["extract", str(src), "--schema", str(tmp_path / "s.json"), "--model", str(tiny_gguf), "-o", str(out),
                     flag, "--choices", "greedy", "--max-tokens", "60", "--ordered", "-q", "--kv-memory", "16MiB",
                     "--dtype", "float32", "--max-seqs", "1", "--no-repeat-ngram", "0", "--max-failures", "100"])
        rows = read_jsonl(out)
        assert code == 0 and all(r["status"] == "ok" for r in rows)
        notes[flag] = [r["record"]["note"] for r in rows]
    invented = 0
    for guarded, plain, text in zip(notes["--copy-digits"], notes["--no-copy-digits"], texts):
        assert first_invented_digit(guarded, text) is None, (guarded, text)
        first = first_invented_digit(plain, text)
        invented += first is not None
        if first is None:
            assert guarded == plain
        else:  # they part at the token that writes the digit (this vocabulary's longest spells 5 bytes: <x28>)
            parted = next(i for i, (a, b) in enumerate(zip(guarded + "\0", plain)) if a != b)
            assert first - 5 < parted <= first, (guarded, plain)
    assert invented >= 3  # the model invents digits by itself


@pytest.mark.parametrize("choices", ["calibrated", "channel"])
def test_values_the_text_keeps_naming_win_with_mentions(tmp_path, tiny_gguf, choices):
    """--mentions (the default): each text names one kind 30 times and the record takes it, against
    the random model's lean of ~10 nats; without them the model's choice stays."""
    (tmp_path / "s.json").write_text(json.dumps(SCHEMA))
    named = ["alpha", "beta", "gamma-ray"]
    texts = [" ".join([v] * 30) for v in named]
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": i, "text": t} for i, t in enumerate(texts)])

    def kinds(*extra):
        out = tmp_path / f"out{len(extra)}.jsonl"
        code = main(["extract", str(src), "--schema", str(tmp_path / "s.json"), "--model", str(tiny_gguf), "-o", str(out),
                     "--system", "Extract.", "--max-tokens", "60", "--ordered", "-q", "--kv-memory", "16MiB",
                     "--choices", choices, *extra])
        assert code == 0
        return [r["record"]["kind"] for r in read_jsonl(out)]

    assert kinds() == named
    assert kinds("--no-mentions") != named  # the random model alone does not read them


def test_a_schema_described_past_the_context_is_shortened_not_refused(tmp_path, tiny_gguf, capsys):
    """A 512-token context (one token a byte): the whole field list of this schema is over 1,000
    tokens, which used to stop the run (exit 2, "past the model's context"). It is shortened to
    half the context, the run goes on, and --stats and the summary say so."""
    about = "a long explanation of what this field holds and where it comes from"
    schema = {**SCHEMA, "properties": {k: {**v, "description": about} for k, v in SCHEMA["properties"].items()}}
    schema["properties"].update({f"note{i}": {"type": "string", "maxLength": 3, "description": about} for i in range(9)})
    (tmp_path / "s.json").write_text(json.dumps(schema))
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": i, "text": t} for i, t in enumerate(["abc", "hello"])])
    out, stats = tmp_path / "out.jsonl", tmp_path / "stats.json"
    code = main(["extract", str(src), "--schema", str(tmp_path / "s.json"), "--model", str(tiny_gguf), "-o", str(out),
                 "--system", "Extract.", "--max-tokens", "120", "--stats", str(stats), "--kv-memory", "16MiB"])
    rows, s = read_jsonl(out), json.loads(stats.read_text())
    assert code == 0 and [r["status"] for r in rows] == ["ok", "ok"]
    for r in rows:
        jsonschema.validate(r["record"], schema)
    listed = re.fullmatch(r"the first (\d+) of 12 top-level fields", s["field_list_shortened"])
    assert listed and 0 < int(listed[1]) < 12
    assert 50 < s["shared_prefix_tokens"] <= 512 - 120
    err = " ".join(capsys.readouterr().err.split())  # the summary wraps at the terminal's width
    assert f"field list was too long for the prompt and was shortened ({s['field_list_shortened']})" in err
