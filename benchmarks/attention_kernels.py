"""Kernel benchmark: paged decode (batch 64 x 4k context, bf16) bandwidth as a fraction of a
device-to-device copy, plus extend attention and the bitmask apply; peer: the torch twin.
On a machine without CUDA it times the torch twin at a small shape and says Triton needs CUDA."""
from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import torch  # noqa: E402

from kvx.kernels.interface import AttentionMetadata, KVCache  # noqa: E402
from kvx.kernels.torch_backend import paged_attention_ref  # noqa: E402


def timed(fn, reps: int) -> float:
    fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(reps):
        fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return (time.perf_counter() - t) / reps


def decode_case(batch, ctx, hq=32, hkv=8, d=128, bs=16, dtype=torch.bfloat16, dev="cpu"):
    nb = batch * ctx // bs
    cache = KVCache(1, nb, bs, hkv, d, dtype=dtype, device=dev)
    cache.data.normal_()
    tables = [list(range(i * ctx // bs, (i + 1) * ctx // bs)) for i in range(batch)]
    meta = AttentionMetadata.build([1] * batch, [ctx] * batch, tables, [-1] * batch, device=dev)
    q = torch.randn(batch, hq, d, dtype=dtype, device=dev)
    return q, cache.layer(0), meta, cache.data.numel() * cache.data.element_size()


def main() -> None:
    if not torch.cuda.is_available():
        q, kv, meta, nbytes = decode_case(4, 256)
        t = timed(lambda: paged_attention_ref(q, kv, meta, 128**-0.5), 3)
        print(f"torch twin decode 4x256 bf16 (CPU): {t * 1e3:.2f} ms, {nbytes / t / 1e9:.2f} GB/s")
        print("Triton kernels need CUDA: no GPU here, so only the torch twin was timed.")
        return
    from kvx.kernels.mask import pack_bool_mask
    from kvx.kernels.triton_decode_attention import decode_attention
    from kvx.kernels.triton_extend_attention import extend_attention
    from kvx.kernels.triton_mask import apply_token_bitmask_triton

    q, kv, meta, nbytes = decode_case(64, 4096, dev="cuda")
    t_dec = timed(lambda: decode_attention(q, kv, meta, 128**-0.5), 20)
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    t_copy = timed(lambda: dst.copy_(src), 20)
    copy_bw, dec_bw = 2 * nbytes / t_copy, nbytes / t_dec  # a copy reads and writes every byte
    t_twin = timed(lambda: paged_attention_ref(q, kv, meta, 128**-0.5), 3)
    print(f"decode 64x4096 bf16: {t_dec * 1e3:.3f} ms, {dec_bw / 1e9:.0f} GB/s; copy {copy_bw / 1e9:.0f} GB/s")
    print(f"decode bandwidth fraction of copy: {dec_bw / copy_bw:.3f} (target >= 0.70)")
    print(f"decode vs torch twin: {t_twin / t_dec:.1f}x faster")
    eq, ekv, emeta, _ = decode_case(8, 2048, dev="cuda")
    emeta = AttentionMetadata.build([512] * 8, [2048] * 8, [t.tolist() for t in emeta.block_tables.cpu()],
                                    [-1] * 4096, device="cuda")
    eq = torch.randn(4096, 32, 128, dtype=torch.bfloat16, device="cuda")
    t_ext = timed(lambda: extend_attention(eq, ekv, emeta, 128**-0.5), 10)
    t_ext_twin = timed(lambda: paged_attention_ref(eq, ekv, emeta, 128**-0.5), 3)
    flops = 4 * 8 * 32 * 128 * 512 * (2048 - 256)
    print(f"extend 8x(1536 cached + 512 new) bf16: {t_ext * 1e3:.3f} ms, {flops / t_ext / 1e12:.1f} TFLOP/s, "
          f"{t_ext_twin / t_ext:.1f}x the torch twin")
    logits = torch.randn(64, 128256, device="cuda")
    bm = pack_bool_mask(torch.rand(64, 128256, device="cuda") < 0.5)
    t_mask = timed(lambda: apply_token_bitmask_triton(logits, bm), 50)
    print(f"bitmask apply 64x128256 fp32: {t_mask * 1e6:.1f} us")


if __name__ == "__main__":
    main()
