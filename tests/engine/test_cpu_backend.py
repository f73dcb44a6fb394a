"""kvx.kernels.cpu_backend (batched decode and extend with shared-prefix cascades) against paged_attention_ref."""
import pytest
import torch

from kvx.kernels import numba_paged
from kvx.kernels.interface import AttentionMetadata, KVCache
from kvx.kernels.cpu_backend import CpuBackend
from kvx.kernels.torch_backend import paged_attention_ref


@pytest.fixture(autouse=True, params=["numba", "torch"])
def decode_route(request, monkeypatch):
    """Every case runs both ways: decode rows' own blocks through the numba kernel and gathered."""
    if request.param == "torch":
        monkeypatch.setattr(numba_paged, "supports", lambda kv: False)
    return request.param


def _run_against_reference(dtype, shared, lens, qlens, seed, consecutive=True):
    """Fill a pool with random K/V for sequences whose first `shared` blocks are the same ids
    (consecutive ones, which the backend reads as a view, or not), then compare one step of the
    CPU backend with the per-sequence reference."""
    g = torch.Generator().manual_seed(seed)
    bs, hkv, hq, d = 4, 2, 6, 8
    cache = KVCache(1, 64, bs, hkv, d, dtype)
    free = iter(range(shared, 64))
    common = list(range(shared)) if consecutive else list(range(shared))[::-1]
    tables = [common + [next(free) for _ in range(-(-n // bs) - shared)] for n in lens]
    backend = CpuBackend()
    layer = cache.layer(0)
    for t, n in zip(tables, lens):  # fill every sequence's KV (the shared blocks get written repeatedly: same ids)
        slots = [t[p // bs] * bs + p % bs for p in range(n)]
        backend.store_kv(torch.randn(n, hkv, d, generator=g), torch.randn(n, hkv, d, generator=g), layer,
                         torch.tensor(slots))
    meta = AttentionMetadata.build(qlens, lens, tables, [-1] * sum(qlens))
    q = torch.randn(sum(qlens), hq, d, generator=g)
    ref = paged_attention_ref(q, layer, meta, 0.3)  # float32 queries over what the pool holds
    # a bfloat16 pool is attended in bfloat16 (queries and the softmax weights rounded to it)
    tol = dict(rtol=2e-2, atol=2e-2) if dtype == torch.bfloat16 else dict(rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(backend.attention(q, layer, meta, 0.3), ref, **tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int8])
@pytest.mark.parametrize("shared", [0, 3])
@pytest.mark.parametrize("consecutive", [True, False], ids=["run", "scattered"])
def test_decode_rows_with_a_prefill_chunk_match_reference(dtype, shared, consecutive):
    _run_against_reference(dtype, shared, [14, 30, 13, 21, 9], [1, 1, 5, 1, 1], shared, consecutive)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int8])
@pytest.mark.parametrize("shared", [0, 2, 3])
@pytest.mark.parametrize("consecutive", [True, False], ids=["run", "scattered"])
def test_extend_rows_cascade_matches_reference(dtype, shared, consecutive):
    # prefill chunks of several lengths over a common cached prefix (one starting exactly at the end
    # of the shared blocks, one covering part of them: then fewer blocks are shared), two decodes
    lens, qlens = [20, 13, 30, 15, 17, 19], [8, 1, 18, 3, 5, 1]
    _run_against_reference(dtype, shared, lens, qlens, 10 + shared, consecutive)


@pytest.mark.parametrize("lens,qlens", [([11], [11]), ([23], [6]), ([9, 9], [9, 2]), ([5], [1]), ([20, 30, 14], [18, 5, 1])])
def test_single_sequences_match_reference(lens, qlens):
    _run_against_reference(torch.float32, 0, lens, qlens, 1)
    _run_against_reference(torch.float32, 2, lens, qlens, 2)


def test_store_matches_reference_store():
    from kvx.kernels.torch_backend import store_kv_ref

    a, b = KVCache(1, 8, 4, 2, 8), KVCache(1, 8, 4, 2, 8)
    k, v = torch.randn(5, 2, 8), torch.randn(5, 2, 8)
    slots = torch.tensor([3, 7, 8, 30, 0])
    CpuBackend().store_kv(k, v, a.layer(0), slots)
    store_kv_ref(k, v, b.layer(0), slots)
    assert torch.equal(a.data, b.data)


def test_decode_and_short_extend_rows_take_the_numba_kernel(decode_route, monkeypatch):
    """With numba, one kernel call covers the decode rows and the short extends of a step; the long
    chunk goes to flash. Without it the kernel is never called."""
    calls = []
    real = numba_paged.paged_attention_rows
    monkeypatch.setattr(numba_paged, "paged_attention_rows", lambda q, kv, rows: calls.append(len(rows.seq)) or real(q, kv, rows))
    _run_against_reference(torch.float32, 2, [20, 13, 30, 15], [8, 1, 18, 1], 4)
    assert calls == ([8 + 1 + 1] if decode_route == "numba" else [])


def test_shared_blocks_are_a_slice_only_when_consecutive():
    from kvx.kernels.cpu_plan import shared_blocks

    row = torch.tensor([7, 8, 9, 4, 5], dtype=torch.int32)
    assert shared_blocks(row, 3) == slice(7, 10)
    assert shared_blocks(row, 0) is None
    assert torch.equal(shared_blocks(row, 4), torch.tensor([7, 8, 9, 4]))
    assert torch.equal(shared_blocks(torch.tensor([3, 5, 4]), 3), torch.tensor([3, 5, 4]))  # ends 2 apart, not a run
