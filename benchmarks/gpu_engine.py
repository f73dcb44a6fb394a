"""kvx engine vs transformers `generate` on a GPU, on a random-weight model of a real shape, in one run.

The model is built on the device with Llama-3.2-1B's config (random weights time the same as trained
ones once EOS is ignored); transformers and kvx run the very same bf16 weights. Workload: N requests =
one shared P-token prefix + a unique T-token tail each (random token ids), M new tokens each, greedy.
Figures: kvx output tokens/s; the same with the prefix cache off; transformers `generate` (bf16, the
batch sizes given, best one kept) on the same requests; and grammar-constrained decoding (the ticket
schema, with the default model's tokenizer carried as files) against the same run unconstrained, per
engine step, plus the batched mask launch alone. Every timed kvx run follows an untimed warm-up run
of the same shape (Triton compiles each kernel variant on first use).

    python benchmarks/gpu_engine.py --tokenizer DIR [--n 256] [--hf-batches 64,128,256] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from kvx.engine import Engine, EngineConfig, Request, SamplingParams  # noqa: E402
from kvx.kernels import AttentionMetadata, KVCache, get_backend  # noqa: E402
from kvx.models.base import LoadedModel, ModelConfig, ModelSource  # noqa: E402
from kvx.models.hf_loader import HF_NAMES  # noqa: E402
from kvx.models.llama import LlamaModel  # noqa: E402
from kvx.models.weight_layout import fuse_weights  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
# Llama-3.2-1B (config.json of meta-llama/Llama-3.2-1B-Instruct)
LLAMA_1B = dict(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                num_attention_heads=32, num_key_value_heads=8, head_dim=64, rms_norm_eps=1e-5,
                rope_theta=500000.0, max_position_embeddings=131072, tie_word_embeddings=True,
                rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                              "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
                bos_token_id=1, eos_token_id=2)


# --smoke: a few-MB model of the same family, to check this script on a CPU before a GPU run
SMOKE = dict(LLAMA_1B, vocab_size=49152, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
             num_attention_heads=4, num_key_value_heads=2, head_dim=16)
DEVICE = "cuda"


def sync() -> None:
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def build_models(c: dict, seed: int = 0):
    """(transformers model, kvx LoadedModel) over the same random bf16 weights on the device."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    with torch.device(DEVICE):
        hf = LlamaForCausalLM(LlamaConfig(**c))
    # .to(bfloat16) would also round the rotary inv_freq buffer to bf16 (3 significant digits), which
    # turns rope angles ~2 radians wrong by position 600: keep it float32, as from_pretrained does.
    inv_freq = hf.model.rotary_emb.inv_freq.clone()
    hf = hf.to(torch.bfloat16).eval()
    hf.model.rotary_emb.inv_freq = inv_freq
    mc = ModelConfig(arch="llama", vocab_size=c["vocab_size"], hidden_size=c["hidden_size"],
                     intermediate_size=c["intermediate_size"], num_layers=c["num_hidden_layers"],
                     num_heads=c["num_attention_heads"], num_kv_heads=c["num_key_value_heads"],
                     head_dim=c["head_dim"], rms_norm_eps=c["rms_norm_eps"], rope_theta=c["rope_theta"],
                     rope_scaling=dict(c["rope_scaling"]), max_position_embeddings=c["max_position_embeddings"],
                     tie_word_embeddings=True, bos_token_id=1, eos_token_ids=[2])
    return hf, kvx_model(hf, mc, torch.bfloat16)


def kvx_model(hf, mc: ModelConfig, dtype: torch.dtype) -> LoadedModel:
    """kvx's forward over a transformers model's weights (fused into kvx's layout)."""
    state = hf.state_dict()
    weights = fuse_weights(HF_NAMES, mc, lambda n: state[n], lambda n: n in state)
    model = LlamaModel(mc, weights, dtype, get_backend("triton" if DEVICE == "cuda" else "torch"))
    tok = SimpleNamespace(eos_token_ids=[2], decode=lambda ids: "")
    return LoadedModel(mc, model, tok, ModelSource("random Llama-3.2-1B shape", REPO, "hf"), dtype)


