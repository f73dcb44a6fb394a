"""Triton attention backend: the engine's choice on CUDA (also runs under TRITON_INTERPRET=1)."""
from __future__ import annotations

from kvx.kernels.interface import AttentionBackend, AttentionMetadata, LayerKV
from kvx.kernels.triton_decode_attention import decode_attention
from kvx.kernels.triton_extend_attention import extend_attention
from kvx.kernels.triton_store_kv import store_kv


class TritonBackend(AttentionBackend):
    name = "triton"

    def store_kv(self, k, v, kv: LayerKV, slot_mapping):
        store_kv(k, v, kv, slot_mapping)

    def attention(self, q, kv: LayerKV, meta: AttentionMetadata, scale: float):
        # decode batches take the split-K GQA kernel; anything with a multi-token query the extend one
        if meta.is_decode_only:
            return decode_attention(q, kv, meta, scale)
        return extend_attention(q, kv, meta, scale)
