"""Grammar masks on a step's logits: the device bitmask table (CUDA's route) must ban exactly what the
row-by-row route bans, for masks narrower than the model's rows, unmasked rows and slot reuse."""
import torch

from kvx.engine.masking import BitmaskTable, LogitMasker, apply_mask
from kvx.kernels.mask import apply_token_bitmask_ref

VOCAB = 200  # model rows; the tokenizer's masks cover 150 of them


def masks(seed: int, n: int) -> list[torch.Tensor | None]:
    gen = torch.Generator().manual_seed(seed)
    out: list[torch.Tensor | None] = []
    for i in range(n):
        out.append(None if i % 4 == 3 else torch.rand(150, generator=gen) < 0.2)
    return out


def row_by_row(logits: torch.Tensor, ms: list[torch.Tensor | None]) -> torch.Tensor:
    want = logits.clone()
    for row, allowed in zip(want, ms):
        if allowed is not None:
            apply_mask(row, allowed)
    return want


def test_table_bitmask_bans_what_the_row_route_bans():
    ms = masks(0, 9)
    ms.append(ms[0])  # the same mask object twice in one step
    logits = torch.randn(len(ms), VOCAB)
    got = apply_token_bitmask_ref(logits.clone(), BitmaskTable(VOCAB, "cpu").bitmask(ms))
    want = row_by_row(logits, ms)
    assert torch.equal(got, want)
    assert torch.isinf(want[0, 150:]).all() and torch.isfinite(want[3]).all()  # padding banned, None untouched


def test_slots_follow_their_mask_objects_under_eviction_and_growth():
    table = BitmaskTable(VOCAB, "cpu", capacity=4)
    logits = torch.randn(12, VOCAB)
    for seed in range(6):  # each step brings new masks: old slots are evicted and reused
        ms = masks(seed, 12 if seed % 2 else 3)
        got = apply_token_bitmask_ref(logits[: len(ms)].clone(), table.bitmask(ms))
        assert torch.equal(got, row_by_row(logits[: len(ms)], ms)), seed
    assert table.table.shape[0] > 24  # grown so one step never evicts a slot it uses


def test_masker_on_host_logits_is_the_row_route():
    ms = masks(2, 5)
    logits = torch.randn(len(ms), VOCAB)
    want = row_by_row(logits, ms)
    LogitMasker(VOCAB)(logits, ms)
    assert torch.equal(logits, want)
