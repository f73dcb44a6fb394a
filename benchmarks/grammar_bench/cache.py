"""Outcomes kept between runs, one JSONL file per engine build: peers are keyed by their
version, kvx by a hash of the sources that decide its answers (kvx/grammar, kvx/job/validation.py),
so a rerun against a changed kvx recompiles only kvx. Each row's key covers the schema, the
tokenised instances and the hard limit."""
from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

from benchmarks.grammar_bench.workers import Outcome


def kvx_source() -> tuple[Path, str, str]:
    """(package folder, source hash, 'commit[+dirty]') of the kvx that `import kvx` finds."""
    import importlib.util

    folder = Path(importlib.util.find_spec("kvx").origin).parent
    h = hashlib.sha256()
    files = sorted((folder / "grammar").rglob("*.py")) + [folder / "cli" / "validation.py"]
    for path in files:
        if path.exists():
            h.update(str(path.relative_to(folder)).encode() + path.read_bytes())
    try:
        commit = subprocess.run(["git", "-C", str(folder), "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(folder), "status", "--porcelain", "--", "."], capture_output=True,
                               text=True, check=True).stdout.strip()
        commit += "+uncommitted changes" if dirty else ""
    except (OSError, subprocess.CalledProcessError):
        commit = "not a git checkout"
    return folder, h.hexdigest()[:12], commit


def row_key(schema_text: str, instances: list, kill_after_s: float) -> str:
    blob = json.dumps([schema_text, [ids for _, ids in instances], kill_after_s])
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


class OutcomeCache:
    def __init__(self, folder: Path, engine: str, build: str, enabled: bool = True):
        self.path = folder / f"{engine}-{build}.jsonl"
        self.enabled = enabled
        self.rows: dict[str, Outcome] = {}
        if enabled and self.path.exists():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                try:
                    row = json.loads(line)
                    self.rows[row["key"]] = Outcome.from_json(row["outcome"])
                except (ValueError, KeyError, TypeError):
                    continue  # a torn last line from a killed run

    def get(self, key: str) -> Outcome | None:
        return self.rows.get(key) if self.enabled else None

    def put(self, key: str, outcome: Outcome) -> None:
        self.rows[key] = outcome
        if outcome.status == "failed":
            return  # a dead worker is not an answer worth keeping
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"key": key, "outcome": outcome.to_json()}) + "\n")
