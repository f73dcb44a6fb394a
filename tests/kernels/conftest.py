"""Kernel tests run the Triton kernels on the CPU interpreter unless a CUDA run asks otherwise.

TRITON_INTERPRET must be set before triton is first imported, hence at conftest import time;
`TRITON_INTERPRET=0 pytest tests/kernels` on a CUDA machine runs the same tests on the GPU.
"""
import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
import torch  # noqa: E402


def kernel_device() -> str:
    if torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1":
        return "cuda"
    return "cpu"


@pytest.fixture(scope="session")
def device() -> str:
    return kernel_device()
