"""KV store: the Triton scatter against the torch twin, and the twin against plain indexing."""
import pytest
import torch

from kvx.kernels.interface import KVCache
from kvx.kernels.torch_backend import quantize_int8, store_kv_ref
from kvx.kernels.triton_store_kv import store_kv


def poisoned_cache(dtype, device, num_blocks=6, block_size=4, heads=3, head_dim=24):
    cache = KVCache(2, num_blocks, block_size, heads, head_dim, dtype=dtype, device=device)
    if dtype == torch.int8:
        cache.data.copy_(torch.randint(-128, 128, cache.data.shape, dtype=torch.int8))
        cache.scale.fill_(float("nan"))
    else:
        cache.data.fill_(float("nan"))
    return cache


def new_rows(device, t=9, heads=3, head_dim=24, dtype=torch.float32):
    k = torch.randn(t, heads, head_dim).to(dtype).to(device)
    v = torch.randn(t, heads, head_dim).to(dtype).to(device)
    k[0, 1] = 0.0  # an all-zero head: the scale floor must keep it finite
    # partial blocks, out-of-order slots, and two rows that must not be stored
    slots = torch.tensor([5, 0, 1, -1, 22, 13, 2, -1, 23], dtype=torch.int64, device=device)
    return k, v, slots


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(), b.nan_to_num())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_store_kv_matches_twin(device, dtype):
    k, v, slots = new_rows(device, dtype=dtype)
    want, got = poisoned_cache(dtype, device), poisoned_cache(dtype, device)
    store_kv_ref(k, v, want.layer(1), slots)
    store_kv(k, v, got.layer(1), slots)
    assert same(got.data, want.data)  # every slot, touched or not, equals the twin's pool


def test_store_kv_int8_matches_twin(device):
    k, v, slots = new_rows(device)
    want, got = poisoned_cache(torch.int8, device), poisoned_cache(torch.int8, device)
    junk = got.data.clone()
    want.data.copy_(junk)
    store_kv_ref(k, v, want.layer(0), slots)
    store_kv(k, v, got.layer(0), slots)
    assert same(got.scale, want.scale)
    diff = (got.data.int() - want.data.int()).abs()
    # identical under the interpreter; a GPU's fp32 division may flip a rounding tie by one step
    assert diff.max() <= 1 and (diff > 0).float().mean() < 1e-3
    assert torch.equal(got.data[1], junk[1])  # the other layer is untouched


def test_twin_store_writes_exactly_the_mapped_slots():
    k, v, slots = new_rows("cpu")
    cache = poisoned_cache(torch.float32, "cpu")
    store_kv_ref(k, v, cache.layer(0), slots)
    flat_k = cache.data[0, 0].flatten(0, 1)  # [slots, heads, head_dim]
    flat_v = cache.data[0, 1].flatten(0, 1)
    keep = slots >= 0
    assert torch.equal(flat_k[slots[keep]], k[keep]) and torch.equal(flat_v[slots[keep]], v[keep])
    untouched = torch.ones(flat_k.shape[0], dtype=torch.bool)
    untouched[slots[keep]] = False
    assert flat_k[untouched].isnan().all() and cache.data[1].isnan().all()


def test_quantize_int8_round_trip():
    x = torch.randn(50, 4, 32) * torch.logspace(-3, 3, 50)[:, None, None]
    q, scale = quantize_int8(x)
    assert q.dtype == torch.int8 and scale.shape == (50, 4)
    assert q.abs().amax(-1).eq(127).all()  # the absmax element maps to +-127
    err = (q.float() * scale[..., None] - x).abs()
    assert (err <= scale[..., None] / 2 + 1e-6 * x.abs()).all()  # at most half a step per element
