"""Load a local Hugging Face folder (config.json + *.safetensors + tokenizer files) into our layout."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from kvx.errors import ModelError
from kvx.models.base import ModelConfig
from kvx.models.weight_layout import SourceNames, fuse_weights
from kvx.models.gguf_loader import SUPPORTED_ARCHS


def read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except OSError as e:
        raise ModelError(f"{path}: cannot read ({e.strerror or e})") from None
    except ValueError as e:
        raise ModelError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(data, dict):
        raise ModelError(f"{path}: expected a JSON object")
    return data


def _ids(value: Any) -> list[int]:
    if value is None:
        return []
    return [int(v) for v in value] if isinstance(value, list) else [int(value)]


def _rope(cfg: dict[str, Any]) -> tuple[float, dict[str, Any] | None]:
    # transformers >= 5 writes rope_parameters (with rope_theta inside); older configs rope_theta + rope_scaling
    params = dict(cfg.get("rope_parameters") or cfg.get("rope_scaling") or {})
    theta = float(params.pop("rope_theta", cfg.get("rope_theta", 10000.0)))
    rope_type = params.get("rope_type", params.get("type", "default"))
    if rope_type == "default":
        return theta, None
    params["rope_type"] = rope_type
    return theta, params


def read_config(folder: Path) -> ModelConfig:
    cfg = read_json(folder / "config.json")
    arch = cfg.get("model_type")
    if arch not in SUPPORTED_ARCHS:
        raise ModelError(f"{folder / 'config.json'}: model_type {arch!r} is not supported (expected one of {', '.join(SUPPORTED_ARCHS)})")
    theta, scaling = _rope(cfg)
    gen = folder / "generation_config.json"
    eos = _ids(cfg.get("eos_token_id")) + (_ids(read_json(gen).get("eos_token_id")) if gen.exists() else [])
    try:
        heads = int(cfg["num_attention_heads"])
        return ModelConfig(
            arch=arch,
            vocab_size=int(cfg["vocab_size"]),
            hidden_size=int(cfg["hidden_size"]),
            intermediate_size=int(cfg["intermediate_size"]),
            num_layers=int(cfg["num_hidden_layers"]),
            num_heads=heads,
            num_kv_heads=int(cfg.get("num_key_value_heads") or heads),
            head_dim=int(cfg.get("head_dim") or cfg["hidden_size"] // heads),
            rms_norm_eps=float(cfg.get("rms_norm_eps", 1e-6)),
            rope_theta=theta,
            rope_scaling=scaling,
            max_position_embeddings=int(cfg.get("max_position_embeddings", 2048)),
            tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            attention_bias=arch == "qwen2" or bool(cfg.get("attention_bias", False)),
            qk_norm=arch == "qwen3",
            bos_token_id=cfg.get("bos_token_id"),
            eos_token_ids=sorted(set(eos)),
        )
    except KeyError as e:
        raise ModelError(f"{folder / 'config.json'}: missing field {e.args[0]!r}") from None


def _load_safetensors(folder: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise ModelError(f"{folder}: no *.safetensors weights in this folder (expected an HF model folder)")
    tensors: dict[str, torch.Tensor] = {}
    for f in files:
        try:
            tensors.update(load_file(str(f)))
        except Exception as e:
            raise ModelError(f"{f}: unreadable safetensors file ({type(e).__name__})") from None
    return tensors


HF_NAMES = SourceNames(
    embed="model.embed_tokens.weight",
    norm="model.norm.weight",
    lm_head="lm_head.weight",
    layer="model.layers.{i}.",
    qkv="self_attn.{x}_proj.weight",
    qkv_bias="self_attn.{x}_proj.bias",
    gate="mlp.gate_proj.weight",
    up="mlp.up_proj.weight",
    per_layer={
        "input_layernorm.weight": "attn_norm.weight",
        "post_attention_layernorm.weight": "mlp_norm.weight",
        "self_attn.o_proj.weight": "o_proj.weight",
        "self_attn.q_norm.weight": "q_norm.weight",
        "self_attn.k_norm.weight": "k_norm.weight",
        "mlp.down_proj.weight": "down.weight",
    },
)


def read_weights(folder: Path, config: ModelConfig) -> dict[str, torch.Tensor]:
    src = _load_safetensors(folder)

    def get(name: str) -> torch.Tensor:
        if name not in src:
            raise ModelError(f"{folder}: safetensors weights have no tensor {name}")
        return src[name].float()

    return fuse_weights(HF_NAMES, config, get, lambda name: name in src)


def load_hf_tokenizer(folder: Path) -> Any:
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(str(folder))
    except Exception as e:
        raise ModelError(f"{folder}: cannot load the tokenizer files ({type(e).__name__})") from None
    if not getattr(tok, "is_fast", False):
        raise ModelError(f"{folder}: tokenizer is not a fast tokenizer (expected tokenizer.json)")
    return tok
