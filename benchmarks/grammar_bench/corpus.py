"""The schemas the benchmark runs: collected real-world ones (corpus.jsonl, written by
scripts/collect_schemas.py) and the JSON-Schema-Test-Suite's draft 2020-12 groups."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.grammar_bench import labels

REPO = Path(__file__).resolve().parents[2]
SUITE = REPO.parent / "shared" / "json-schema-test-suite" / "tests" / "draft2020-12"
LOCK = REPO / "benchmarks" / "schema_corpus.lock"


@dataclass
class Entry:
    id: str
    source: str  # "suite" or a sources.SOURCES name
    schema: object
    tests: list[dict] = field(default_factory=list)  # {"data", "valid", "how"}
    provenance: str = ""  # package==version:path, or the suite file

    @property
    def schema_text(self) -> str:
        return json.dumps(self.schema, ensure_ascii=False)


def schema_sha(schema) -> str:
    return hashlib.sha256(json.dumps(schema, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]


def default_corpus_dir() -> Path:
    from kvx.paths import cache_root

    return cache_root() / "schema-corpus"


def load_collected(path: Path) -> list[Entry]:
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            out.append(Entry(row["id"], row["source"], row["schema"], row["tests"],
                             f"{row['package']}=={row['version']}:{row['path']}"))
    return out


def load_suite(folder: Path = SUITE) -> tuple[list[Entry], int]:
    """The suite's groups with its own instances, relabelled by jsonschema as kvx checks records
    (formats asserted); returns the entries and how many labels that changed."""
    out, changed = [], 0
    for path in sorted(folder.glob("*.json")):
        for i, group in enumerate(json.loads(path.read_text(encoding="utf-8"))):
            checker = labels.validator(group["schema"])
            tests = []
            for test in group["tests"]:
                try:
                    ok = labels.is_valid(checker, test["data"])
                except labels.Unlabelled:
                    continue
                changed += ok != test["valid"]
                tests.append({"data": test["data"], "valid": ok, "how": test["description"]})
            out.append(Entry(f"suite/{path.stem}/{i}", "suite", group["schema"], tests,
                             f"JSON-Schema-Test-Suite draft2020-12/{path.name} group {i}: {group['description']}"))
    return out, changed
