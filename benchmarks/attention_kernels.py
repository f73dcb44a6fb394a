"""Kernel benchmark: paged decode (batch 64 x 4k context, bf16 and int8 KV) bandwidth as a fraction
of a device-to-device copy measured in the same run, plus extend attention and the bitmask apply;
peer: the torch twin. Decode launch settings (KV tile, warps, splits) are swept and each printed,
the default first. On a machine without CUDA it times the torch twin at a small shape and says
Triton needs CUDA."""
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


def decode_case(batch, ctx, hq=32, hkv=8, d=128, bs=16, dtype=torch.bfloat16, dev="cpu", kv_dtype=None):
    """A decode batch over a shuffled pool; returns (q, layer KV, meta, bytes the kernel must read)."""
    nb = batch * ctx // bs
    cache = KVCache(1, nb, bs, hkv, d, dtype=kv_dtype or dtype, device=dev)
    if cache.scale is None:
        cache.data.normal_()
    else:
        cache.data.random_(-127, 128)
        cache.scale.uniform_(0.001, 0.02)
    order = torch.randperm(nb).tolist()  # pages scattered over the pool, as after real churn
    per = ctx // bs
    tables = [order[i * per:(i + 1) * per] for i in range(batch)]
    meta = AttentionMetadata.build([1] * batch, [ctx] * batch, tables, [-1] * batch, device=dev)
    q = torch.randn(batch, hq, d, dtype=dtype, device=dev)
    return q, cache.layer(0), meta, cache.nbytes()


DEVICE, BATCH, CONTEXT = "cuda", 64, 4096  # a smoke run on the CPU interpreter shrinks these
SWEEP = [(None, 4, None), (128, 4, None), (128, 8, None), (256, 8, None), (64, 8, None), (64, 4, 8), (128, 4, 4)]


def decode_sweep(label: str, kv_dtype, copy_bw: float) -> None:
    from kvx.kernels.triton_decode_attention import decode_attention

    q, kv, meta, nbytes = decode_case(BATCH, CONTEXT, dev=DEVICE, kv_dtype=kv_dtype)
    best = 0.0
    for block_n, warps, splits in SWEEP:
        run = lambda: decode_attention(q, kv, meta, 128**-0.5, block_n=block_n, num_warps=warps,  # noqa: E731
                                       num_splits=splits)
        t = timed(run, 20)
        frac = nbytes / t / copy_bw
        best = max(best, frac)
        name = "default" if block_n is None and splits is None and warps == 4 else f"tile {block_n or 64}, {warps} warps, splits {splits or 'auto'}"
        print(f"decode {BATCH}x{CONTEXT} {label} [{name}]: {t * 1e3:.3f} ms, {nbytes / t / 1e9:.0f} GB/s = {frac:.3f} of copy")
    print(f"decode {BATCH}x{CONTEXT} {label}: best fraction of copy bandwidth {best:.3f} (target >= 0.70)")


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

    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    q, kv, meta, nbytes = decode_case(64, 4096, dev="cuda")
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    t_copy = timed(lambda: dst.copy_(src), 20)
    copy_bw = 2 * nbytes / t_copy  # a copy reads and writes every byte
    print(f"device-to-device copy of {nbytes / 2**20:.0f} MiB: {copy_bw / 1e9:.0f} GB/s (read + written)")
    decode_sweep("bf16", None, copy_bw)
    decode_sweep("int8 KV", torch.int8, copy_bw)
    t_dec = timed(lambda: decode_attention(q, kv, meta, 128**-0.5), 20)
    t_twin = timed(lambda: paged_attention_ref(q, kv, meta, 128**-0.5), 3)
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
