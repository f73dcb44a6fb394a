"""Grammar benchmark: kvx vs outlines-core vs xgrammar on schemas/*.json, one process, same tokens.

For each schema valid records are produced by seeded kvx random walks; the first one that every
installed peer's grammar also accepts is fed to every engine (a peer that rejects all of them is
reported as such; e.g. outlines-core drops `null` from `"type": ["object", "null"]`). Peers are set
up with their documented JSON-schema APIs over the same HF tokenizer, compact separators. Figures: compile time (kvx cold = DFA + per-schema prep, and from the disk cache),
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
from kvx.grammar.tokens.vocab import vocab_for  # noqa: E402

def _pct(xs, q):
    return float(np.percentile(np.array(xs) * 1e6, q)) if xs else float("nan")


PLAIN = set(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 {}[],:.-\"")


def record_tokens(grammar, seed=0):
    """A valid record, preferring plain ASCII tokens so every peer's grammar also accepts it."""
    rng = random.Random(seed)
    plain = np.array([bool(tb) and set(tb) <= PLAIN for tb in grammar.vocab.token_bytes])
    if seed % 2:  # odd seeds write null only where nothing else fits (a peer may lack nullable types)
        plain &= ~np.array([bool(tb) and (b"null".startswith(tb) or tb.startswith(b"null"))
                            for tb in grammar.vocab.token_bytes])
    m = grammar.matcher(max_tokens=grammar.matcher().min_tokens_to_finish() + (200 if seed % 2 else 40))
    quote = grammar.vocab.id_for_bytes(b'"')
    ids = []
    while not m.is_finished():
        mask = m.allowed_mask().numpy()
        allowed = np.flatnonzero(mask & plain) if (mask & plain).any() else np.flatnonzero(mask)
        tid = int(allowed[rng.randrange(len(allowed))])
        if seed % 2 and quote is not None and mask[quote] and rng.random() < 0.3:
            tid = quote  # odd seeds: short strings, so the length budget leaves room for objects

        m.advance(tid)
        ids.append(tid)
    return ids


def _timed_passes(make, step, ids):
    """(first-visit times, steady times): two passes over `ids`, each with a fresh matcher."""
    first, steady = [], []
    for times in (first, steady):
        m = make()
        for tid in ids:
            step(m, tid, times)
    return first, steady


def _figures(first, steady):
    return {"first_ms_mean": float(np.mean(first)) * 1e3, "first_ms_max": float(np.max(first)) * 1e3,
            "p50_us": _pct(steady, 50), "p99_us": _pct(steady, 99)}


def compile_kvx(schema, tok):
    t = time.perf_counter()
    compile_schema(schema, tok, cache=False)
    cold = time.perf_counter() - t
    compile_schema(schema, tok)  # store
    t = time.perf_counter()
    grammar = compile_schema(schema, tok)
    cached = time.perf_counter() - t
    return grammar, {"compile_ms": cold * 1e3, "cached_compile_ms": cached * 1e3, "states": grammar.program.num_states}


def run_kvx(grammar, ids):
    def step(m, tid, times):
        t = time.perf_counter()
        m.allowed_mask()
        times.append(time.perf_counter() - t)
        m.advance(tid)

    return _figures(*_timed_passes(grammar.matcher, step, ids))


class Rejected(Exception):
    pass


def setup_xgrammar(schema, tok):
    """xgrammar's documented JSON-schema path: TokenizerInfo.from_huggingface + GrammarCompiler."""
    import xgrammar as xgr

    vocab = vocab_for(tok)
    info = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=vocab.vocab_size, stop_token_ids=vocab.eos_ids)
    compiler = xgr.GrammarCompiler(info, cache_enabled=False)
    t = time.perf_counter()
    # kvx writes compact JSON (",", ":") and, as JSON Schema says, allows extra keys where
    # additionalProperties is absent; xgrammar defaults to ", "/": " separators and strict mode
    compiled = compiler.compile_json_schema(json.dumps(schema), any_whitespace=False, separators=(",", ":"),
                                            strict_mode=False)
    cold = time.perf_counter() - t
    bitmask = xgr.allocate_token_bitmask(1, info.vocab_size)

    def accepts(ids):
        m = xgr.GrammarMatcher(compiled)
        return all(m.accept_token(tid) for tid in ids)

    def run(ids):
        def step(m, tid, times):
            t = time.perf_counter()
            m.fill_next_token_bitmask(bitmask)
            times.append(time.perf_counter() - t)
            if not m.accept_token(tid):
                raise Rejected(f"xgrammar rejected token {tid} at position {len(times) - 1}")

        return _figures(*_timed_passes(lambda: xgr.GrammarMatcher(compiled), step, ids))

    return cold * 1e3, accepts, run


