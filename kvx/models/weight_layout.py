"""Our fused weight layout, filled from any source's tensor names (GGUF or HF safetensors).

Both loaders differ only in names and in how one tensor is fetched; the fusing (q/k/v into qkv,
gate/up into gate_up) and the optional per-layer tensors live here once.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from kvx.models.base import ModelConfig


@dataclass(frozen=True)
class SourceNames:
    """A source's tensor names; `{i}` is the layer index, `{x}` one of q, k, v."""

    embed: str
    norm: str
    lm_head: str
    layer: str  # prefix of layer i's tensors, e.g. "blk.{i}."
    qkv: str
    qkv_bias: str
    gate: str
    up: str
    per_layer: dict[str, str]  # source name (after the prefix) -> our name; absent ones are skipped


def fuse_weights(
    names: SourceNames,
    config: ModelConfig,
    get: Callable[[str], torch.Tensor],
    has: Callable[[str], bool],
) -> dict[str, torch.Tensor]:
    out = {"embed.weight": get(names.embed), "norm.weight": get(names.norm)}
    if not config.tie_word_embeddings:
        out["lm_head.weight"] = get(names.lm_head)
    for i in range(config.num_layers):
        src, ours = names.layer.format(i=i), f"layers.{i}."
        out[ours + "qkv.weight"] = torch.cat([get(src + names.qkv.format(x=x)) for x in "qkv"])
        if config.attention_bias:
            out[ours + "qkv.bias"] = torch.cat([get(src + names.qkv_bias.format(x=x)) for x in "qkv"])
        out[ours + "gate_up.weight"] = torch.cat([get(src + names.gate), get(src + names.up)])
        for theirs, name in names.per_layer.items():
            if has(src + theirs):
                out[ours + name] = get(src + theirs)
    return out