@torch.inference_mode()
def parity(hf, loaded, prompts: list[list[int]]) -> dict:
    """Last-position logits of kvx's forward against transformers' on the same weights and prompts:
    max |difference| over max |logit|, and how often the top-1 token agrees."""
    errs, same = [], 0
    c = loaded.config
    for p in prompts:
        n = len(p)
        ids = torch.tensor(p, device=DEVICE)
        want = hf(input_ids=ids[None]).logits[0, -1].float()
        kv = KVCache(c.num_layers, -(-n // 16), 16, c.num_kv_heads, c.head_dim, loaded.dtype, DEVICE)
        meta = AttentionMetadata.build([n], [n], [list(range(-(-n // 16)))], list(range(n)), DEVICE)
        got = loaded.model(ids, torch.arange(n, device=DEVICE), meta, kv, torch.tensor([n - 1], device=DEVICE))[0]
        errs.append(float((got - want).abs().max() / want.abs().max()))
        same += int(got.argmax() == want.argmax())
    return dict(max_rel_err=max(errs), top1_same=same, prompts=len(prompts))


def make_prompts(n: int, prefix: int, tail: int, id_range: int, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    shared = [rng.randrange(3, id_range) for _ in range(prefix)]
    return [shared + [rng.randrange(3, id_range) for _ in range(tail)] for _ in range(n)]


def run_kvx(loaded, prompts, args, constraint=None, **config) -> dict:
    """Warm-up run, then the timed one; tokens/s, steps and time per step."""
    cfg = EngineConfig(kv_memory=args.kv_memory << 30, max_seqs=args.max_seqs, batch_tokens=args.batch_tokens, **config)
    params = SamplingParams(max_tokens=args.max_new, ignore_eos=constraint is None)
    for timed in (False, True):
        t = time.perf_counter()
        engine = Engine(loaded, cfg)
        startup = time.perf_counter() - t
        reqs = [Request(str(i), p, params, constraint=constraint) for i, p in enumerate(prompts)]
        sync()
        t = time.perf_counter()
        out = {r.id: r for r in engine.generate(reqs)}
        sync()
        elapsed = time.perf_counter() - t
        m = engine.metrics.snapshot()
        graphs = engine.runner.graphs
        replayed = graphs.replayed if graphs is not None else 0
        del engine
    tokens = sum(len(r.token_ids) for r in out.values())
    errors = [r.error for r in out.values() if r.finish_reason == "error"]
    return dict(seconds=elapsed, tokens=tokens, tok_per_s=tokens / elapsed, steps=m["steps"],
                ms_per_step=1e3 * elapsed / max(1, m["steps"]),
                sample_ms_per_step=1e3 * m["sample_seconds"] / max(1, m["steps"]), hit_rate=m["cache_hit_rate"],
                forced=m.get("forced_tokens", 0), graph_steps=replayed, startup_s=startup, errors=len(errors), first_error=errors[0] if errors else None,
                outputs=[out[str(i)].token_ids for i in range(len(prompts))])


def run_hf(hf, prompts, max_new: int, batch: int) -> dict:
    outs, pad = [], 0
    sync()
    t = time.perf_counter()
    for s in range(0, len(prompts), batch):
        chunk = prompts[s:s + batch]
        width = max(map(len, chunk))
        ids = torch.tensor([[pad] * (width - len(p)) + p for p in chunk], device=DEVICE)
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in chunk], device=DEVICE)
        with torch.inference_mode():
            gen = hf.generate(input_ids=ids, attention_mask=mask, max_new_tokens=max_new, min_new_tokens=max_new,
                              do_sample=False, pad_token_id=pad)
        outs.extend(gen[:, width:].tolist())
    sync()
    elapsed = time.perf_counter() - t
    tokens = sum(map(len, outs))
    return dict(batch=batch, seconds=elapsed, tok_per_s=tokens / elapsed, outputs=outs)


def grammar_for(tokenizer_dir: str, vocab_size: int):
    """The ticket schema's grammar over the default model's tokenizer; (grammar, tokenizer, schema)."""
    from kvx.grammar import compile_schema
    from kvx.models.tokenizer import Tokenizer

    tok = Tokenizer.for_model(Tokenizer.hf_from_dir(Path(tokenizer_dir)), vocab_size, [], None)
    schema = json.loads((REPO / "schemas" / "ticket.json").read_text())
    return compile_schema(schema, tok, cache=False), tok, schema


def valid_records(outputs: list[list[int]], tok, schema) -> int:
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
    ok = 0
    for ids in outputs:
        try:
            ok += validator.is_valid(json.loads(tok.decode(ids)))
        except ValueError:
            pass
    return ok


def profile_steps(loaded, prompts, args) -> dict:
    """One more run with the device synchronised around each forward: where a step's time goes."""
    cfg = EngineConfig(kv_memory=args.kv_memory << 30, max_seqs=args.max_seqs, batch_tokens=args.batch_tokens)
    engine = Engine(loaded, cfg)
    spent = dict(schedule=0.0, prepare=0.0, forward=0.0)
    decode_fwd: list[float] = []
    schedule, prepare, model = engine.scheduler.schedule, engine.runner.prepare, engine.runner.model
    graphs = engine.runner.graphs

    def timed(name, fn):
        def wrapper(*a):
            t = time.perf_counter()
            out = fn(*a)
            if name == "forward":
                sync()
                if a[2].is_decode_only:
                    decode_fwd.append(time.perf_counter() - t)
            spent[name] += time.perf_counter() - t
            return out
        return wrapper

    engine.scheduler.schedule = timed("schedule", schedule)
    engine.runner.prepare = timed("prepare", prepare)
    engine.runner.model = timed("forward", model)
    if graphs is not None:  # decode steps replay a graph instead of calling the model
        graphs.run = timed("forward", graphs.run)
    params = SamplingParams(max_tokens=args.max_new, ignore_eos=True)
    sync()
    t = time.perf_counter()
    for _ in engine.generate(Request(str(i), p, params) for i, p in enumerate(prompts)):
        pass
    total = time.perf_counter() - t
    steps = engine.metrics.snapshot()["steps"]
    ms = {k: 1e3 * v / steps for k, v in spent.items()}
    ms["sample_accept_publish"] = 1e3 * total / steps - sum(ms.values())
    ms["decode_forward"] = 1e3 * sum(decode_fwd) / max(1, len(decode_fwd))
    return dict(steps=steps, decode_steps=len(decode_fwd), ms_per_step=ms)


def mask_launch_cost(vocab: int, grammar, rows: int) -> dict:
    """The batched mask alone: cached packed rows -> one copy -> one kernel, over `rows` rows."""
    from kvx.engine.masking import LogitMasker

    masker = LogitMasker(vocab)
    masks = [grammar.matcher().allowed_mask()] * rows
    logits = torch.randn(rows, vocab, device=DEVICE)
    for _ in range(3):
        masker(logits, masks)
    sync()
    t = time.perf_counter()
    for _ in range(50):
        masker(logits, masks)
        sync()
    return dict(rows=rows, us=1e6 * (time.perf_counter() - t) / 50)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--prefix", type=int, default=500)
    ap.add_argument("--tail", type=int, default=150)
    ap.add_argument("--max-new", type=int, default=64)
    ap.add_argument("--kv-memory", type=int, default=24, help="GiB for kvx's KV pool")
    ap.add_argument("--max-seqs", type=int, default=256)
    ap.add_argument("--batch-tokens", type=int, default=16384)
    ap.add_argument("--hf-batches", default="64,128,256")
    ap.add_argument("--tokenizer", help="folder with the default model's tokenizer files (for the grammar run)")
    ap.add_argument("--skip", default="", help="comma list of parts to skip: nographs,nocache,hf,grammar")
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--smoke", action="store_true", help="tiny model on the CPU: checks this script, times nothing")
    args = ap.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    global DEVICE
    DEVICE = "cpu" if args.smoke else "cuda"
    print(f"device {torch.cuda.get_device_name() if DEVICE == 'cuda' else 'cpu (smoke run)'}, torch {torch.__version__}",
          flush=True)

    t = time.perf_counter()
    hf, loaded = build_models(SMOKE if args.smoke else LLAMA_1B)
    print(f"random Llama-3.2-1B-shaped model built in {time.perf_counter() - t:.1f} s (bf16, same weights both sides)",
          flush=True)
    prompts = make_prompts(args.n, args.prefix, args.tail, 49152, seed=1)
    print(f"{args.n} requests: {args.prefix}-token shared prefix + {args.tail}-token tails, {args.max_new} new "
          f"tokens each (EOS ignored), greedy; kvx max_seqs {args.max_seqs}, batch_tokens {args.batch_tokens}",
          flush=True)
    figures: dict = {}

    kvx = run_kvx(loaded, prompts, args)
    figures["kvx"] = kvx
    print(f"kvx: {kvx['tok_per_s']:.0f} output tok/s ({kvx['seconds']:.2f} s, {kvx['steps']} steps of which "
          f"{kvx['graph_steps']} replayed CUDA graphs, {kvx['ms_per_step']:.2f} ms/step, hit rate {kvx['hit_rate']:.1%}; "
          f"engine start-up incl. graph capture {kvx['startup_s']:.1f} s)", flush=True)
    if "nographs" not in skip:
        eager = run_kvx(loaded, prompts, args, cuda_graphs=False)
        figures["kvx_no_cuda_graphs"] = eager
        print(f"kvx, CUDA graphs off: {eager['tok_per_s']:.0f} output tok/s ({eager['seconds']:.2f} s, "
              f"{eager['ms_per_step']:.2f} ms/step) -> graphs give {kvx['tok_per_s'] / eager['tok_per_s']:.2f}x", flush=True)
    prof = profile_steps(loaded, prompts, args)
    figures["kvx_profile"] = prof
    print(f"kvx step profile (device synchronised after each forward; {prof['steps']} steps, {prof['decode_steps']} "
          f"decode-only), ms per step: " + ", ".join(f"{k} {v:.2f}" for k, v in prof["ms_per_step"].items()), flush=True)
    if "nocache" not in skip:
        off = run_kvx(loaded, prompts, args, enable_prefix_cache=False)
        figures["kvx_no_prefix_cache"] = off
        print(f"kvx, prefix cache off: {off['tok_per_s']:.0f} output tok/s ({off['seconds']:.2f} s, {off['steps']} steps)"
              f" -> cache gives {kvx['tok_per_s'] / off['tok_per_s']:.2f}x", flush=True)
    if "hf" not in skip:
        run_hf(hf, prompts[:8], 4, 8)  # warm-up
        best = None
        for b in map(int, args.hf_batches.split(",")):
            r = run_hf(hf, prompts, args.max_new, b)
            same = sum(a == b2 for a, b2 in zip(kvx["outputs"], r["outputs"]))
            print(f"transformers generate, batch {b}: {r['tok_per_s']:.0f} output tok/s ({r['seconds']:.2f} s); "
                  f"greedy outputs identical to kvx: {same}/{len(prompts)}", flush=True)
            if best is None or r["tok_per_s"] > best["tok_per_s"]:
                best = r
        figures["hf_best"] = {k: v for k, v in best.items() if k != "outputs"}
        figures["parity_bf16"] = parity(hf, loaded, prompts[:4])
        hf32 = hf.float()  # in place: the bf16 runs are done
        figures["parity_fp32"] = parity(hf32, kvx_model(hf32, loaded.config, torch.float32), prompts[:4])
        for name in ("parity_bf16", "parity_fp32"):
            r = figures[name]
            print(f"{name.split('_')[1]} logits, kvx vs transformers on the same weights ({r['prompts']} prompts, last "
                  f"position): max |diff| / max |logit| {r['max_rel_err']:.2e}, top-1 token same {r['top1_same']}/"
                  f"{r['prompts']}", flush=True)
        print(f"ratio kvx / transformers (its best batch, {best['batch']}): "
              f"{kvx['tok_per_s'] / best['tok_per_s']:.2f}x (target >= 5x)", flush=True)
    if "grammar" not in skip and args.tokenizer:
        grammar, tok, schema = grammar_for(args.tokenizer, loaded.config.vocab_size)
        constrained = run_kvx(loaded, prompts, args, constraint=lambda: grammar.matcher(max_tokens=args.max_new))
        figures["kvx_grammar"] = constrained
        valid = valid_records(constrained["outputs"], tok, schema)
        print(f"kvx + ticket-schema grammar: {constrained['ms_per_step']:.2f} ms/step ({constrained['steps']} steps, "
              f"{constrained['tokens']} tokens of which {constrained['forced']} forced, {valid}/{len(prompts)} "
              f"records schema-valid, {constrained['errors']} errors"
              f"{'; ' + constrained['first_error'] if constrained['first_error'] else ''}) vs unconstrained "
              f"{kvx['ms_per_step']:.2f} ms/step -> {constrained['ms_per_step'] / kvx['ms_per_step']:.2f}x per step; "
              f"sampling phase (masks, argmax and its wait for the device, matcher advance, jump-forward) "
              f"{constrained['sample_ms_per_step']:.2f} vs {kvx['sample_ms_per_step']:.2f} ms/step",
              flush=True)
        for rows in (64, 256):
            cost = mask_launch_cost(loaded.config.vocab_size, grammar, rows)
            figures[f"mask_launch_{rows}"] = cost
            print(f"batched mask (device-resident rows: slot numbers -> one gather -> one launch), {rows} rows x {loaded.config.vocab_size}: "
                  f"{cost['us']:.0f} us", flush=True)
    if args.json:
        for v in figures.values():
            v.pop("outputs", None)
        Path(args.json).write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
