"""The model's matrix products: `Projection(weight, bias)(x) = x @ weight.T + bias`.

Two routes. F.linear (MKL's sgemm on a CPU) in the weight's dtype, the result returned in x's
dtype: with bfloat16 weights on a CPU the matmul runs on the avx512_bf16 units while the residual
stream, norms, rope and attention stay float32. And for float32 host weights at least as wide as
deep (out >= in features: qkv, o_proj, gate_up, the vocabulary head), oneDNN over the weight
reordered once into its blocked layout: sgemm repacks the weight on every call, which dominates
at the few rows of a decode step. Measured on a 2-core AVX2 CPU, oneDNN / MKL time:
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


def _pack(weight: torch.Tensor) -> torch.Tensor | None:
    """oneDNN's layout of the weight, or None where that route does not apply."""
    out_features, in_features = weight.shape
    if (weight.device.type != "cpu" or weight.dtype != torch.float32 or out_features < in_features
            or not torch.backends.mkldnn.is_available()):
        return None
    try:
        return torch.ops.mkldnn._reorder_linear_weight(weight, None)
    except (AttributeError, RuntimeError):  # a torch build without the op
        return None


class Projection:
    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None):
        self.out_features = weight.shape[0]
        self.bias = bias
        self.packed = _pack(weight)
        self.weight = weight if self.packed is None else None

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.packed is not None:
            if x.shape[0] == 0:
                return x.new_zeros((0, self.out_features))
            y = torch.ops.mkldnn._linear_pointwise(x.float().contiguous(), self.packed, self.bias, "none", [], "")
            return y.to(x.dtype)
        if x.dtype == self.weight.dtype:
            return F.linear(x, self.weight, self.bias)
        return F.linear(x.to(self.weight.dtype), self.weight, self.bias).to(x.dtype)
