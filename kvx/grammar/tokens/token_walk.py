"""Every token of the vocabulary walked through a program's table from one state: the first visit
of a frame state (kvx/grammar/tokens/frames.py). The table is over byte classes (`classes[b]` is
byte b's column).

Two walkers give the same answer: numpy in lockstep, one byte column at a time over a length-sorted
[max_len, N] byte matrix (tokens that die or end drop out, so the work shrinks fast), and numba,
one loop per token, tokens grouped by first byte so a byte the state rejects skips its whole group
(~1.0 ms against ~3.4 ms for states most tokens pass, a string's content, on SmolLM2's 49k tokens;
where most tokens die at once the lockstep walk is faster and stays in use, as it does without numba).
Both return the tokens that stay alive, with their end states, and the tokens that died on a
*boundary* byte (one that starts a call there, or any byte after a frame's final state), with where
they stopped, whether or not the byte also moves inside the frame: the frame layer follows every
alternative into callees and callers.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from kvx.grammar.tokens.vocab import TokenVocab
from kvx.kernels.numba_env import import_numba


@dataclass
class TokenMatrix:
    """Per-tokenizer prep: byte columns of every real token, sorted longest first."""

    order: np.ndarray  # [N] token ids, longest first
    columns: np.ndarray  # [max_len, N] uint8: byte j of each token (0 past its end)
    longer_than: np.ndarray  # [max_len + 1] how many tokens have more than j bytes
    # The same tokens token-major and grouped by first byte, for the numba walk:
    rows: np.ndarray  # [N, max_len] uint8, sorted by first byte
    row_ids: np.ndarray  # [N] token id of each row
    lengths: np.ndarray  # [N] bytes per row
    first_start: np.ndarray  # [257] rows first_start[b]:first_start[b + 1] start with byte b

    @classmethod
    def build(cls, vocab: TokenVocab) -> "TokenMatrix":
        ids = np.array([i for i, tb in enumerate(vocab.token_bytes) if tb], dtype=np.int64)
        lengths = np.array([len(vocab.token_bytes[i]) for i in ids], dtype=np.int64)
        by_len = np.argsort(-lengths, kind="stable")
        ids, lengths = ids[by_len], lengths[by_len]
        max_len = int(lengths[0]) if len(ids) else 0
        flat = np.frombuffer(b"".join(vocab.token_bytes[i] for i in ids), dtype=np.uint8)
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        columns = np.zeros((max_len, len(ids)), dtype=np.uint8)
        for j in range(max_len):
            n = int(np.count_nonzero(lengths > j))  # tokens are sorted, so these are the first n
            columns[j, :n] = flat[starts[:n] + j]
        longer_than = np.array([np.count_nonzero(lengths > j) for j in range(max_len + 1)], dtype=np.int64)
        by_first = np.argsort(columns[0], kind="stable") if max_len else np.zeros(0, np.int64)
        first_start = np.searchsorted(columns[0][by_first], np.arange(257)) if max_len else np.zeros(257, np.int64)
        return cls(order=ids.astype(np.int32), columns=columns, longer_than=longer_than,
                   rows=np.ascontiguousarray(columns.T[by_first]), row_ids=ids[by_first].astype(np.int32),
                   lengths=lengths[by_first], first_start=first_start.astype(np.int64))


_MATRICES: dict[str, TokenMatrix] = {}


def token_matrix(vocab: TokenVocab) -> TokenMatrix:
    if vocab.hash not in _MATRICES:
        _MATRICES[vocab.hash] = TokenMatrix.build(vocab)
    return _MATRICES[vocab.hash]


@dataclass
class Boundary:
    """Which (state, byte) pairs leave the frame: row[s] >= 0 names s's row of `bytes`."""

    row: np.ndarray  # [S] int64, -1 for states with no boundary byte
    bytes: np.ndarray  # [B, 256] bool


@dataclass
class Walk:
    """All tokens from one state: alive ones (sorted ids, end states) and boundary stops."""

    ids: np.ndarray
    nexts: np.ndarray
    stop_ids: np.ndarray  # tokens that reached a boundary byte
    stop_pos: np.ndarray  # bytes consumed before that state
    stop_state: np.ndarray  # the boundary state


def walk_all_tokens(table: np.ndarray, classes: np.ndarray, edge: Boundary, mat: TokenMatrix, state: int) -> Walk:
    if worth_it(table, classes, mat, state):
        return walk_tokens(table, classes, edge, mat, int(mat.order.max()) + 1, state)
    return walk_lockstep(table, classes, edge, mat, state)