def setup_outlines(schema, tok):
    """outlines-core's documented path: build_regex_from_schema -> Index(regex, Vocabulary) -> Guide."""
    from outlines_core import Guide, Index, Vocabulary
    from outlines_core.json_schema import build_regex_from_schema

    vocab = vocab_for(tok)
    table: dict[bytes, list[int]] = {}
    for tid, tb in enumerate(vocab.token_bytes):
        if tb:
            table.setdefault(tb, []).append(tid)
    t = time.perf_counter()
    index = Index(build_regex_from_schema(json.dumps(schema), whitespace_pattern=""), Vocabulary(vocab.eos_ids[0], table))
    cold = time.perf_counter() - t

    def accepts(ids):
        guide = Guide(index)
        try:
            for tid in ids:
                guide.advance(tid)
        except Exception:
            return False
        return True

    def run(ids):
        def step(guide, tid, times):
            t = time.perf_counter()
            guide.get_tokens()
            times.append(time.perf_counter() - t)
            guide.advance(tid)

        return _figures(*_timed_passes(lambda: Guide(index), step, ids))

    return cold * 1e3, accepts, run


PEERS = {"xgrammar": setup_xgrammar, "outlines-core": setup_outlines}
SEEDS = 30


def main():
    os.environ.setdefault("KVX_CACHE", tempfile.mkdtemp(prefix="kvx-bench-"))
    tok = smol_tokenizer()
    t = time.perf_counter()
    compile_schema({"type": "integer"}, tok, cache=False)  # vocab bytes, token matrix, prefix table, imports
    print(f"per-tokenizer prep (token bytes + matrix + prefix table, once): {(time.perf_counter() - t) * 1e3:.0f} ms")
    print(f"{'schema':<16}{'engine':<15}{'states':>7}{'compile ms':>11}{'cached ms':>10}"
          f"{'1st mean ms':>12}{'1st max ms':>11}{'p50 us':>9}{'p99 us':>9}  ratios (peer/kvx)")
    for path in sorted((REPO / "schemas").glob("*.json")):
        schema = json.loads(path.read_text())
        grammar, k = compile_kvx(schema, tok)
        peers = {}
        for name, setup in PEERS.items():
            if importlib.util.find_spec(name.replace("-", "_")) is None:
                peers[name] = "not installed"
                continue
            try:
                peers[name] = setup(schema, tok)
            except Exception as err:  # a peer that cannot take this schema is a finding, not a crash
                peers[name] = f"failed to compile: {str(err).splitlines()[0][:80]}"
        # a kvx record (seeded random walk) that every peer also accepts, so all run the same tokens
        walker = compile_schema(schema, tok, cache=False)
        records = [record_tokens(walker, seed) for seed in range(SEEDS)]
        ok = {name: [i for i, ids in enumerate(records) if p[1](ids[:-1])] for name, p in peers.items()
              if not isinstance(p, str)}
        common = [i for i in range(SEEDS) if all(i in v for v in ok.values())]
        pick = common[0] if common else next((v[0] for v in ok.values() if v), 0)
        ids = records[pick]
        k.update(run_kvx(grammar, ids))
        print(f"{path.stem:<16}{'kvx':<15}{k['states']:>7}{k['compile_ms']:>11.1f}{k['cached_compile_ms']:>10.1f}"
              f"{k['first_ms_mean']:>12.3f}{k['first_ms_max']:>11.2f}{k['p50_us']:>9.2f}{k['p99_us']:>9.2f}"
              f"  record seed {pick}, {len(ids)} tokens")
        for name, p in peers.items():
            if isinstance(p, str):
                print(f"{'':<16}{name:<15} {p}")
                continue
            cold, _, run = p
            if pick not in ok[name]:
                print(f"{'':<16}{name:<15}{'':>7}{cold:>11.1f}  rejected all {SEEDS} kvx records"
                      f" (accepted {len(ok[name])}/{SEEDS})")
                continue
            r = run(ids[:-1])  # the last kvx token is EOS
            print(f"{'':<16}{name:<15}{'':>7}{cold:>11.1f}{'':>10}{r['first_ms_mean']:>12.3f}"
                  f"{r['first_ms_max']:>11.2f}{r['p50_us']:>9.2f}{r['p99_us']:>9.2f}"
                  f"  compile x{cold / k['compile_ms']:.2f}, p50 x{r['p50_us'] / k['p50_us']:.1f},"
                  f" p99 x{r['p99_us'] / k['p99_us']:.1f}; accepts {len(ok[name])}/{SEEDS} kvx records")


if __name__ == "__main__":
    main()
