"""SIGKILL a running `kvx extract` at random points mid-write, rerun with --resume, and check that
every input id ends up exactly once and every row validates (JSONL and Parquet outputs)."""
import json
import os
import random
import signal
import subprocess
import sys
import time

import jsonschema
import pyarrow.parquet as pq
import pytest
from kvx_cli_helpers import REPO, TICKET_SCHEMA, read_jsonl, run_kvx, write_jsonl

SCHEMA = json.loads(TICKET_SCHEMA.read_text())
N = 240
pytestmark = pytest.mark.usefixtures("fake_engine")


def make_input(tmp_path):
    rows = [{"id": f"k{i:04d}", "text": f"Ticket {i}: " + ("please refund order 77" if i % 3 else "the app freezes")}
            for i in range(N)]
    rows[17]["text"] = "FAKE:invalid" + rows[17]["text"]  # a row that ends invalid after retries
    return write_jsonl(tmp_path / "in.jsonl", rows), [r["id"] for r in rows]


def committed_rows(out):
    """Rows durably committed so far (JSONL lines, or rows in committed Parquet parts)."""
    if out.suffix == ".jsonl":
        return out.read_bytes().count(b"\n") if out.exists() else 0
    parts = out.with_name(out.name + ".parts")
    return sum(pq.ParquetFile(p).metadata.num_rows for p in parts.glob("part-*.parquet")) if parts.exists() else 0


def start(src, out, resume):
    args = [sys.executable, "-m", "kvx.cli", "extract", src, "--schema", TICKET_SCHEMA, "-o", out, "-q"]
    return subprocess.Popen([str(a) for a in args] + (["--resume"] if resume else []), cwd=REPO,
                            env={**os.environ, "KVX_FAKE_DELAY": "0.005", "KVX_COMMIT_SECONDS": "0.1"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def kill_mid_write(proc, out, rng):
    """Kill once this run has committed something new, at a random moment of its writing."""
    at_least = committed_rows(out) + 1
    deadline = time.monotonic() + 60
    while committed_rows(out) < at_least:
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.monotonic() < deadline
        time.sleep(0.005)
    time.sleep(rng.uniform(0, 0.25))
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL  # it really died mid-run, not at the end


def output_rows(out):
    return read_jsonl(out) if out.suffix == ".jsonl" else pq.read_table(out).to_pylist()


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_sigkill_then_resume_gives_every_id_once(tmp_path, suffix):
    rng = random.Random(1234 + len(suffix))
    src, ids = make_input(tmp_path)
    out = tmp_path / f"out{suffix}"
    for round_ in range(3):  # killed three times at random points, resuming each time
        kill_mid_write(start(src, out, resume=round_ > 0), out, rng)
    final = start(src, out, resume=True)
    _, err = final.communicate(timeout=120)
    assert final.returncode in (0, 1) and b"Traceback" not in err, err.decode()  # 1 if k0017 was in this run
    rows = output_rows(out)
    seen = [r["id"] for r in rows]
    assert sorted(seen) == sorted(ids) and len(seen) == len(set(seen))
    for r in rows:
        if r["id"] == "k0017":
            assert r["status"] == "invalid"
            continue
        assert r["status"] == "ok"
        record = r["record"] if suffix == ".jsonl" else {k: v for k, v in r["record"].items() if v is not None}
        jsonschema.validate(record, SCHEMA)
    if suffix == ".parquet":
        assert not out.with_name(out.name + ".parts").exists()


def test_resume_after_torn_line_and_stdin_pipe(tmp_path):
    src, ids = make_input(tmp_path)
    out = tmp_path / "out.jsonl"
    proc = run_kvx(["extract", "-", "--schema", TICKET_SCHEMA, "--ordered", "-q"], stdin=src.read_bytes())
    assert proc.returncode == 1 and b"Traceback" not in proc.stderr
    lines = proc.stdout.decode().splitlines()
    assert [json.loads(line)["id"] for line in lines] == ids
    out.write_text("\n".join(lines[:10]) + "\n" + lines[10][: len(lines[10]) // 2])  # a crash mid-line
    # rows written to stdout have no fingerprint sidecar: resuming them takes --force
    proc = run_kvx(["extract", src, "--schema", TICKET_SCHEMA, "-o", out, "--resume", "-q"])
    assert proc.returncode == 2 and b"--force" in proc.stderr
    proc = run_kvx(["extract", src, "--schema", TICKET_SCHEMA, "-o", out, "--resume", "--force", "-q"])
    assert proc.returncode == 1
    seen = [r["id"] for r in read_jsonl(out)]
    assert sorted(seen) == sorted(ids) and len(seen) == len(set(seen))
