"""kvx engine vs transformers' batched generate on a shared-prefix batch job, in one run.

256 requests = one ~500-token shared system prompt + a ~150-token unique ticket each, 64 new tokens
each (EOS ignored, so both sides produce exactly 64), greedy, default model (SmolLM2-135M GGUF).
The peer is HF transformers loading the same GGUF in float32 (--peer-dtype bfloat16 for a same-dtype
run against kvx's bf16 weights), batch 16, left padding; it can run on a subset (--peer-n) to save
time: its tokens/s is a rate, so the ratio stays comparable.

    .venv/bin/python benchmarks/engine.py [--n 256] [--peer-n 48] [--kv-memory 2GiB]
"""
from __future__ import annotations

import argparse
import random
import re
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from kvx.engine import Engine, EngineConfig, Request, SamplingParams  # noqa: E402
from kvx.models import load_model  # noqa: E402

WORDS = ("printer network invoice refund login password account billing delay shipment broken screen "
         "laptop order customer urgent error crash update install payment card bank email outage server "
         "slow replace warranty contract renewal monday friday support escalate manager office vpn").split()
SYSTEM = ("You are a support-ticket triage assistant. Read the ticket and extract a JSON record with the "
          "fields category, priority, product, sentiment, summary and the customer's requested action. "
          "Categories are billing, technical, account, shipping and other. Priority is low, normal, high "
          "or urgent; urgent only when the customer reports an outage or a deadline within a day. ")


def parse_bytes(s: str) -> int:
    m = re.fullmatch(r"\s*([\d.]+)\s*([KMGT]?)(i?B)?\s*", s, re.I)
    if not m:
        raise SystemExit(f"--kv-memory {s!r}: expected a size like 2GiB or 512MiB")
    return int(float(m.group(1)) * 1024 ** " KMGT".index((m.group(2) or " ").upper()))


def build_prompts(tok, n: int, prefix_tokens: int, tail_tokens: int, seed: int = 0) -> list[list[int]]:
    system = SYSTEM
    while len(tok.encode(system)) < prefix_tokens:
        system += SYSTEM
    rng = random.Random(seed)
    prompts = []
    for i in range(n):
        words = [f"Ticket {i}:"]
        while len(tok.encode(" ".join(words))) < tail_tokens:
            words.append(rng.choice(WORDS))
        text = tok.chat_prompt([{"role": "system", "content": system}, {"role": "user", "content": " ".join(words)}])
        prompts.append(tok.encode(text))
    return prompts


def common_prefix(prompts: list[list[int]]) -> int:
    n = min(map(len, prompts))
    for i in range(n):
        if any(p[i] != prompts[0][i] for p in prompts):
            return i
    return n


def run_kvx(loaded, prompts, args) -> tuple[float, list[list[int]], dict, Engine]:
    cfg = EngineConfig(kv_memory=args.kv_memory, attention=args.attention, kv_dtype=args.kv_dtype,
                       batch_tokens=args.batch_tokens, max_seqs=args.max_seqs)
    engine = Engine(loaded, cfg)
    params = SamplingParams(max_tokens=args.max_new, ignore_eos=True)
    reqs = [Request(str(i), p, params) for i, p in enumerate(prompts)]
    t = time.perf_counter()
    out = {int(r.id): r.token_ids for r in engine.generate(reqs)}
    elapsed = time.perf_counter() - t
    return elapsed, [out[i] for i in range(len(prompts))], engine.metrics.snapshot(), engine


