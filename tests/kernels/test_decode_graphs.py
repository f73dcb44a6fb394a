"""Decode steps replayed from captured graphs give each request the tokens of a plain single-sequence
loop, whatever bucket (and padding) a step lands in. On CUDA the capture is a real CUDA graph; on a
CPU (Triton interpreted) a stand-in replays by re-running the captured forward on the same static
buffers, which checks the buffers, padding and row selection."""
import random
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))
from engine_fakes import reference_greedy  # noqa: E402
from kernel_models import tiny_llama  # noqa: E402
from kvx.engine import Engine, EngineConfig, Request, SamplingParams  # noqa: E402
from kvx.engine.cuda_graphs import DecodeGraphs, batch_buckets, cuda_graph_capture  # noqa: E402


def rerun_capture(fn):
    out = fn()
    return (lambda: out.copy_(fn())), out


def test_buckets_cover_every_batch_size():
    for top in (1, 5, 12, 128, 256, 300):
        buckets = batch_buckets(top)
        assert buckets[0] == 1 and buckets[-1] == top and buckets == sorted(set(buckets))
        assert all(b - a <= max(8, a // 3) for a, b in zip(buckets, buckets[1:]))


def test_graph_replays_equal_the_plain_loop(device):
    loaded = tiny_llama(device, torch.float32)
    cfg = EngineConfig(kv_memory=4 << 20, block_size=8, max_seqs=6, attention="triton", cuda_graphs=False,
                       speculative_tokens=0)
    engine = Engine(loaded, cfg)
    capture = cuda_graph_capture(engine.device) if device == "cuda" else rerun_capture
    graphs = DecodeGraphs(loaded.model, engine.kv_cache, engine.device, 6, engine.max_model_len, capture)
    engine.runner.graphs = graphs
    rng = random.Random(5)
    shared = [rng.randrange(1, 96) for _ in range(19)]
    reqs = [Request(f"g{i}", shared[: rng.randrange(0, 19)] + [rng.randrange(1, 96) for _ in range(rng.randrange(1, 9))],
                    SamplingParams(max_tokens=rng.randrange(3, 9))) for i in range(9)]
    got = {r.id: r.token_ids for r in engine.generate(reqs)}
    for req in reqs:
        want = reference_greedy(loaded, req.prompt_ids, req.sampling.max_tokens, stop={0})
        assert got[req.id] == (want[:-1] if want and want[-1] == 0 else want), req.id
    assert graphs.replayed > 0
    assert engine.blocks.leaks() == []
