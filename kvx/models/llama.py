"""One decoder-only model for Llama 2/3, Mistral, Qwen2, Qwen3 and SmolLM2, run over the paged KV pool.

Weights use our own flat names (see `weight_shapes`); loaders fuse q/k/v into `qkv` and gate/up into
`gate_up` so a layer is four matmuls. The forward is the engine's hot path: no per-token Python,
rope from a table indexed by position, logits only for the rows that get sampled.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from kvx.kernels import AttentionBackend, AttentionMetadata, KVCache, get_backend
from kvx.kernels import numba_rows
from kvx.errors import ModelError
from kvx.models.base import ModelConfig
from kvx.models.projection import Projection
from kvx.models.rope import RopeTable, apply_rope, inverse_frequencies


def weight_shapes(c: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor the model needs, by our name, with its shape."""
    q, kv = c.num_heads * c.head_dim, c.num_kv_heads * c.head_dim
    shapes: dict[str, tuple[int, ...]] = {"embed.weight": (c.vocab_size, c.hidden_size), "norm.weight": (c.hidden_size,)}
    if not c.tie_word_embeddings:
        shapes["lm_head.weight"] = (c.vocab_size, c.hidden_size)
    for i in range(c.num_layers):
        p = f"layers.{i}."
        shapes[p + "attn_norm.weight"] = (c.hidden_size,)
        shapes[p + "qkv.weight"] = (q + 2 * kv, c.hidden_size)
        if c.attention_bias:
            shapes[p + "qkv.bias"] = (q + 2 * kv,)
        if c.qk_norm:
            shapes[p + "q_norm.weight"] = (c.head_dim,)
            shapes[p + "k_norm.weight"] = (c.head_dim,)
        shapes[p + "o_proj.weight"] = (c.hidden_size, q)
        shapes[p + "mlp_norm.weight"] = (c.hidden_size,)
        shapes[p + "gate_up.weight"] = (2 * c.intermediate_size, c.hidden_size)
        shapes[p + "down.weight"] = (c.hidden_size, c.intermediate_size)
    return shapes


def check_weights(c: ModelConfig, weights: dict[str, torch.Tensor], where: str) -> None:
    """A missing or misshapen tensor is a corrupt model, reported in one line."""
    for name, shape in weight_shapes(c).items():
        t = weights.get(name)
        if t is None:
            raise ModelError(f"{where}: tensor {name} is missing")
        if tuple(t.shape) != shape:
            raise ModelError(f"{where}: tensor {name} has shape {tuple(t.shape)}, expected {shape}")


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    if weight.dtype == torch.float32 and numba_rows.usable(x):  # one pass instead of five ops on a CPU
        return numba_rows.rms_norm(x, weight, eps)
    # In float32 like transformers' RMSNorm, then back to the activation dtype before the weight.
    return weight * F.rms_norm(x.float(), (x.shape[-1],), eps=eps).to(x.dtype)


class DecoderLayer(nn.Module):
    def __init__(self, c: ModelConfig, w: dict[str, torch.Tensor], prefix: str):
        super().__init__()
        self.attn_norm = w[prefix + "attn_norm.weight"]
        self.qkv = Projection(w[prefix + "qkv.weight"], w.get(prefix + "qkv.bias"))
        self.q_norm = w.get(prefix + "q_norm.weight")
        self.k_norm = w.get(prefix + "k_norm.weight")
        self.o_proj = Projection(w[prefix + "o_proj.weight"])
        self.mlp_norm = w[prefix + "mlp_norm.weight"]
        self.gate_up = Projection(w[prefix + "gate_up.weight"])
        self.down = Projection(w[prefix + "down.weight"])
        self.eps = c.rms_norm_eps
        self.heads, self.kv_heads, self.head_dim = c.num_heads, c.num_kv_heads, c.head_dim
        self.split = [c.num_heads * c.head_dim, c.num_kv_heads * c.head_dim, c.num_kv_heads * c.head_dim]
        self.scale = c.head_dim**-0.5

    def forward(self, x, cos, sin, backend: AttentionBackend, layer_kv, meta: AttentionMetadata):
        t = x.shape[0]
        # Projections return their weight's dtype: q and k go back to the activation dtype for rope,
        # v goes to the pool as it is (the store casts it to the pool's dtype); o_proj's and down's
        # outputs are promoted in the residual add, and the MLP's wide intermediate stays as it is.
        q, k, v = self.qkv(rms_norm(x, self.attn_norm, self.eps)).split(self.split, dim=-1)
        q = q.to(x.dtype).view(t, self.heads, self.head_dim)
        k = k.to(x.dtype).view(t, self.kv_heads, self.head_dim)
        v = v.view(t, self.kv_heads, self.head_dim)
        if self.q_norm is not None:
            q, k = rms_norm(q, self.q_norm, self.eps), rms_norm(k, self.k_norm, self.eps)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        backend.store_kv(k, v, layer_kv, meta.slot_mapping)
        o = backend.attention(q, layer_kv, meta, self.scale)
        x = x + self.o_proj(o.reshape(t, -1))
        gate, up = self.gate_up(rms_norm(x, self.mlp_norm, self.eps)).chunk(2, dim=-1)
        return x + self.down(F.silu(gate, inplace=True).mul_(up))  # in place: the MLP's largest buffers


class LlamaModel(nn.Module):
    """`model(input_ids[T], positions[T], meta, kv_cache, logits_indices[S]) -> [S, vocab] float32`."""

    def __init__(self, config: ModelConfig, weights: dict[str, torch.Tensor], dtype: torch.dtype,
                 backend: AttentionBackend | None = None):
        super().__init__()
        check_weights(config, weights, "model")
        # Matrices in `dtype`; vectors (norms, biases) in the activation dtype. On a CPU activations
        # stay float32: bfloat16 elementwise ops and attention are slower there, its matmuls faster.
        self.device = device = weights["embed.weight"].device  # the engine puts its KV pool here
        self.act_dtype = torch.float32 if device.type == "cpu" and dtype != torch.float64 else dtype
        w = {name: t.to(dtype if t.dim() == 2 else self.act_dtype)
             for name, t in weights.items() if name in weight_shapes(config)}
        self.config, self.dtype = config, dtype
        self.backend = backend or get_backend("torch")
        self.embed = w["embed.weight"]
        self.norm = w["norm.weight"]
        self.lm_head = Projection(self.embed if config.tie_word_embeddings else w["lm_head.weight"])
        self.layers = nn.ModuleList(DecoderLayer(config, w, f"layers.{i}.") for i in range(config.num_layers))
        inv_freq = inverse_frequencies(config.head_dim, config.rope_theta, config.rope_scaling)
        self.rope = RopeTable(inv_freq, self.act_dtype, initial=min(config.max_position_embeddings, 8192), device=device)

    @torch.inference_mode()
    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, meta: AttentionMetadata,
                kv_cache: KVCache, logits_indices: torch.Tensor) -> torch.Tensor:
        cos, sin = self.rope.lookup(positions, meta.max_seq_len)
        x = F.embedding(input_ids, self.embed).to(self.act_dtype)
        for i, layer in enumerate(self.layers):
            x = layer(x, cos, sin, self.backend, kv_cache.layer(i), meta)
        x = rms_norm(x[logits_indices], self.norm, self.config.rms_norm_eps)
        return self.lm_head(x).float()