def run_peer(prompts, args) -> tuple[float, list[list[int]]]:
    from transformers import AutoModelForCausalLM

    from kvx.models.resolve import default_gguf_path

    path = default_gguf_path()
    model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name,
                                                 dtype=getattr(torch, args.peer_dtype))
    model.eval()
    pad = 0
    outs, t = [], time.perf_counter()
    for s in range(0, len(prompts), args.peer_batch):
        batch = prompts[s : s + args.peer_batch]
        width = max(map(len, batch))
        ids = torch.tensor([[pad] * (width - len(p)) + p for p in batch])
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in batch])
        with torch.inference_mode():
            gen = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=args.max_new,
                                 min_new_tokens=args.max_new, do_sample=False, pad_token_id=pad)
        outs.extend(gen[:, width:].tolist())
    return time.perf_counter() - t, outs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=256, help="requests for kvx")
    ap.add_argument("--peer-n", type=int, default=48, help="requests for the peer (a subset of the same ones)")
    ap.add_argument("--peer-batch", type=int, default=16)
    ap.add_argument("--max-new", type=int, default=64)
    ap.add_argument("--prefix-tokens", type=int, default=500)
    ap.add_argument("--tail-tokens", type=int, default=150)
    ap.add_argument("--kv-memory", type=parse_bytes, default=parse_bytes("2GiB"))
    ap.add_argument("--kv-dtype", default="auto")
    ap.add_argument("--dtype", default="auto", help="kvx weights: auto, float32, bfloat16")
    ap.add_argument("--peer-dtype", default="float32", choices=("float32", "bfloat16"), help="the peer's dtype")
    ap.add_argument("--attention", default="auto")
    ap.add_argument("--batch-tokens", type=int, default=8192)
    ap.add_argument("--max-seqs", type=int, default=128)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch's default)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    loaded = load_model(None, dtype=args.dtype)
    prompts = build_prompts(loaded.tokenizer, args.n, args.prefix_tokens, args.tail_tokens)
    shared = common_prefix(prompts)
    mean_len = sum(map(len, prompts)) / len(prompts)
    print(f"kvx weights {str(loaded.dtype).removeprefix('torch.')}, activations "
          f"{str(loaded.activation_dtype).removeprefix('torch.')}; torch threads {torch.get_num_threads()}")
    print(f"{len(prompts)} requests: shared prefix {shared} tokens, mean prompt {mean_len:.0f} tokens, "
          f"{args.max_new} new tokens each (EOS ignored), greedy", flush=True)

    kvx_s, kvx_out, m, engine = run_kvx(loaded, prompts, args)
    kvx_rate = sum(map(len, kvx_out)) / kvx_s
    kvx_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    pool = engine.kv_cache.nbytes()
    print(f"kvx: {kvx_s:.1f} s, {kvx_rate:.1f} output tok/s", flush=True)
    del engine

    peer_n = max(1, min(args.peer_n, len(prompts)))
    peer_s, peer_out = run_peer(prompts[:peer_n], args)
    peer_rate = sum(map(len, peer_out)) / peer_s
    same = sum(a == b for a, b in zip(kvx_out, peer_out))
    ideal = (shared // 16 * 16) * (len(prompts) - 1) / m["prompt_tokens"]

    rows = [
        ("kvx output tok/s", f"{kvx_rate:.1f}  ({len(prompts)} requests, {kvx_s:.1f} s)"),
        ("transformers output tok/s", f"{peer_rate:.1f}  (batch {args.peer_batch}, {args.peer_dtype}, "
                                      f"{'first ' + str(peer_n) + ' requests only' if peer_n < len(prompts) else 'all requests'}, {peer_s:.1f} s)"),
        ("ratio kvx / transformers", f"{kvx_rate / peer_rate:.2f}x"),
        ("prefix cache hit rate", f"{m['cache_hit_rate']:.1%}  (the most this workload allows: {ideal:.1%})"),
        ("batch utilisation", f"{m['batch_utilisation']:.1%}  ({m['steps']} steps, budget {args.batch_tokens} tokens)"),
        ("peak KV pool pressure", f"{m['peak_kv_pool_pressure']:.1%}, {m['preemptions']} preemptions"),
        ("KV pool / --kv-memory", f"{pool / 2**30:.2f} GiB / {args.kv_memory / 2**30:.2f} GiB"),
        ("peak RSS after kvx", f"{kvx_rss / 2**30:.2f} GiB (weights + KV pool + python)"),
        ("greedy outputs identical", f"{same}/{peer_n} of the requests both ran"),
    ]
    width = max(len(k) for k, _ in rows)
    print()
    for k, v in rows:
        print(f"{k:<{width}}  {v}")


if __name__ == "__main__":
    main()
