"""TritonBackend: decode-only batches take the decode kernel, others the extend kernel; both match TorchBackend."""
import torch
from paged_cases import make_case, rel_err

import kvx.kernels.triton_backend as tb
from kvx.kernels import get_backend


def test_backend_dispatch_and_results(device, monkeypatch):
    calls = []
    for name in ("decode_attention", "extend_attention"):
        real = getattr(tb, name)
        monkeypatch.setattr(tb, name, lambda *a, _r=real, _n=name, **k: calls.append(_n) or _r(*a, **k))
    triton_b, torch_b = get_backend("triton"), get_backend("torch")
    for seqs, kind in [([(3, 1), (10, 1)], "decode_attention"), ([(3, 1), (0, 6)], "extend_attention")]:
        case = make_case(seqs, 6, 2, head_dim=16, block_size=4, device=device, seed=len(calls))
        got = triton_b.attention(case.q, case.kv, case.meta, case.scale)
        assert calls[-1] == kind
        assert rel_err(got, torch_b.attention(case.q, case.kv, case.meta, case.scale)) <= 1e-3
    k = torch.randn(2, 2, 16, device=device)
    triton_b.store_kv(k, k, case.kv, torch.tensor([0, -1], device=device))
    assert torch.equal(case.kv.k[0, 0], k[0])


def test_auto_backend_follows_the_engines_rule():
    """kernels.get_backend("auto") and the engine's resolve_attention pick the same backend."""
    from kvx.engine.engine import resolve_attention
    from kvx.kernels import get_backend

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    want = {"cpu": "CpuBackend", "triton": "TritonBackend"}[resolve_attention("auto", device)]
    assert type(get_backend("auto")).__name__ == want
