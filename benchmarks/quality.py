"""Extraction quality on the labelled complaints: per-field accuracy with baselines, for each way of
prompting and of making closed choices, in one run of the default model.

    .venv/bin/python benchmarks/quality.py [--limit N] [--runs NAME,...] [--long N] [--optional-product] [--dtype float32]

Each run is the real `kvx extract` path (in-process, one model and one engine shared by the runs,
so later runs find earlier runs' prompts in the prefix cache: compare speed with
benchmarks/extract.py, not here) on `../shared/eval/complaints-dev.jsonl` with its
`complaint.schema.json`:

  json-*     the schema's JSON in the system message (kvx's prompt before issue 17)
  fields-*   the schema as a readable field list (`--schema-style fields`)
  *-greedy / *-rank / *-calibrated / *-channel   `--choices`: first-token argmax; whole values
             ranked by total log-probability; ranked against a content-free prompt (contextual
             calibration); calibrated plus log p(text | "field: value") for enum fields (kvx/channel.py)
             and how much the text names each value's words (kvx/mentions.py)
  fields-*-nomention   `--no-mentions`: calibrated or channel without the mention scores (the
             other calibrated and channel runs have them, the default)
  *-greedy, fields-channel-keep, example-before   `--ungrounded keep`: company names and amounts
             the text does not hold are kept (kvx before issue 17); the other runs write null there
             (kvx/grounding.py, the default)
  *-greedy, fields-channel-loop, example-before   `--no-repeat-ngram 0`: free text may repeat
             itself (kvx before the repeat guard, kvx/repeat_guard.py)
  *-greedy, fields-channel-uncut, example-before   `--cut-text keep`: a summary the grammar cut at
             its maxLength stays cut mid-sentence (kvx before kvx/cut_text.py)
  *-greedy, fields-channel-digits, example-before   `--no-copy-digits`: strings may hold digits
             their text lacks (kvx before kvx/digit_guard.py)
  example-*  one worked example (`--examples benchmarks/data/complaint_example.jsonl`, an invented
             complaint): `-before` as kvx was (old prompt, greedy choices, `--no-copy-guard`),
             `-after` with the defaults

Printed per run: schema-valid rows; `product` accuracy (majority-class baseline: always the commonest
label), balanced accuracy, the share of the commonest answer; `company` right (named texts with the
name, unnamed texts with null) and its parts; amounts the text holds; records copying an example
value their text lacks; summaries that loop or stop mid-sentence. `--optional-product` makes product Pydantic's Optional (the enum or null)
for every run. `--long N` adds N texts longer than the model's context (complaints of one
product joined) through `--truncate none|head|tail|middle`.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import kvx.cli.run as cli_run  # noqa: E402
from kvx.cli.main import main as kvx_main  # noqa: E402
from kvx.job.runtime import EngineOptions, real_runtime  # noqa: E402
from kvx.copy_check import CopyCheck  # noqa: E402
from quality_metrics import invented_digits, loops, score_company, score_enum, score_number, unfinished  # noqa: E402

DATA = REPO.parent / "shared" / "eval"
EXAMPLE = REPO / "benchmarks" / "data" / "complaint_example.jsonl"


@dataclass
class Run:
    name: str
    args: list[str]
    examples: bool = False


KEEP = ["--ungrounded", "keep"]  # every value kept, held by the text or not
UNGUARDED = ["--no-repeat-ngram", "0"]  # free text may loop
UNCUT = ["--cut-text", "keep"]  # free text the grammar cut at its maxLength stays cut mid-sentence
DIGITS = ["--no-copy-digits"]  # free text may write digits its text lacks
BEFORE = [*KEEP, *UNGUARDED, *UNCUT, *DIGITS]  # kvx before issue 17 kept every value, let text loop, left it cut
RUNS = [Run(f"{style}-{mode}", ["--schema-style", style, "--choices", mode, *(BEFORE if mode == "greedy" else [])])
        for style in ("json", "fields") for mode in ("greedy", "rank", "calibrated", "channel")]
RUNS += [Run("fields-calibrated-nomention", ["--schema-style", "fields", "--choices", "calibrated", "--no-mentions"]),
         Run("fields-channel-nomention", ["--schema-style", "fields", "--choices", "channel", "--no-mentions"]),
         Run("fields-channel-keep", ["--schema-style", "fields", "--choices", "channel", *KEEP]),
         Run("fields-channel-loop", ["--schema-style", "fields", "--choices", "channel", *UNGUARDED]),
         Run("fields-channel-uncut", ["--schema-style", "fields", "--choices", "channel", *UNCUT]),
         Run("fields-channel-digits", ["--schema-style", "fields", "--choices", "channel", *DIGITS]),
         Run("example-before", ["--schema-style", "json", "--choices", "greedy", "--no-copy-guard",
                                 "--examples", str(EXAMPLE), *BEFORE], True),
         Run("example-after", ["--examples", str(EXAMPLE)], True)]


def extract(src: Path, schema: Path, out: Path, args: list[str]) -> tuple[list[dict], dict, float]:
    stats = out.with_suffix(".stats.json")
    t0 = time.perf_counter()
    code = kvx_main(["extract", str(src), "--schema", str(schema), "-o", str(out), "--ordered", "-q",
                     "--stats", str(stats), "--max-failures", "1000000", *args])
    if code != 0:
        raise SystemExit(f"kvx extract failed (exit {code}) with {args}")
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    return rows, json.loads(stats.read_text()), time.perf_counter() - t0


def score(run: Run, rows: list[dict], data: list[dict], schema: dict, seconds: float, stats: dict) -> dict:
    records = [r["record"] if r["status"] == "ok" else {} for r in rows]
    texts = [d["text"] for d in data]
    product = score_enum([r.get("product") for r in records], [d["label"]["product"] for d in data])
    company = score_company([r.get("company") for r in records], [d["label"]["company"] for d in data], texts)
    amount = score_number([r.get("disputed_amount_usd") for r in records], texts)
    copies = None
    if run.examples:
        check = CopyCheck([json.loads(line)["output"] for line in EXAMPLE.read_text().splitlines()], schema)
        copies = sum(bool(check.copied(r, t)) for r, t in zip(records, texts) if r)
    return {"run": run.name, "n": len(rows), "ok": sum(r["status"] == "ok" for r in rows), "seconds": seconds,
            "product": product, "company": company, "amount": amount, "copying": copies,
            "wants_money_back": sum(r.get("wants_money_back") is True for r in records),
            "ranked": stats["engine"].get("ranked_choices", 0),
            "overruled": stats["engine"].get("choices_overruling_greedy", 0),
            "ungrounded": stats["records_with_ungrounded_values"],
            "loops": sum(loops(r.get("summary"), t) for r, t in zip(records, texts)),
            "digits": sum(invented_digits(r, t) for r, t in zip(records, texts)),
            "unfinished": sum(unfinished(r.get("summary")) for r in records)}


def print_table(results: list[dict], labels: Counter) -> None:
    p0 = results[0]["product"]
    print(f"\n{p0.n} complaints; product labels: {dict(labels.most_common())}")
    print(f"product majority-class baseline: {p0.majority:.1%} (always '{p0.majority_label}'), "
          f"its balanced accuracy {1 / len(labels):.1%}; company baseline (always the commonest label's name, "
          f"null never): {results[0]['company'].majority:.1%}\n")
    head = (f"{'run':20} {'ok':>7} {'product':>8} {'bal.acc':>8} {'top ans':>8} {'company':>8} {'named->name':>12} "
            f"{'unnamed->null':>14} {'amounts':>14} {'copying':>8} {'not held':>8} {'loops':>6} {'unfin.':>6} {'digits':>6} {'ranked':>10} {'s':>6}")
    print(head)
    print("-" * len(head))
    for r in results:
        p, c, a = r["product"], r["company"], r["amount"]
        non_null = a.n - a.nulls
        copying = "-" if r["copying"] is None else f"{r['copying']}/{r['ok']}"
        print(f"{r['run']:20} {r['ok']:>3}/{r['n']:<3} {p.accuracy:>8.1%} {p.balanced:>8.1%} {p.top_share:>8.0%} "
              f"{c.accuracy:>8.1%} {c.named_right:>5}/{c.named:<3}   {c.unnamed_null:>6}/{c.unnamed:<3}    "
              f"{a.grounded:>4}/{non_null:<3}in text {copying:>8} {r['ungrounded']:>8} {r['loops']:>6} {r['unfinished']:>6} {r['digits']:>6} {r['ranked']:>4}({r['overruled']:>3}) {r['seconds']:>6.0f}")
    print("\namounts: non-null disputed_amount_usd values the text holds (no amount labels in this set); "
          "not held: records with a company or amount their text does not hold (null unless kept); "
          "loops: summaries repeating a three-word phrase their text lacks; unfin.: summaries that stop mid-sentence; "
          "digits: records whose strings hold a run of digits their text lacks; "
          "ranked: choices made by ranking (in brackets: where greedy's first token would have started another value)")
    for r in results:
        print(f"{r['run']:20} products answered: {dict(r['product'].predicted.most_common())}")



def long_texts(data: list[dict], n: int, tokens: int, tokenizer) -> list[dict]:
    """n texts longer than `tokens`: a complaint followed by other complaints of its product."""
    out = []
    by_product: dict[str, list[dict]] = {}
    for d in data:
        by_product.setdefault(d["label"]["product"], []).append(d)
    for d in data:
        same = [o for o in by_product[d["label"]["product"]] if o is not d]
        text, i = d["text"], 0
        while same and len(tokenizer.encode(text)) <= tokens and i < 200:
            text += "\n\n" + same[i % len(same)]["text"]
            i += 1
        if len(tokenizer.encode(text)) > tokens:
            out.append({"id": f"long-{d['id']}", "text": text, "label": d["label"]})
        if len(out) == n:
            break
    return out


def optional(prop: dict) -> dict:
    """{"type": "string", "enum": [...], "description": d} -> {"anyOf": [{...enum}, {"type": "null"}], "description": d}"""
    inner = {k: v for k, v in prop.items() if k in ("type", "enum")}
    return {**{k: v for k, v in prop.items() if k not in inner}, "anyOf": [inner, {"type": "null"}]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--limit", type=int, default=0, help="first N complaints only (0 = all)")
    ap.add_argument("--runs", default="", help="comma-separated run names (default: all)")
    ap.add_argument("--long", type=int, default=0, help="also N texts longer than the context, with --truncate")
    ap.add_argument("--kv-memory", default="4GiB")
    ap.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16"],
                    help="weights dtype; float32 makes a record depend only on its run's settings, not on "
                         "which records share its batches (bf16 does: README, --dtype), at ~2x the time")
    ap.add_argument("--optional-product", action="store_true",
                    help="make product optional as Pydantic writes Optional[...] (anyOf of the enum and null)")
    args = ap.parse_args()
    data = [json.loads(line) for line in (args.data / "complaints-dev.jsonl").read_text().splitlines()]
    data = data[: args.limit] if args.limit else data
    schema_path = args.data / "complaint.schema.json"
    schema = json.loads(schema_path.read_text())
    if args.optional_product:
        schema_path = Path(tempfile.mkdtemp()) / "complaint-optional-product.schema.json"
        schema["properties"]["product"] = optional(schema["properties"]["product"])
        schema_path.write_text(json.dumps(schema))
    runs = [r for r in RUNS if not args.runs or r.name in args.runs.split(",")]

    runtime = real_runtime(schema, EngineOptions(kv_memory=cli_run.parse_size(args.kv_memory, "--kv-memory"),
                                                 dtype=args.dtype))
    cli_run.build_runtime = lambda schema, opts: runtime  # one model and engine for every run
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "in.jsonl"
        src.write_text("".join(json.dumps({"id": d["id"], "text": d["text"]}) + "\n" for d in data))
        for run in runs:
            rows, stats, seconds = extract(src, schema_path, Path(tmp) / f"{run.name}.jsonl", run.args)
            results.append(score(run, rows, data, schema, seconds, stats))
            print(f"{run.name}: done in {seconds:.0f} s", file=sys.stderr, flush=True)
        print_table(results, Counter(d["label"]["product"] for d in data))
        if args.long:
            run_long(data, args.long, schema_path, Path(tmp), runtime)


def run_long(data: list[dict], n: int, schema_path: Path, tmp: Path, runtime) -> None:
    context = runtime.max_model_len
    longs = long_texts(data, n, context, runtime.tokenizer)
    src = tmp / "long.jsonl"
    src.write_text("".join(json.dumps({"id": d["id"], "text": d["text"]}) + "\n" for d in longs))
    sizes = [len(runtime.tokenizer.encode(d["text"])) for d in longs]
    print(f"\n{len(longs)} texts longer than the context ({context} tokens): {min(sizes)}-{max(sizes)} tokens")
    print(f"{'--truncate':11} {'rows':>5} {'ok':>4} {'error':>6} {'cut tokens':>11} {'product':>8} {'s':>6}")
    for mode in ("none", "head", "tail", "middle"):
        rows, stats, seconds = extract(src, schema_path, tmp / f"long-{mode}.jsonl", ["--truncate", mode])
        right = sum(r["status"] == "ok" and r["record"]["product"] == d["label"]["product"] for r, d in zip(rows, longs))
        cut = sum(r["usage"]["truncated_tokens"] for r in rows)
        assert cut == stats["truncated_tokens"]
        print(f"{mode:11} {len(rows):>5} {stats['ok']:>4} {stats['error']:>6} {cut:>11} {right:>4}/{len(rows):<3} {seconds:>6.0f}")


if __name__ == "__main__":
    main()
