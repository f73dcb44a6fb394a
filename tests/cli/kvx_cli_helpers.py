"""Helpers shared by the CLI tests (a plain module, so its name cannot clash with other conftests)."""
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
TICKET_SCHEMA = REPO / "schemas" / "ticket.json"
FAKE = "kvx_fake_runtime:fake_runtime"


def run_kvx(args, stdin: bytes | None = None, env: dict | None = None, timeout: float = 120):
    """`python -m kvx.cli ARGS` in a subprocess, from the repo root."""
    full_env = {**os.environ, **(env or {})}
    full_env.setdefault("PYTHONPATH", str(REPO))
    return subprocess.run([sys.executable, "-m", "kvx.cli", *map(str, args)], cwd=REPO, input=stdin,
                          capture_output=True, timeout=timeout, env=full_env)


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text("utf-8").splitlines() if line.strip()]


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return path


def assert_one_line_error(stderr: str, *needles: str) -> None:
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("kvx: error: "), stderr
    for needle in needles:
        assert needle in lines[0], (needle, stderr)
