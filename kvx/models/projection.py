"""The model's matrix products: `Projection(weight, bias)(x) = x @ weight.T + bias`, in the weight's dtype.

The input is cast to the weight's dtype and the result stays in it: with bfloat16 weights on a CPU
the residual stream, norms, rope and attention stay float32 while the MLP's wide intermediate
(gate_up's output, down's input) never leaves bfloat16, so a layer casts ~2,700 values per token
instead of ~8,400 (measured: the casts were a quarter of a bf16 engine step on an AMX CPU).

Two routes. F.linear (MKL's sgemm or oneDNN's bf16 matmul), and oneDNN over a weight reordered
once into its blocked layout: plain calls repack the weight every time, which dominates at the few
rows of a decode step. Packed are every bfloat16 host matrix where oneDNN has a bf16 path, AVX-512
or AVX-NE-CONVERT, an AVX2-only CPU keeping F.linear (oneDNN / F.linear time on a 2-core
AMX CPU: 0.5-0.6 at 16 rows, 0.6-0.8 at 128, about 1.0 from 1,024 rows up), and float32 host
matrices at least as wide as deep (qkv, o_proj, gate_up, the vocabulary head). Float32, measured on
a 2-core AVX2 CPU, oneDNN / MKL time:
  rows           16    60    128   512   8192
  [960, 576]    0.63  0.99  1.02  1.08  0.97     (qkv)
  [576, 576]    0.66  0.97  1.03  1.05  0.94     (o_proj)
  [3072, 576]   0.76  0.81  0.93  0.98  0.99     (gate_up)
  [576, 1536]   0.67  0.88  1.15  1.14  1.10     (down: deeper than wide, stays on MKL)
  [49152, 576]  0.73  0.68  0.72  0.83   -       (vocabulary head)
A packed projection keeps only the packed copy (the tied embedding keeps its own for lookups).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F


def _packs(weight: torch.Tensor) -> bool:
    if weight.device.type != "cpu" or not torch.backends.mkldnn.is_available():
        return False
    out_features, in_features = weight.shape
    return weight.dtype == torch.bfloat16 or (weight.dtype == torch.float32 and out_features >= in_features)


def _pack(weight: torch.Tensor) -> torch.Tensor | None:
    """oneDNN's layout of the weight, or None where that route does not apply."""
    if not _packs(weight):
        return None
    try:
        return torch.ops.mkldnn._reorder_linear_weight(weight, None)
    except (AttributeError, RuntimeError):  # a torch build without the op (or without bf16 support)
        return None


class Projection:
    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None):
        self.out_features = weight.shape[0]
        self.dtype = weight.dtype
        self.bias = None if bias is None else bias.to(weight.dtype)
        self.packed = _pack(weight)
        self.weight = weight if self.packed is None else None

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        x = x.to(self.dtype)
        if self.packed is None:
            return F.linear(x, self.weight, self.bias)
        if x.shape[0] == 0:
            return x.new_zeros((0, self.out_features))
        return torch.ops.mkldnn._linear_pointwise(x.contiguous(), self.packed, self.bias, "none", [], "")