def walk_lockstep(table: np.ndarray, classes: np.ndarray, edge: Boundary, mat: TokenMatrix, state: int) -> Walk:
    """numpy: all tokens through the table together, one byte column at a time."""
    flat = table.ravel()
    width = table.shape[1]
    n_cols = len(mat.columns)
    cur = table[state][classes][mat.columns[0]] if n_cols else np.zeros(0, np.int32)  # the row by byte, read once
    ended_ids, ended_states, stops = [], [], []
    if edge.row[state] >= 0 and n_cols:
        leave = edge.bytes[edge.row[state]][mat.columns[0]]
        out = np.flatnonzero(leave)
        stops.append((out, np.zeros(len(out), np.int64), np.full(len(out), state, np.int64)))
        cur = np.where(leave, -1, cur)
    idx = np.flatnonzero(cur >= 0)
    cur = cur[idx].astype(np.int64)
    for j in range(1, n_cols + 1):
        split = int(np.searchsorted(idx, mat.longer_than[j]))  # idx >= longer_than[j]: token ended
        if split < len(idx):
            ended_ids.append(idx[split:])
            ended_states.append(cur[split:])
            idx, cur = idx[:split], cur[:split]
        if not len(idx):
            break
        col = mat.columns[j][idx]
        nxt = flat[cur * width + classes[col]]
        rows = edge.row[cur]
        at_edge = rows >= 0
        if at_edge.any():
            at_edge[at_edge] = edge.bytes[rows[at_edge], col[at_edge]]
            stops.append((idx[at_edge], np.full(int(at_edge.sum()), j, np.int64), cur[at_edge]))
            nxt = np.where(at_edge, -1, nxt)
        keep = nxt >= 0
        idx, cur = idx[keep], nxt[keep].astype(np.int64)
    ids = mat.order[np.concatenate(ended_ids)] if ended_ids else np.zeros(0, np.int32)
    nexts = np.concatenate(ended_states).astype(np.int32) if ended_ids else np.zeros(0, np.int32)
    by_id = np.argsort(ids, kind="stable")
    if stops:
        stop_ids = mat.order[np.concatenate([s[0] for s in stops])]
        stop_pos, stop_state = np.concatenate([s[1] for s in stops]), np.concatenate([s[2] for s in stops])
    else:
        stop_ids, stop_pos, stop_state = np.zeros(0, np.int32), np.zeros(0, np.int64), np.zeros(0, np.int64)
    return Walk(ids[by_id], nexts[by_id], stop_ids, stop_pos, stop_state)


@functools.cache
def _kernel():
    numba = import_numba()
    if numba is None:
        return None

    @numba.njit(cache=True)
    def walk(table, classes, edge_row, edge_bytes, rows, lengths, row_ids, first_start, state, out, stop_pos,
             stop_state):  # pragma: no cover - compiled
        for b in range(256):
            if edge_row[state] >= 0 and edge_bytes[edge_row[state], b]:  # b leaves the frame here
                for i in range(first_start[b], first_start[b + 1]):
                    stop_pos[row_ids[i]] = 0
                    stop_state[row_ids[i]] = state
                continue
            after = table[state, classes[b]]
            if after < 0:
                continue  # every token starting with b dies on its first byte
            for i in range(first_start[b], first_start[b + 1]):
                s = after
                for j in range(1, lengths[i]):
                    c = rows[i, j]
                    if edge_row[s] >= 0 and edge_bytes[edge_row[s], c]:
                        stop_pos[row_ids[i]] = j
                        stop_state[row_ids[i]] = s
                        s = -1
                        break
                    s = table[s, classes[c]]
                    if s < 0:
                        break
                out[row_ids[i]] = s

    try:  # compile now (or load the disk cache); a failure means the numpy walk
        walk(np.zeros((1, 1), np.int32), np.zeros(256, np.int64), np.full(1, -1, np.int64), np.zeros((1, 256), np.bool_),
             np.zeros((1, 1), np.uint8), np.ones(1, np.int64), np.zeros(1, np.int32), np.zeros(257, np.int64), 0,
             np.zeros(1, np.int32), np.zeros(1, np.int64), np.zeros(1, np.int64))
    except Exception:  # noqa: BLE001 - numba's errors have no common base class
        return None
    return walk


MANY_TOKENS = 20_000  # tokens past their first byte from which the per-token loop wins


def worth_it(table: np.ndarray, classes: np.ndarray, mat: TokenMatrix, state: int) -> bool:
    """numba is there and many tokens get past their first byte (a string's content, say)."""
    if table.dtype != np.int32 or not len(mat.row_ids):
        return False
    live_first = table[state][classes] >= 0
    return int(np.diff(mat.first_start)[live_first].sum()) >= MANY_TOKENS and _kernel() is not None


def walk_tokens(table: np.ndarray, classes: np.ndarray, edge: Boundary, mat: TokenMatrix, vocab_size: int,
                state: int) -> Walk:
    """numba: table [S, K] int32 over `classes` -> the same Walk as walk_lockstep."""
    out = np.full(vocab_size, -1, np.int32)
    stop_pos = np.full(vocab_size, -1, np.int64)
    stop_state = np.full(vocab_size, -1, np.int64)
    _kernel()(table, classes, edge.row, edge.bytes, mat.rows, mat.lengths, mat.row_ids, mat.first_start, state, out,
              stop_pos, stop_state)
    ids = np.flatnonzero(out >= 0).astype(np.int32)
    stops = np.flatnonzero(stop_state >= 0).astype(np.int32)
    return Walk(ids, out[ids], stops, stop_pos[stops], stop_state[stops])
