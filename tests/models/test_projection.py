"""Projection (oneDNN prepacked or F.linear) against a float64 matmul."""
import pytest
import torch

from kvx.models.projection import Projection


def reference(x, w, b=None):
    y = x.double() @ w.double().T
    return y if b is None else y + b.double()


@pytest.mark.parametrize("rows", [0, 1, 7, 64, 300])
@pytest.mark.parametrize("shape", [(1000, 96), (96, 96), (64, 200)], ids=["wide", "square", "deep"])
@pytest.mark.parametrize("with_bias", [False, True])
def test_matches_float64_matmul(rows, shape, with_bias):
    g = torch.Generator().manual_seed(rows + shape[0])
    w, x = torch.randn(*shape, generator=g), torch.randn(rows, shape[1], generator=g)
    b = torch.randn(shape[0], generator=g) if with_bias else None
    proj = Projection(w, b)
    # the prepacked route takes float32 matrices at least as wide as deep, where oneDNN is available
    assert (proj.packed is not None) == (shape[0] >= shape[1] and torch.backends.mkldnn.is_available())
    got = proj(x)
    assert got.shape == (rows, shape[0]) and got.dtype == torch.float32
    torch.testing.assert_close(got.double(), reference(x, w, b), rtol=1e-5, atol=1e-4)


def test_strided_rows_and_bfloat16_weights():
    w, x = torch.randn(500, 64), torch.randn(40, 128)[:, ::2]  # a strided view
    torch.testing.assert_close(Projection(w)(x).double(), reference(x, w), rtol=1e-5, atol=1e-4)
    # bfloat16 matrices are packed whatever their shape, where oneDNN has a bf16 path on this CPU
    # (AVX-512 or AVX-NE-CONVERT; an AVX2-only host runs them on F.linear)
    bf16_packs = torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported()
    for wide in (w, w[:48].T.contiguous()):
        proj = Projection(wide.bfloat16())
        assert (proj.packed is not None) == bf16_packs
        xs = x if wide.shape[1] == x.shape[1] else torch.randn(40, wide.shape[1])
        got = proj(xs)  # float32 rows are rounded to bfloat16; the result stays in the weight's dtype
        assert got.dtype == torch.bfloat16 and got.shape == (40, wide.shape[0])
        torch.testing.assert_close(got.double(), reference(xs, wide), rtol=3e-2, atol=0.3)
    assert Projection(w.bfloat16())(x[:0]).shape == (0, 500)


def test_bfloat16_bias_follows_the_weight():
    w, b, x = torch.randn(96, 32), torch.randn(96), torch.randn(5, 32)
    got = Projection(w.bfloat16(), b)(x)
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got.double(), reference(x, w, b), rtol=3e-2, atol=0.3)
