"""The default model on 2 Ray replicas gives the same records as one in-process engine
(--dtype float32: a record's tokens do not depend on which records share its batch)."""
import json
import os

import pytest
from kvx_cli_helpers import REPO, TICKET_SCHEMA, read_jsonl

ray = pytest.importorskip("ray")

from kvx.cli.main import main  # noqa: E402

LINES = (REPO / "samples" / "tickets.jsonl").read_text("utf-8").splitlines()
FAST = ["--max-tokens", "64", "--kv-memory", "64MiB", "--dtype", "float32", "-q"]


@pytest.fixture(scope="module")
def cluster():
    saved = os.environ.pop("KVX_RUNTIME_FACTORY", None)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, object_store_memory=80 << 20)
    yield
    ray.shutdown()
    if saved is not None:
        os.environ["KVX_RUNTIME_FACTORY"] = saved


def test_two_replicas_give_the_records_of_one(cluster, tmp_path, monkeypatch):
    monkeypatch.delenv("KVX_RUNTIME_FACTORY", raising=False)
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(LINES[30:38]) + "\n")

    def run(name, *extra):
        out = tmp_path / name
        # --no-repeat-ngram 1 (no word twice in a string) makes the repeat guard refuse tokens in these
        # short records, so the comparison covers the guards travelling to the replicas
        code = main(["extract", str(src), "--schema", str(TICKET_SCHEMA), "-o", str(out), "--ordered", *FAST,
                     "--no-repeat-ngram", "1", *extra])
        return code, read_jsonl(out)

    code1, one = run("one.jsonl", "--stats", str(tmp_path / "s1.json"))
    code2, two = run("two.jsonl", "--replicas", "2", "--replica-cpus", "1", "--stats", str(tmp_path / "s.json"))
    assert code1 == code2 and len(one) == 8
    assert [(r["id"], r["status"], r["record"]) for r in two] == [(r["id"], r["status"], r["record"]) for r in one]
    assert sum(r["status"] == "ok" for r in one) >= 6
    fleet, local = (json.loads((tmp_path / n).read_text()) for n in ("s.json", "s1.json"))
    assert [r["requests_done"] > 0 for r in fleet["engine"]["replicas"]] == [True, True]  # both replicas ran records
    # calibrated choices: the table learned through the fleet covers the points the local one does,
    # and both report every ranked choice of the job, calibration run included (same records: same choices)
    assert fleet["calibration_points"] == local["calibration_points"] > 0
    assert fleet["channel_requests"] == local["channel_requests"] == 8 * 13  # --choices channel: 13 enum values
    assert fleet["engine"]["ranked_choices"] == local["engine"]["ranked_choices"] > 0
    # the token guards travel with the requests (their vocabulary by hash): the same records, and as
    # many tokens refused
    assert fleet["engine"]["vetoed_tokens"] == local["engine"]["vetoed_tokens"] > 0
