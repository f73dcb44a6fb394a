"""Grammar masks onto a step's logits: row by row on the host, one batched bitmask launch on CUDA.

On a CPU the logits are host rows and each masked row is one masked_fill (measured faster than
stacking the rows first). On CUDA the logits stay on the device (copying [rows, vocab] float32
to the host would cost more than the step): masks are packed to the XGrammar/vLLM bitmask (int32
words, bit j of word w = token 32w+j) into a table on the device, one slot per mask object, and a
step sends only its rows' slot numbers; the device gathers the rows and one kernel launch applies
them. The grammar hands out one cached tensor per automaton state (and budget), so a state's row is
packed (~0.1-0.4 ms for 49k tokens) and uploaded once; the table is LRU-bounded, so matchers that
build masks on the fly cost a packing per row, never unbounded memory. (Sending the packed rows
every step instead cost 756 us for 256 rows x 128k tokens on an H200, mostly host copies.)
"""
from __future__ import annotations

from collections import OrderedDict

import numpy as np
import torch

from kvx.kernels.mask import apply_token_bitmask_inplace, bitmask_words, pack_bool_mask


def apply_mask(row: torch.Tensor, allowed: torch.Tensor) -> None:
    """row [V] float, allowed [N] bool over the tokenizer's vocabulary: rows past N are padding, never
    allowed; ids past V (a tokenizer with more tokens than the model has rows) can never be chosen."""
    n = min(allowed.shape[0], row.shape[0])
    row[:n].masked_fill_(~allowed[:n].to(row.device), float("-inf"))
    if n < row.shape[0]:
        row[n:] = float("-inf")


def pack_row(allowed: torch.Tensor, words: int) -> np.ndarray:
    """bool [n] -> int32 [words] (bits past n are 0: disallowed)."""
    row = np.zeros(words, dtype=np.int32)
    packed = pack_bool_mask(allowed).numpy()
    row[: packed.shape[0]] = packed
    return row


class BitmaskTable:
    """Packed mask rows resident on the logits' device, one slot per mask object (LRU order).

    Slot 0 allows every token (rows without a mask). A step sends only its rows' slot numbers and
    the rows it packs for the first time; the device gathers its bitmask from the table."""

    def __init__(self, vocab_size: int, device: torch.device | str, capacity: int = 1024):
        self.words = bitmask_words(vocab_size)
        self.device = torch.device(device)
        self.table = torch.full((capacity, self.words), -1, dtype=torch.int32, device=self.device)
        self._slots: OrderedDict[int, tuple[torch.Tensor, int]] = OrderedDict()
        self._free = list(range(capacity - 1, 0, -1))

    def _grow(self) -> None:
        old = self.table.shape[0]
        self.table = torch.cat([self.table, torch.empty_like(self.table)])
        self._free.extend(range(2 * old - 1, old - 1, -1))

    def _slot(self) -> int:
        if not self._free:
            _, (_, slot) = self._slots.popitem(last=False)  # the least recently used mask
            return slot
        return self._free.pop()

    def indices(self, masks: list[torch.Tensor | None]) -> torch.Tensor:
        """Slot of each row's mask on the device (packing and uploading the new ones)."""
        while self.table.shape[0] <= 2 * len(masks):  # a step never evicts a slot it uses itself
            self._grow()
        idx, new_slots, new_rows = [], [], []
        for allowed in masks:
            if allowed is None:
                idx.append(0)
                continue
            hit = self._slots.get(id(allowed))
            if hit is not None and hit[0] is allowed:
                self._slots.move_to_end(id(allowed))
                idx.append(hit[1])
                continue
            slot = self._slot()
            self._slots[id(allowed)] = (allowed, slot)
            new_slots.append(slot)
            new_rows.append(pack_row(allowed, self.words))
            idx.append(slot)
        if new_rows:
            rows = torch.from_numpy(np.stack(new_rows)).to(self.device)
            self.table[torch.tensor(new_slots, device=self.device)] = rows
        return torch.tensor(idx, dtype=torch.int64).to(self.device, non_blocking=True)

    def bitmask(self, masks: list[torch.Tensor | None]) -> torch.Tensor:
        """int32 [rows, words] on the device (None = every token allowed)."""
        idx = self.indices(masks)  # first: it may grow the table
        return self.table.index_select(0, idx)


class LogitMasker:
    """Applies one step's row masks to its logits, on whichever device the logits are."""

    def __init__(self, vocab_size: int):
        self.vocab_size = vocab_size
        self.table: BitmaskTable | None = None  # made on the first CUDA step

    def __call__(self, logits: torch.Tensor, masks: list[torch.Tensor | None]) -> None:
        if not any(m is not None for m in masks):
            return
        if not logits.is_cuda:
            for row, allowed in zip(logits, masks):
                if allowed is not None:
                    apply_mask(row, allowed)
            return
        if self.table is None or self.table.device != logits.device:
            self.table = BitmaskTable(self.vocab_size, logits.device)
        apply_token_bitmask_inplace(logits, self.table.bitmask(masks))
