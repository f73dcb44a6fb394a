"""Read a GGUF file: config from its metadata, dequantized float32 weights under our names, its tokenizer.

llama.cpp's converter permutes the q/k rows of llama-arch models (interleaved rope); we undo that
exactly like transformers does, so our forward and transformers' agree on the same file.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

from kvx.errors import ModelError
from kvx.models.base import ModelConfig
from kvx.models.weight_layout import SourceNames, fuse_weights

SUPPORTED_ARCHS = ("llama", "mistral", "qwen2", "qwen3")
GGUF_MAGIC = b"GGUF"


def open_gguf(path: Path):
    """A GGUFReader, or a one-line ModelError for a file that is not a whole GGUF."""
    from gguf import GGUFReader

    try:
        with open(path, "rb") as f:
            magic = f.read(4)
    except OSError as e:
        raise ModelError(f"{path}: cannot read the model file ({e.strerror or e})") from None
    if magic != GGUF_MAGIC:
        raise ModelError(f"{path}: not a GGUF file (it does not start with the GGUF magic bytes)")
    try:
        reader = GGUFReader(str(path))
    except Exception as e:  # gguf raises ValueError/IndexError/struct errors on short or garbled files
        raise ModelError(f"{path}: truncated or corrupt GGUF file ({type(e).__name__}: {_first_line(e)})") from None
    size = os.path.getsize(path)
    for t in reader.tensors:
        if t.data_offset + t.n_bytes > size:
            raise ModelError(f"{path}: truncated GGUF file (tensor {t.name} runs past the end of the file)")
    return reader


def _first_line(e: Exception) -> str:
    return (str(e).splitlines() or [""])[0][:160]


def field(reader, key: str, default: Any = None) -> Any:
    f = reader.fields.get(key)
    if f is None:
        return default
    value = f.contents()
    return value if value is not None else default


def gguf_arch(reader) -> tuple[str, str]:
    """(raw llama.cpp architecture, our arch name); mistral files say "llama" and name themselves mistral."""
    raw = str(field(reader, "general.architecture", ""))
    name = str(field(reader, "general.name", "") or "").lower()
    arch = "mistral" if raw == "llama" and "mistral" in name else raw
    return raw, arch


def read_config(reader, path: Path) -> ModelConfig:
    raw, arch = gguf_arch(reader)
    if arch not in SUPPORTED_ARCHS:
        raise ModelError(f"{path}: GGUF architecture {raw!r} is not supported (expected one of {', '.join(SUPPORTED_ARCHS)})")
    tensors = {t.name: t for t in reader.tensors}
    if "token_embd.weight" not in tensors:
        raise ModelError(f"{path}: GGUF file has no token_embd.weight tensor")

    def meta(key: str, default: Any = None) -> Any:
        return field(reader, f"{raw}.{key}", default)

    try:
        hidden = int(meta("embedding_length"))
        heads = int(meta("attention.head_count"))
        kv_heads = int(meta("attention.head_count_kv", heads))
        head_dim = int(meta("attention.key_length", meta("rope.dimension_count", hidden // heads)))
        layers = int(meta("block_count"))
        inter = int(meta("feed_forward_length"))
    except (TypeError, ValueError):
        raise ModelError(f"{path}: GGUF metadata lacks {raw}.embedding_length/head_count/block_count/feed_forward_length") from None
    eos = [int(field(reader, f"tokenizer.ggml.{k}")) for k in ("eos_token_id", "eot_token_id", "eom_token_id")
           if field(reader, f"tokenizer.ggml.{k}") is not None]
    bos = field(reader, "tokenizer.ggml.bos_token_id")
    rope_scaling = None
    if "rope_freqs.weight" in tensors:  # llama3 scaling, baked by llama.cpp into per-frequency factors
        factors = _dequantize(tensors["rope_freqs.weight"]).reshape(-1)
        rope_scaling = {"rope_type": "freq_factors", "factors": [float(x) for x in factors]}
    elif field(reader, f"{raw}.rope.scaling.type") == "linear":
        rope_scaling = {"rope_type": "linear", "factor": float(meta("rope.scaling.factor", 1.0))}
    return ModelConfig(
        arch=arch,
        vocab_size=int(tensors["token_embd.weight"].shape[-1]),
        hidden_size=hidden,
        intermediate_size=inter,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        rms_norm_eps=float(meta("attention.layer_norm_rms_epsilon", 1e-5)),
        rope_theta=float(meta("rope.freq_base", 10000.0)),
        rope_scaling=rope_scaling,
        max_position_embeddings=int(meta("context_length", 2048)),
        tie_word_embeddings="output.weight" not in tensors,
        attention_bias="blk.0.attn_q.bias" in tensors,
        qk_norm="blk.0.attn_q_norm.weight" in tensors,
        bos_token_id=int(bos) if bos is not None else None,
        eos_token_ids=sorted(set(eos)),
    )


def _dequantize(t) -> np.ndarray:
    from gguf.quants import dequantize

    return np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float32)


def _unpermute(w: np.ndarray, n_head: int) -> np.ndarray:
    # inverse of llama.cpp convert_hf_to_gguf.LlamaModel.permute (same as transformers' reverse permute)
    dim = w.shape[0] // n_head // 2
    return w.reshape(n_head, dim, 2, *w.shape[1:]).swapaxes(2, 1).reshape(w.shape)


GGUF_NAMES = SourceNames(
    embed="token_embd.weight",
    norm="output_norm.weight",
    lm_head="output.weight",
    layer="blk.{i}.",
    qkv="attn_{x}.weight",
    qkv_bias="attn_{x}.bias",
    gate="ffn_gate.weight",
    up="ffn_up.weight",
    per_layer={
        "attn_norm.weight": "attn_norm.weight",
        "attn_output.weight": "o_proj.weight",
        "ffn_norm.weight": "mlp_norm.weight",
        "ffn_down.weight": "down.weight",
        "attn_q_norm.weight": "q_norm.weight",
        "attn_k_norm.weight": "k_norm.weight",
    },
)


def read_weights(reader, config: ModelConfig, path: Path) -> dict[str, torch.Tensor]:
    """Dequantize every tensor to float32 and fuse q/k/v and gate/up into our layout."""
    raw, _ = gguf_arch(reader)
    src = {t.name: t for t in reader.tensors}

    def get(name: str) -> torch.Tensor:
        if name not in src:
            raise ModelError(f"{path}: GGUF file has no tensor {name}")
        try:
            w = _dequantize(src[name])
        except (NotImplementedError, ValueError) as e:
            raise ModelError(f"{path}: cannot dequantize {name} ({src[name].tensor_type.name}: {_first_line(e)})") from None
        if raw == "llama" and (".attn_q." in name or ".attn_k." in name):
            w = _unpermute(w, config.num_heads if ".attn_q." in name else config.num_kv_heads)
        # np.array copies into owned, writable memory (F32 tensors are read-only views of the mmap)
        return torch.from_numpy(np.array(w, dtype=np.float32, order="C"))

    return fuse_weights(GGUF_NAMES, config, get, lambda name: name in src)


def build_tokenizer_files(path: Path, out_dir: Path) -> None:
    """Write tokenizer.json (+ config, chat template) converted from the GGUF metadata by transformers."""
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    except Exception as e:
        raise ModelError(f"{path}: cannot build a tokenizer from the GGUF metadata ({type(e).__name__}: {_first_line(e)})") from None
    tok.save_pretrained(str(out_dir))
