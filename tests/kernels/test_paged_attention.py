"""Paged attention: the torch twin against dense attention, then the Triton kernels against the twin."""
import pytest
import torch
from paged_cases import dense_attention, make_case, rel_err

from kvx.kernels.torch_backend import paged_attention_ref
from kvx.kernels.triton_decode_attention import decode_attention
from kvx.kernels.triton_extend_attention import extend_attention

# (q_heads, kv_heads): GQA ratios 1, 3 and 4
HEADS = [(2, 2), (6, 2), (4, 1)]
# decode: context lengths with partial last blocks; one sequence has no query this step
DECODE_SEQS = [(0, 1), (6, 1), (32, 1), (69, 1), (5, 0)]
# extend: fresh prefill, prefix + chunk, a lone token, a chunk crossing several blocks, an idle sequence
EXTEND_SEQS = [(0, 5), (9, 17), (20, 1), (3, 30), (4, 0)]


def poisoned(q: torch.Tensor) -> torch.Tensor:
    return torch.full_like(q, float("nan"))


def active_rows(case) -> torch.Tensor:
    return torch.arange(case.q.shape[0])  # every row of q belongs to a sequence with a query


@pytest.mark.parametrize("seqs", [DECODE_SEQS, EXTEND_SEQS], ids=["decode", "extend"])
@pytest.mark.parametrize("heads", HEADS, ids=lambda h: f"gqa{h[0] // h[1]}")
@pytest.mark.parametrize("block_size", [4, 5])
def test_twin_matches_dense_attention(seqs, heads, block_size):
    case = make_case(seqs, *heads, head_dim=16, block_size=block_size, seed=block_size)
    assert rel_err(paged_attention_ref(case.q, case.kv, case.meta, case.scale), dense_attention(case)) < 1e-5


def test_twin_int8_matches_dense_over_dequantised_kv():
    case = make_case(EXTEND_SEQS, 6, 2, head_dim=16, block_size=4, kv_dtype=torch.int8, seed=3)
    assert rel_err(paged_attention_ref(case.q, case.kv, case.meta, case.scale), dense_attention(case)) < 1e-5


@pytest.mark.parametrize("heads", HEADS, ids=lambda h: f"gqa{h[0] // h[1]}")
@pytest.mark.parametrize("block_size,head_dim,splits", [(4, 16, 1), (16, 32, 3), (5, 24, None)])
def test_decode_kernel_matches_twin(device, heads, block_size, head_dim, splits):
    case = make_case(DECODE_SEQS, *heads, head_dim, block_size, device=device, seed=head_dim + block_size)
    got = decode_attention(case.q, case.kv, case.meta, case.scale, out=poisoned(case.q), num_splits=splits)
    assert rel_err(got, paged_attention_ref(case.q, case.kv, case.meta, case.scale)) <= 1e-3


@pytest.mark.parametrize("heads", HEADS, ids=lambda h: f"gqa{h[0] // h[1]}")
@pytest.mark.parametrize("block_size,head_dim", [(4, 16), (16, 32), (5, 24)])
def test_extend_kernel_matches_twin(device, heads, block_size, head_dim):
    case = make_case(EXTEND_SEQS, *heads, head_dim, block_size, device=device, seed=head_dim * block_size)
    got = extend_attention(case.q, case.kv, case.meta, case.scale, out=poisoned(case.q))
    assert rel_err(got, paged_attention_ref(case.q, case.kv, case.meta, case.scale)) <= 1e-3


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("kind", ["decode", "extend"])
def test_half_precision_kernels_match_twin(device, dtype, kind):
    seqs = DECODE_SEQS if kind == "decode" else EXTEND_SEQS
    case = make_case(seqs, 6, 2, head_dim=32, block_size=8, dtype=dtype, device=device, seed=11)
    kernel = decode_attention if kind == "decode" else extend_attention
    got = kernel(case.q, case.kv, case.meta, case.scale, out=poisoned(case.q))
    assert got.dtype == dtype
    # both sides round K/V/q to the same half values; the kernel accumulates in fp32, the
    # reference is dense float64 over those values, so only the kernel's rounding of P and O shows
    assert rel_err(got, dense_attention(case)) <= 2e-2


@pytest.mark.parametrize("kind", ["decode", "extend"])
@pytest.mark.parametrize("heads", [(2, 2), (8, 2)], ids=["gqa1", "gqa4"])
def test_int8_kernels_match_twin_and_float(device, kind, heads):
    seqs = DECODE_SEQS if kind == "decode" else EXTEND_SEQS
    kernel = decode_attention if kind == "decode" else extend_attention
    kw = dict(head_dim=32, block_size=8, device=device, seed=7)
    quant = make_case(seqs, *heads, kv_dtype=torch.int8, **kw)
    exact = make_case(seqs, *heads, **kw)  # same seed: the same q and the unquantised K/V
    assert torch.equal(quant.q, exact.q)
    got = kernel(quant.q, quant.kv, quant.meta, quant.scale, out=poisoned(quant.q))
    assert rel_err(got, paged_attention_ref(quant.q, quant.kv, quant.meta, quant.scale)) <= 1e-3
    assert rel_err(got, paged_attention_ref(exact.q, exact.kv, exact.meta, exact.scale)) <= 2e-2
