"""kernels.cpu_backend (batched decode with a shared-prefix cascade) against paged_attention_ref."""
import pytest
import torch

from kernels.interface import AttentionMetadata, KVCache
from kernels.cpu_backend import CpuBackend
from kernels.torch_backend import paged_attention_ref


@pytest.mark.parametrize("dtype", [torch.float32, torch.int8])
@pytest.mark.parametrize("shared", [0, 3])
def test_matches_reference(dtype, shared):
    g = torch.Generator().manual_seed(shared)
    bs, hkv, hq, d = 4, 2, 6, 8
    cache = KVCache(1, 64, bs, hkv, d, dtype)
    lens, qlens = [14, 30, 13, 21, 9], [1, 1, 5, 1, 1]  # a prefill chunk among decodes
    free = iter(range(shared, 64))
    tables = [list(range(shared)) + [next(free) for _ in range(-(-n // bs) - shared)] for n in lens]
    backend = CpuBackend()
    layer = cache.layer(0)
    for t, n in zip(tables, lens):  # fill every sequence's KV (the shared blocks get written repeatedly: same ids)
        slots = [t[p // bs] * bs + p % bs for p in range(n)]
        backend.store_kv(torch.randn(n, hkv, d, generator=g), torch.randn(n, hkv, d, generator=g), layer,
                         torch.tensor(slots))
    meta = AttentionMetadata.build(qlens, lens, tables, [-1] * sum(qlens))
    q = torch.randn(sum(qlens), hq, d, generator=g)
    ref = paged_attention_ref(q, layer, meta, 0.3)
    torch.testing.assert_close(backend.attention(q, layer, meta, 0.3), ref, rtol=1e-4, atol=1e-5)


def test_store_matches_reference_store():
    from kernels.torch_backend import store_kv_ref

    a, b = KVCache(1, 8, 4, 2, 8), KVCache(1, 8, 4, 2, 8)
    k, v = torch.randn(5, 2, 8), torch.randn(5, 2, 8)
    slots = torch.tensor([3, 7, 8, 30, 0])
    CpuBackend().store_kv(k, v, a.layer(0), slots)
    store_kv_ref(k, v, b.layer(0), slots)
    assert torch.equal(a.data, b.data)
