"""Labelled test instances for a schema without any: seeded walks (generate.py) for valid ones,
edits of those (mutate.py) and the walks that missed for invalid ones, every label from
jsonschema (labels.py). The same schema and seed give the same instances."""
from __future__ import annotations

import json
import math
import random
import time

from benchmarks.grammar_bench import labels
from benchmarks.grammar_bench.generate import NoValue, Walker
from benchmarks.grammar_bench.mutate import KINDS, mutate

WALKS = 24
TIME_BUDGET_S = 10.0  # per schema: a huge schema gets fewer candidates, not a stalled collection
ROOT_PROBES = [{}, [], "x", 0, None, True]


def _json_safe(value) -> bool:
    try:
        text = json.dumps(value, allow_nan=False, ensure_ascii=False)
        text.encode("utf-8")  # a lone surrogate (from a regex range) is no JSON text an engine can see
    except (TypeError, ValueError):
        return False
    return len(text) < 20_000 and not _has_nonfinite(value)


def _has_nonfinite(v) -> bool:
    if isinstance(v, float):
        return not math.isfinite(v)
    if isinstance(v, dict):
        return any(_has_nonfinite(x) for x in v.values())
    if isinstance(v, list):
        return any(_has_nonfinite(x) for x in v)
    return False


class _Collector:
    def __init__(self, schema, n_valid, n_invalid):
        self.checker = labels.validator(schema)
        self.n_valid, self.n_invalid = n_valid, n_invalid
        self.valid: list = []
        self.invalid: list = []
        self.seen: set[str] = set()

    def offer(self, value, how: str) -> bool | None:
        """Label `value` and keep it if new and its side is not full; returns the label."""
        if not _json_safe(value):
            return None
        key = json.dumps(value, sort_keys=True)
        if key in self.seen:
            return None
        try:
            ok = labels.is_valid(self.checker, value)
        except labels.Unlabelled:
            return None
        side, cap = (self.valid, self.n_valid) if ok else (self.invalid, self.n_invalid)
        if len(side) < cap:
            self.seen.add(key)
            side.append({"data": value, "valid": ok, "how": how})
        return ok

    def full(self) -> bool:
        return len(self.valid) >= self.n_valid and len(self.invalid) >= self.n_invalid


def make_tests(schema, seed: str, n_valid: int = 4, n_invalid: int = 4) -> list[dict]:
    """Up to n_valid valid and n_invalid invalid instances: [{"data", "valid", "how"}]."""
    rng = random.Random(seed)
    box = _Collector(schema, n_valid, n_invalid)
    start = time.perf_counter()
    misses = []
    for i in range(WALKS):
        if len(box.valid) >= n_valid or time.perf_counter() - start > TIME_BUDGET_S:
            break
        walker = Walker(schema, random.Random(f"{seed}/walk{i}"), rich=bool(i % 2))
        try:
            value = walker.value()
        except (NoValue, RecursionError, TypeError, ValueError, KeyError, AttributeError):
            continue
        if box.offer(value, "walk minimal" if i % 2 == 0 else "walk rich") is False:
            misses.append(value)
    for value in misses[:1]:  # one near miss of a walk, then edits of the valid ones
        box.offer(value, "missed walk")
    sources = [t["data"] for t in box.valid] or [None]
    for i in range(len(KINDS) * 3):
        if len(box.invalid) >= n_invalid or time.perf_counter() - start > 2 * TIME_BUDGET_S:
            break
        kind = KINDS[i % len(KINDS)]
        base = sources[i % len(sources)]
        if base is None:
            break
        candidate = mutate(base, kind, rng)
        if candidate is not None:
            box.offer(candidate, f"mutation {kind}")
    for value in misses + ROOT_PROBES:
        if len(box.invalid) >= n_invalid:
            break
        box.offer(value, "missed walk" if value in misses else "root probe")
    return box.valid + box.invalid
