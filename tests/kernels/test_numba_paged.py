"""The numba paged kernel against dense float64 attention, on pools whose unowned slots are
poisoned (NaN for float32 and bfloat16, random int8 with NaN scales), so reading past a row's keys
shows. The dense truth holds what the pool holds (bfloat16-rounded or dequantised K/V), so every
pool format is held to float32 accuracy."""
import pytest
import torch
from paged_cases import dense_attention, make_case, rel_err

from kvx.kernels import numba_paged
from kvx.kernels.numba_paged import PagedRows

# (cached prefix, new tokens): decode rows with partial and full last blocks and a lone key,
# then extend rows (a fresh prompt, appends after a prefix, one crossing several blocks)
DECODE = [(0, 1), (6, 1), (31, 1), (32, 1), (69, 1)]
EXTEND = [(0, 5), (9, 7), (20, 1), (3, 16)]


def test_numba_is_installed():  # a dependency: without it CPU attention falls back to the torch route
    assert numba_paged.available()


def causal_rows(case) -> PagedRows:
    """Every query row of the case over its sequence's whole table, seeing keys up to its position."""
    seq, keys = [], []
    for i, (start, end) in enumerate(zip(case.meta.query_start_loc[:-1].tolist(), case.meta.query_start_loc[1:].tolist())):
        n, total = end - start, case.meta.seq_lens_cpu[i]
        seq += [i] * n
        keys += range(total - n + 1, total + 1)
    return PagedRows(case.meta.block_tables.long(), torch.tensor(seq), torch.tensor(keys))


def run_kernel(case):
    t, hq, d = case.q.shape
    hkv = case.kv.k.shape[2]
    q = case.q.float().view(t, hkv, hq // hkv, d) * case.scale
    o, lse = numba_paged.paged_attention_rows(q, case.kv, causal_rows(case))
    return o.view(t, hq, d), lse


@pytest.mark.parametrize("seqs", [DECODE, EXTEND], ids=["decode", "extend"])
@pytest.mark.parametrize("heads", [(2, 2), (6, 2), (4, 1)], ids=["gqa1", "gqa3", "gqa4"])
@pytest.mark.parametrize("block_size,head_dim", [(4, 16), (16, 64), (5, 24)])
@pytest.mark.parametrize("kv_dtype", [torch.float32, torch.bfloat16, torch.int8], ids=["f32", "bf16", "int8"])
def test_kernel_matches_dense_attention(seqs, heads, block_size, head_dim, kv_dtype):
    case = make_case(seqs, *heads, head_dim, block_size, kv_dtype=kv_dtype, seed=block_size + head_dim)
    got, _ = run_kernel(case)
    assert rel_err(got, dense_attention(case)) < 1e-5


def test_log_sum_exp_is_that_of_the_scores():
    case = make_case(DECODE, 6, 2, head_dim=16, block_size=4, seed=5)
    _, lse = run_kernel(case)
    for i, k in enumerate(case.keys):
        q = case.q[i].double().view(2, 3, 16) * case.scale  # [Hkv, G, D]
        want = torch.logsumexp(torch.einsum("hgd,khd->hgk", q, k.double()), dim=-1)
        torch.testing.assert_close(lse[i, ..., 0].double(), want, rtol=0, atol=1e-5)
