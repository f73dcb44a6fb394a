"""The contract between model loaders, the forward pass and the engine.

A loader returns a `LoadedModel`; the engine only uses `model.forward(...)`, `config` and `tokenizer`.

    logits = model(input_ids, positions, meta, kv_cache, logits_indices)

input_ids, positions: [T] int64 (the flattened varlen batch, see kvx.kernels.interface)
meta: kvx.kernels.AttentionMetadata; kv_cache: kvx.kernels.KVCache (written in place)
logits_indices: [S] int64 rows of T whose logits are wanted -> returns [S, vocab] float32
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: kvx.models.resolve (DEFAULT_MODEL) imports without torch
    import torch


@dataclass
class ModelConfig:
    arch: str  # "llama" | "mistral" | "qwen2" | "qwen3" (SmolLM2 is llama)
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    rope_scaling: dict[str, Any] | None = None  # e.g. {"rope_type": "llama3", "factor": 8.0, ...}
    max_position_embeddings: int = 2048
    tie_word_embeddings: bool = False
    attention_bias: bool = False  # qwen2: bias on q, k, v projections
    qk_norm: bool = False  # qwen3: RMSNorm on q and k per head
    bos_token_id: int | None = None
    eos_token_ids: list[int] = field(default_factory=list)


@dataclass
class ModelSource:
    """Where a model came from, for `kvx models` and cache keys."""

    spec: str  # what the user passed (e.g. "smollm2-135m")
    path: Path  # resolved file or folder
    kind: str  # "gguf" | "hf"


@dataclass
class LoadedModel:
    config: ModelConfig
    model: torch.nn.Module
    tokenizer: Any  # kvx.models.tokenizer.Tokenizer
    source: ModelSource
    dtype: torch.dtype  # the weights' (matmul) dtype
    load_seconds: float = 0.0

    @property
    def activation_dtype(self) -> torch.dtype:
        """The dtype of the residual stream, norms and rope (the KV cache defaults to the weights' dtype)."""
        return getattr(self.model, "act_dtype", self.dtype)
