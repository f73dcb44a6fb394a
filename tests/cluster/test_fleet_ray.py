"""`kvx extract --replicas 2` on a local Ray cluster (ray.init(num_cpus=2), one for the module) with
the fake engine in each actor: every record written exactly once, an idle replica steals from one
whose work was underestimated, a replica that dies loses nothing."""
import json
import os

import pytest
from kvx_cli_helpers import FAKE, HERE, REPO, TICKET_SCHEMA, read_jsonl, write_jsonl

ray = pytest.importorskip("ray")

from kvx.cli.main import main  # noqa: E402
from kvx.engine.calibration import CONTENT_FREE_TEXTS  # noqa: E402

SAMPLES = REPO / "samples" / "tickets.jsonl"
FLEET = ["--replicas", "2", "--replica-cpus", "1", "--max-seqs", "2", "-q"]  # 4 requests on a replica at a time


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    flag = tmp_path_factory.mktemp("die") / "died"
    env = {"KVX_RUNTIME_FACTORY": FAKE, "PYTHONPATH": os.pathsep.join([str(REPO), str(HERE)]),
           "KVX_FAKE_SLOW": "0.15", "KVX_FAKE_DIE_ONCE": str(flag)}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # before ray.init: the actors' processes inherit it
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, object_store_memory=80 << 20)
    yield flag
    ray.shutdown()
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def extract(tmp_path, src, *args):
    out, stats = tmp_path / "out.jsonl", tmp_path / "stats.json"
    code = main(["extract", str(src), "--schema", str(TICKET_SCHEMA), "-o", str(out), "--stats", str(stats),
                 *FLEET, *map(str, args)])
    return code, read_jsonl(out), json.loads(stats.read_text())


def test_every_record_assigned_and_written_once(cluster, tmp_path):
    ids = [json.loads(line)["id"] for line in SAMPLES.read_text().splitlines()]
    code, rows, stats = extract(tmp_path, SAMPLES)
    assert code == 0
    assert sorted(r["id"] for r in rows) == sorted(ids)  # each id once
    assert all(r["status"] == "ok" for r in rows)
    reps = stats["engine"]["replicas"]
    assert [r["replica"] for r in reps] == [0, 1] and all(r["requests_done"] > 0 for r in reps)
    # the content-free prompts of the calibration and the channel's scoring requests (13 enum values
    # a ticket) run first, through the fleet too
    assert stats["channel_requests"] == 13 * len(ids)
    assert sum(r["requests_done"] for r in reps) == len(ids) + len(CONTENT_FREE_TEXTS) + stats["channel_requests"]
    plan = stats["engine"]["fleet"]["plans"][-1]
    assert plan["requests"] == len(ids) and plan["replicas"] == 2


def test_idle_replica_steals_underestimated_work(cluster, tmp_path):
    # the slow records share a prefix, so the plan puts them on one replica as if they were cheap
    recs = [{"id": f"s{i}", "text": f"FAKE:slow the parcel number {i} is late"} for i in range(16)]
    recs += [{"id": f"f{i}", "text": f"quick question number {i} about my invoice"} for i in range(16)]
    code, rows, stats = extract(tmp_path, write_jsonl(tmp_path / "in.jsonl", recs))
    assert code == 0 and sorted(r["id"] for r in rows) == sorted(r["id"] for r in recs)
    fleet = stats["engine"]["fleet"]
    assert fleet["steals"] >= 1 and fleet["stolen_requests"] >= 1
    done = sorted(r["requests_done"] for r in stats["engine"]["replicas"])
    assert done[1] > 16  # the replica with the quick records took some slow ones too


def test_killed_replica_loses_nothing(cluster, tmp_path):
    recs = [{"id": f"r{i}", "text": f"ticket {i}: the app crashes on start"} for i in range(30)]
    recs[11]["text"] = "FAKE:die " + recs[11]["text"]  # its replica's process exits mid-run
    code, rows, stats = extract(tmp_path, write_jsonl(tmp_path / "in.jsonl", recs))
    assert cluster.exists()  # a replica really died
    assert code == 0
    assert sorted(r["id"] for r in rows) == sorted(r["id"] for r in recs)  # nothing lost, nothing twice
    assert all(r["status"] == "ok" for r in rows)
    fleet = stats["engine"]["fleet"]
    assert fleet["live"] == 1 and len(fleet["lost"]) == 1 and fleet["requeued_requests"] >= 1


def test_resume_with_replicas_runs_only_the_missing_records(cluster, tmp_path):
    recs = [{"id": f"r{i}", "text": f"ticket {i}: the parcel is late"} for i in range(12)]
    src = tmp_path / "in.jsonl"
    write_jsonl(src, recs[:5])
    code, rows, _ = extract(tmp_path, src)
    assert code == 0 and len(rows) == 5
    write_jsonl(src, recs)
    code, rows, stats = extract(tmp_path, src, "--resume")
    assert code == 0
    assert sorted(r["id"] for r in rows) == sorted(r["id"] for r in recs)  # each id once, none lost
    assert stats["records_skipped_resume"] == 5 and stats["records_done"] == 7
