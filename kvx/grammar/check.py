"""What `kvx schema check` reports about a schema: compile it (no disk cache, so times are real)."""
from __future__ import annotations

import time

from kvx.grammar.compile import compile_schema
from kvx.grammar.options import GrammarOptions

# a compile past this share of its deadline is said to be near it: CPU time varies between runs and
# machines (a schema at 0.5 s was refused in some runs, 2026-12-06), so it may be refused elsewhere
NEAR_DEADLINE = 0.5


def schema_report(schema: dict, tokenizer, options: GrammarOptions = GrammarOptions()) -> dict:
    """Compile `schema` for `tokenizer` and time the first mask; raises UnsupportedSchema."""
    grammar = compile_schema(schema, tokenizer, options, cache=False)
    t1 = time.perf_counter()
    grammar.matcher().allowed_mask()
    return {
        "supported": True,
        "dfa_states": grammar.program.num_states,
        "rules": grammar.program.live_rules,
        "compile_ms": round(grammar.stats.compile_ms, 3),  # the per-schema cost
        "compile_cpu_ms": round(grammar.stats.compile_cpu_ms, 3),  # what the deadline counts
        "near_deadline": grammar.stats.compile_cpu_ms > NEAR_DEADLINE * options.compile_deadline * 1e3,
        "tokenizer_prep_ms": round(grammar.stats.tokenizer_prep_ms, 3),  # once per tokenizer and process
        "first_mask_ms": round((time.perf_counter() - t1) * 1e3, 3),
        "warnings": grammar.warnings,
        "post_checks": grammar.post_checks,
    }
