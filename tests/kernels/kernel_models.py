"""A tiny random LlamaModel (the real forward) on a chosen device and dtype, for device tests."""
from __future__ import annotations

from types import SimpleNamespace

import torch

from kvx.models.base import LoadedModel, ModelConfig, ModelSource
from kvx.models.llama import LlamaModel, weight_shapes

CFG = ModelConfig(arch="llama", vocab_size=96, hidden_size=64, intermediate_size=128, num_layers=2,
                  num_heads=4, num_kv_heads=2, head_dim=16, max_position_embeddings=512, eos_token_ids=[0])


def tiny_llama(device: str = "cpu", dtype: torch.dtype = torch.float32) -> LoadedModel:
    g = torch.Generator().manual_seed(0)
    weights = {n: torch.randn(s, generator=g) * (1.0 if len(s) == 1 else 0.3) for n, s in weight_shapes(CFG).items()}
    model = LlamaModel(CFG, {n: t.to(device) for n, t in weights.items()}, dtype)
    tok = SimpleNamespace(eos_token_ids=[0], decode=lambda ids: " ".join(map(str, ids)))
    return LoadedModel(CFG, model, tok, ModelSource("tiny", None, "hf"), dtype)
