"""Every token of the vocabulary walked through the DFA from one state: the first visit of a state.

numba runs one loop per token over its bytes, tokens grouped by first byte so a byte the state
rejects skips its whole group: for the ticket schema on SmolLM2's 49k tokens ~1.0 ms for a state
most tokens pass (inside a string) against ~3.4 ms for the numpy lockstep walk
(token_fsm.walk_lockstep). Where most tokens die on their first or second byte the lockstep walk
is faster (0.36 against 0.50 ms) and stays in use, as it does without numba. Both return the
allowed token ids in increasing order with their next states.
"""
from __future__ import annotations

import functools

import numpy as np

from kvx.kernels.numba_env import import_numba


@functools.cache
def _kernel():
    numba = import_numba()
    if numba is None:
        return None

    @numba.njit(cache=True)
    def walk(trans, rows, lengths, row_ids, first_start, state, out):  # pragma: no cover - compiled
        for b in range(256):
            after = trans[state, b]
            if after < 0:
                continue  # every token starting with b dies on its first byte
            for i in range(first_start[b], first_start[b + 1]):
                s = after
                for j in range(1, lengths[i]):
                    s = trans[s, rows[i, j]]
                    if s < 0:
                        break
                out[row_ids[i]] = s

    try:  # compile now (or load the disk cache); a failure means the numpy walk
        walk(np.zeros((1, 256), np.int32), np.zeros((1, 1), np.uint8), np.ones(1, np.int64),
             np.zeros(1, np.int32), np.zeros(257, np.int64), 0, np.zeros(1, np.int32))
    except Exception:  # noqa: BLE001 - numba's errors have no common base class
        return None
    return walk


MANY_TOKENS = 20_000  # tokens past their first byte from which the per-token loop wins


def worth_it(trans: np.ndarray, mat, state: int) -> bool:
    """numba is there and many tokens get past their first byte (a string's content, say)."""
    if trans.dtype != np.int32 or not len(mat.row_ids):
        return False
    live_first = trans[state] >= 0
    return int(np.diff(mat.first_start)[live_first].sum()) >= MANY_TOKENS and _kernel() is not None


def walk_tokens(trans: np.ndarray, mat, vocab_size: int, state: int) -> tuple[np.ndarray, np.ndarray]:
    """trans [S, 256] int32, mat a token_fsm.TokenMatrix -> (allowed ids, their next states)."""
    out = np.full(vocab_size, -1, np.int32)
    _kernel()(trans, mat.rows, mat.lengths, mat.row_ids, mat.first_start, state, out)
    ids = np.flatnonzero(out >= 0).astype(np.int32)
    return ids, out[ids]
