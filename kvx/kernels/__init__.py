"""Attention kernels: Triton kernels for CUDA and their torch reference twins.

The model forward talks only to an `AttentionBackend` (see `interface.py`); `get_backend` picks one.
"""
from kvx.kernels.interface import AttentionBackend, AttentionMetadata, KVCache, LayerKV

__all__ = ["AttentionBackend", "AttentionMetadata", "KVCache", "LayerKV", "backend_name", "get_backend"]


def backend_name(name: str, device_type: str) -> str:
    """The backend `name` means on a device: "auto" is triton on CUDA, else the batched CPU backend."""
    if name == "auto":
        return "triton" if device_type == "cuda" else "cpu"
    return name


def get_backend(name: str = "auto") -> AttentionBackend:
    """`torch` (the reference) and `cpu` run anywhere; `triton` needs CUDA (or TRITON_INTERPRET=1);
    `auto` picks triton on CUDA, else cpu."""
    import torch

    name = backend_name(name, "cuda" if torch.cuda.is_available() else "cpu")
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
