"""Engines for the worker tests: no tokenizer, behaviour chosen by the schema text."""
from __future__ import annotations

import json
import time


class _Compiled:
    def accepts(self, ids):
        return sum(ids) % 2 == 0  # even sums accepted: something the test can predict

    def post_check(self, value):
        return None


class SleepyEngine:
    """{"sleep": s} sleeps s seconds in compile (a runaway compile); {"refuse": msg} refuses."""

    name = "sleepy"

    def compile(self, schema_text):
        from benchmarks.grammar_bench.engines import Refused

        schema = json.loads(schema_text)
        if "refuse" in schema:
            raise Refused(schema["refuse"])
        time.sleep(schema.get("sleep", 0))
        return _Compiled()
