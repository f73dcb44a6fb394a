"""--replicas without Ray: exit 2 with the install line, before any work; bad fleet option values."""
import sys

import pytest
from kvx_cli_helpers import FAKE, REPO, TICKET_SCHEMA

from kvx.cli.main import main

SAMPLES = REPO / "samples" / "tickets.jsonl"


@pytest.fixture(autouse=True)
def fake_engine(monkeypatch):
    monkeypatch.setenv("KVX_RUNTIME_FACTORY", FAKE)


def test_replicas_without_ray_is_exit_2_with_the_install_line(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    out = tmp_path / "out.jsonl"
    code = main(["extract", str(SAMPLES), "--schema", str(TICKET_SCHEMA), "-o", str(out), "--replicas", "2"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and not out.exists()
    assert err == "kvx: error: --replicas 2 runs on Ray, which is not installed: pip install 'kvx[ray]'"


@pytest.mark.parametrize("args,needle", [
    (["--replicas", "0"], "--replicas 0: must be at least 1"),
    (["--replicas", "2", "--replica-cpus", "0"], "--replica-cpus 0: must be more than 0"),
    (["--replicas", "2", "--replica-gpus", "-1"], "--replica-gpus -1: must be at least 0"),
])
def test_bad_fleet_values(tmp_path, capsys, args, needle):
    code = main(["extract", str(SAMPLES), "--schema", str(TICKET_SCHEMA), "-o", str(tmp_path / "o.jsonl"), *args])
    assert code == 2 and needle in capsys.readouterr().err
