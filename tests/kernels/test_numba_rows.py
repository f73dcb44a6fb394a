"""The numba row kernels (RMS norm, rotary embedding) against float64 references, on strided views
like the model's q/k slices, and independent of the rows batched with them."""
import torch

from kvx.kernels import numba_rows


def rms_ref(x, w, eps):
    x = x.double()
    return (w.double() * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)).float()


def rope_ref(x, cos, sin):
    x, cos, sin = x.double(), cos.double(), sin.double()
    half = x.shape[-1] // 2
    return (x * cos + torch.cat((-x[..., half:], x[..., :half]), -1) * sin).float()


def test_numba_rows_compile():  # a dependency: without it the model keeps the torch ops
    assert numba_rows.available()


def test_rms_norm_matches_reference_on_2d_and_3d():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(37, 96, generator=g) * 3
    w = torch.randn(96, generator=g)
    assert torch.allclose(numba_rows.rms_norm(x, w, 1e-5), rms_ref(x, w, 1e-5), rtol=1e-5, atol=1e-5)
    heads = torch.randn(5, 4, 16, generator=g)[:, 1:]  # a strided [T, H, D] view, as for q/k norms
    out = numba_rows.rms_norm(heads, w[:16], 1e-6)
    assert out.shape == heads.shape
    assert torch.allclose(out, rms_ref(heads, w[:16], 1e-6), rtol=1e-5, atol=1e-5)


def test_rope_matches_reference_on_a_strided_slice():
    g = torch.Generator().manual_seed(1)
    qkv = torch.randn(23, 3 * 32 + 2 * 32, generator=g)
    k = qkv[:, 96:128].view(23, 1, 32)  # the model's k: a column slice of the fused projection
    q = qkv[:, :96].view(23, 3, 32)
    ang = torch.randn(23, 1, 16, generator=g)
    cos, sin = torch.cat((ang, ang), -1).cos(), torch.cat((ang, ang), -1).sin()
    for x in (q, k):
        assert torch.allclose(numba_rows.rope(x, cos, sin), rope_ref(x, cos, sin), rtol=1e-6, atol=1e-6)


def test_rows_do_not_depend_on_their_batch():
    g = torch.Generator().manual_seed(2)
    x, w = torch.randn(64, 576, generator=g), torch.randn(576, generator=g)
    whole = numba_rows.rms_norm(x, w, 1e-5)
    assert torch.equal(whole[17:18], numba_rows.rms_norm(x[17:18], w, 1e-5))
    ang = torch.randn(64, 1, 64, generator=g)
    q = torch.randn(64, 9, 64, generator=g)
    whole = numba_rows.rope(q, ang.cos(), ang.sin())
    assert torch.equal(whole[40:43], numba_rows.rope(q[40:43], ang.cos()[40:43], ang.sin()[40:43]))
