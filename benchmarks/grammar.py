"""Grammar benchmark: kvx vs outlines-core vs xgrammar on schemas/*.json, one process, same tokens.

For each schema a valid record is produced by a seeded kvx random walk; its token ids are then fed
to every engine. Figures: compile time (kvx cold = DFA + per-schema prep, and from the disk cache),
first-visit mask time (first pass over the record), steady per-token mask time p50/p99 (second
pass with a fresh matcher: kvx returns cached masks; peers compute as they always do).
Run: .venv/bin/python benchmarks/grammar.py
"""
from __future__ import annotations

import importlib.util
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "grammar"))

from grammar_fixtures import smol_tokenizer  # noqa: E402

from kvx.grammar import compile_schema  # noqa: E402
from kvx.grammar.vocab import vocab_for  # noqa: E402

VOCAB = 49152


def _pct(xs, q):
    return float(np.percentile(np.array(xs) * 1e6, q)) if xs else float("nan")


PLAIN = set(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 {}[],:.-\"")


def record_tokens(grammar, seed=0):
    """A valid record, preferring plain ASCII tokens so every peer's grammar also accepts it."""
    rng = random.Random(seed)
    plain = np.array([bool(tb) and set(tb) <= PLAIN for tb in grammar.vocab.token_bytes])
    m = grammar.matcher(max_tokens=grammar.matcher().min_tokens_to_finish() + 40)
    ids = []
    while not m.is_finished():
        mask = m.allowed_mask().numpy()
        allowed = np.flatnonzero(mask & plain) if (mask & plain).any() else np.flatnonzero(mask)
        tid = int(allowed[rng.randrange(len(allowed))])
        m.advance(tid)
        ids.append(tid)
    return ids


def bench_kvx(schema, tok):
    t = time.perf_counter()
    grammar = compile_schema(schema, tok, cache=False)
    cold = time.perf_counter() - t
    compile_schema(schema, tok)  # store
    t = time.perf_counter()
    grammar = compile_schema(schema, tok)
    cached = time.perf_counter() - t
    ids = record_tokens(compile_schema(schema, tok, cache=False))
    first, steady = [], []
    for times in (first, steady):
        m = grammar.matcher()
        for tid in ids:
            t = time.perf_counter()
            m.allowed_mask()
            times.append(time.perf_counter() - t)
            m.advance(tid)
    return ids, {"compile_ms": cold * 1e3, "cached_compile_ms": cached * 1e3, "states": grammar.dfa.num_states,
                 "first_ms_mean": float(np.mean(first)) * 1e3, "first_ms_max": float(np.max(first)) * 1e3,
                 "p50_us": _pct(steady, 50), "p99_us": _pct(steady, 99)}


def bench_xgrammar(schema, tok, ids):
    import xgrammar as xgr

    info = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=VOCAB)
    compiler = xgr.GrammarCompiler(info, cache_enabled=False)
    t = time.perf_counter()
    compiled = compiler.compile_json_schema(json.dumps(schema), any_whitespace=False)
    cold = time.perf_counter() - t
    bitmask = xgr.allocate_token_bitmask(1, VOCAB)
    first, steady = [], []
    for times in (first, steady):
        m = xgr.GrammarMatcher(compiled)
        for tid in ids[:-1]:
            t = time.perf_counter()
            m.fill_next_token_bitmask(bitmask)
            times.append(time.perf_counter() - t)
            if not m.accept_token(tid):
                raise RuntimeError("xgrammar rejected a kvx record token")
    return {"compile_ms": cold * 1e3, "first_ms_mean": float(np.mean(first)) * 1e3,
            "first_ms_max": float(np.max(first)) * 1e3, "p50_us": _pct(steady, 50), "p99_us": _pct(steady, 99)}


def bench_outlines(schema, tok, ids):
    from outlines_core import Guide, Index, Vocabulary
    from outlines_core.json_schema import build_regex_from_schema

    vocab = vocab_for(tok)
    table: dict[bytes, list[int]] = {}
    for tid, tb in enumerate(vocab.token_bytes):
        if tb:
            table.setdefault(tb, []).append(tid)
    t = time.perf_counter()
    index = Index(build_regex_from_schema(json.dumps(schema)), Vocabulary(vocab.eos_ids[0], table))
    cold = time.perf_counter() - t
    first, steady = [], []
    for times in (first, steady):
        guide = Guide(index)
        for tid in ids[:-1]:
            t = time.perf_counter()
            guide.get_tokens()
            times.append(time.perf_counter() - t)
            guide.advance(tid)
    return {"compile_ms": cold * 1e3, "first_ms_mean": float(np.mean(first)) * 1e3,
            "first_ms_max": float(np.max(first)) * 1e3, "p50_us": _pct(steady, 50), "p99_us": _pct(steady, 99)}


def main():
    os.environ.setdefault("KVX_CACHE", tempfile.mkdtemp(prefix="kvx-bench-"))
    tok = smol_tokenizer()
    t = time.perf_counter()
    vocab_for(tok)
    from kvx.grammar.token_fsm import token_matrix

    token_matrix(vocab_for(tok))
    print(f"per-tokenizer prep (token bytes + matrix, once): {(time.perf_counter() - t) * 1e3:.0f} ms")
    peers = {"xgrammar": bench_xgrammar, "outlines-core": bench_outlines}
    print(f"{'schema':<16}{'engine':<15}{'states':>7}{'compile ms':>11}{'cached ms':>10}"
          f"{'1st mean ms':>12}{'1st max ms':>11}{'p50 us':>9}{'p99 us':>9}  ratios (peer/kvx)")
    for path in sorted((REPO / "schemas").glob("*.json")):
        schema = json.loads(path.read_text())
        ids, k = bench_kvx(schema, tok)
        print(f"{path.stem:<16}{'kvx':<15}{k['states']:>7}{k['compile_ms']:>11.1f}{k['cached_compile_ms']:>10.1f}"
              f"{k['first_ms_mean']:>12.2f}{k['first_ms_max']:>11.2f}{k['p50_us']:>9.2f}{k['p99_us']:>9.2f}")
        for name, fn in peers.items():
            if importlib.util.find_spec(name.replace("-", "_")) is None:
                print(f"{'':<16}{name:<15} not installed")
                continue
            try:
                p = fn(schema, tok, ids)
            except Exception as err:  # a peer that cannot take this schema is a finding, not a crash
                print(f"{'':<16}{name:<15} failed: {str(err).splitlines()[0][:80]}")
                continue
            print(f"{'':<16}{name:<15}{'':>7}{p['compile_ms']:>11.1f}{'':>10}{p['first_ms_mean']:>12.2f}"
                  f"{p['first_ms_max']:>11.2f}{p['p50_us']:>9.2f}{p['p99_us']:>9.2f}"
                  f"  compile x{p['compile_ms'] / k['compile_ms']:.2f}, p50 x{p['p50_us'] / k['p50_us']:.1f},"
                  f" p99 x{p['p99_us'] / k['p99_us']:.1f}")


if __name__ == "__main__":
    main()
