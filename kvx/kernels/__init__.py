"""Attention kernels: Triton kernels for CUDA and their torch reference twins.

The model forward talks only to an `AttentionBackend` (see `interface.py`); `get_backend` picks one.
"""
from kvx.kernels.interface import AttentionBackend, AttentionMetadata, KVCache, LayerKV

__all__ = ["AttentionBackend", "AttentionMetadata", "KVCache", "LayerKV", "get_backend"]


def get_backend(name: str = "auto") -> AttentionBackend:
    """`torch` runs anywhere; `triton` needs CUDA (or TRITON_INTERPRET=1); `auto` picks triton on CUDA."""
    import torch

    if name == "auto":
        name = "triton" if torch.cuda.is_available() else "torch"
    if name == "torch":
        from kvx.kernels.torch_backend import TorchBackend

        return TorchBackend()
    if name == "cpu":
        from kvx.kernels.cpu_backend import CpuBackend

        return CpuBackend()
    if name == "triton":
        from kvx.kernels.triton_backend import TritonBackend

        return TritonBackend()
    raise ValueError(f"unknown attention backend {name!r} (expected auto, torch, cpu or triton)")
