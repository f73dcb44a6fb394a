"""Token-bitmask apply: packing against a per-bit loop, the twin and the Triton kernel against a bool mask."""
import pytest
import torch

from kvx.kernels.mask import apply_token_bitmask_inplace, apply_token_bitmask_ref, pack_bool_mask, unpack_bitmask
from kvx.kernels.triton_mask import apply_token_bitmask_triton


def random_allowed(batch, vocab, seed):
    gen = torch.Generator().manual_seed(seed)
    allowed = torch.rand(batch, vocab, generator=gen) < 0.3
    allowed[0] = False
    allowed[0, [0, 31, vocab - 1]] = True  # bit 0, the sign bit 31 and the last token
    allowed[-1] = True
    return allowed


def test_pack_matches_bit_loop():
    allowed = random_allowed(3, 75, 0)
    words = pack_bool_mask(allowed)
    assert words.dtype == torch.int32 and words.shape == (3, 3)
    for b in range(3):
        for tok in range(75):
            bit = (int(words[b, tok // 32]) >> (tok % 32)) & 1
            assert bit == int(allowed[b, tok])
    assert torch.equal(unpack_bitmask(words, 75), allowed)


@pytest.mark.parametrize("batch,vocab", [(1, 32), (4, 1000), (3, 2500)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_bitmask_kernel_and_twin_match_bool_mask(device, batch, vocab, dtype):
    allowed = random_allowed(batch, vocab, vocab)
    logits = torch.randn(batch, vocab).to(dtype)
    want = logits.masked_fill(~allowed, float("-inf"))
    bitmask = pack_bool_mask(allowed)
    twin = apply_token_bitmask_ref(logits.clone(), bitmask)
    got = logits.to(device)
    apply_token_bitmask_triton(got, bitmask.to(device))  # in place
    assert torch.equal(twin, want)
    assert torch.equal(got.cpu(), want)


def test_bitmask_narrower_than_vocab_bans_the_rest(device):
    logits = torch.randn(2, 70, device=device)
    bitmask = torch.full((2, 2), -1, dtype=torch.int32, device=device)  # 64 tokens allowed
    want = logits.clone()
    want[:, 64:] = float("-inf")
    assert torch.equal(apply_token_bitmask_triton(logits.clone(), bitmask), want)
    assert torch.equal(apply_token_bitmask_ref(logits.clone(), bitmask), want)


def test_dispatch_uses_twin_off_cuda():
    allowed = random_allowed(2, 100, 5)
    logits = torch.randn(2, 100)
    out = apply_token_bitmask_inplace(logits, pack_bool_mask(allowed))
    assert out is logits and torch.equal(torch.isfinite(logits), allowed)
