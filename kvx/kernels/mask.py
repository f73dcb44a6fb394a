"""Token-bitmask apply for constrained decoding: torch twin, packing helper and dispatch.

Bitmask format (the XGrammar / vLLM one): int32 [batch, ceil(vocab/32)], bit j of word w says
token 32*w + j is allowed. Tokens past the bitmask's width count as disallowed.
"""
from __future__ import annotations

import numpy as np
import torch

_BITS = torch.arange(32, dtype=torch.int64)


def bitmask_words(vocab_size: int) -> int:
    return (vocab_size + 31) // 32


def pack_bool_mask(allowed: torch.Tensor) -> torch.Tensor:
    """bool [..., vocab] (True = allowed) -> int32 [..., ceil(vocab/32)], on allowed's device.

    Packed on the host by numpy (~40x faster than shifting int64 words in torch); the words'
    bytes are little-endian, as the int32 view on every platform torch supports reads them."""
    vocab = allowed.shape[-1]
    bits = np.zeros((*allowed.shape[:-1], bitmask_words(vocab) * 32), dtype=np.bool_)
    bits[..., :vocab] = allowed.cpu().numpy()
    words = np.packbits(bits, axis=-1, bitorder="little").view("<i4")
    return torch.from_numpy(words.astype(np.int32)).to(allowed.device)


def unpack_bitmask(bitmask: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """int32 [..., words] -> bool [..., vocab_size] (True = allowed)."""
    bits = (bitmask.to(torch.int64)[..., None] >> _BITS.to(bitmask.device)) & 1
    allowed = bits.flatten(-2).bool()
    if allowed.shape[-1] < vocab_size:  # narrower bitmask: the rest is disallowed
        allowed = torch.nn.functional.pad(allowed, (0, vocab_size - allowed.shape[-1]))
    return allowed[..., :vocab_size]


def apply_token_bitmask_ref(logits: torch.Tensor, bitmask: torch.Tensor) -> torch.Tensor:
    """Torch twin: logits [B, V] (or [V]) float, set to -inf where the bit is 0, in place."""
    allowed = unpack_bitmask(bitmask, logits.shape[-1])
    logits.masked_fill_(~allowed, float("-inf"))
    return logits


def apply_token_bitmask_inplace(logits: torch.Tensor, bitmask: torch.Tensor) -> torch.Tensor:
    """The whole batch in one launch: the Triton kernel on CUDA, the torch twin elsewhere."""
    if logits.is_cuda:
        try:
            from kvx.kernels.triton_mask import apply_token_bitmask_triton
        except ImportError:  # CUDA torch without triton: the twin still works on the GPU
            return apply_token_bitmask_ref(logits, bitmask)
        return apply_token_bitmask_triton(logits, bitmask)
    return apply_token_bitmask_ref(logits, bitmask)
