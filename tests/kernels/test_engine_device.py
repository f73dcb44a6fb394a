"""The engine finds the device of the model's real weights (plain tensor attributes, not nn.Parameters)
and picks its attention backend from it: triton on CUDA, the CPU backend otherwise, unless told."""
from __future__ import annotations

import pytest
import torch

from kernel_models import tiny_llama as tiny_loaded
from kvx.kernels.torch_backend import TorchBackend
from kvx.engine import Engine, EngineConfig
from kvx.engine.engine import attach_backend, model_device, resolve_attention


def test_device_is_the_weights_device_not_parameters():
    loaded = tiny_loaded()
    assert list(loaded.model.parameters()) == []  # why next(model.parameters()) cannot be trusted
    assert model_device(loaded.model) == loaded.model.embed.device == torch.device("cpu")
    engine = Engine(loaded, EngineConfig(kv_memory=1 << 20, attention="torch"))
    assert engine.device == loaded.model.embed.device
    assert engine.kv_cache.data.device == loaded.model.embed.device
    assert engine.runner.device == loaded.model.embed.device


def test_auto_attention_follows_the_model_device():
    assert resolve_attention("auto", torch.device("cuda", 0)) == "triton"
    assert resolve_attention("auto", torch.device("cpu")) == "cpu"
    for name in ("torch", "triton", "cpu"):
        assert resolve_attention(name, torch.device("cpu")) == name
    loaded = tiny_loaded()
    attach_backend(loaded.model, "auto")
    assert loaded.model.backend.name == "cpu"
    attach_backend(loaded.model, "torch")
    assert isinstance(loaded.model.backend, TorchBackend)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_model_gets_cuda_pool_and_triton():
    loaded = tiny_loaded("cuda")
    engine = Engine(loaded, EngineConfig(kv_memory=1 << 20))
    assert engine.device.type == "cuda" and engine.kv_cache.data.is_cuda
    assert loaded.model.backend.name == "triton"


def test_speculation_on_the_triton_backend_keeps_greedy_output(device):
    """Drafts reach the Triton extend kernel as multi-token appends (interpreted on a CPU)."""
    from kvx.engine import Request, SamplingParams

    loaded = tiny_loaded(device)
    prompts = [[5, 9, 5, 9, 5, 9, 5], [3, 4, 3, 4, 3], [7, 7, 7, 2, 7, 7]]

    outputs = {}
    for k in (4, 0):
        config = EngineConfig(kv_memory=1 << 20, block_size=4, attention="triton", speculative_tokens=k)
        engine = Engine(loaded, config)
        reqs = [Request(str(i), p, SamplingParams(max_tokens=10, ignore_eos=True)) for i, p in enumerate(prompts)]
        outputs[k] = {r.id: r.token_ids for r in engine.generate(reqs)}
        assert engine.blocks.leaks() == []
        assert (engine.metrics.snapshot()["accepted_draft_tokens"] > 0) == (k > 0)
    assert outputs[4] == outputs[0]
