"""DFA state -> allowed tokens and their next states, computed lazily and vectorised over the vocabulary.

On the first visit of a state all tokens are walked through the DFA in lockstep, one byte column at a
time, over a token-byte matrix sorted by length (tokens that died or ended drop out, so the work
shrinks fast). The result is cached per state, so a revisit is a dict lookup.

Length budget: `dist[s]` (kvx.grammar.tokens.budget) is a realisable bound on the fewest non-EOS tokens that
take state s to an accepting state.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch

from kvx.grammar.tokens import token_walk
from kvx.grammar.tokens.budget import INF, TokenDistances, byte_distances
from kvx.grammar.automata.dfa import DFA
from kvx.grammar.tokens.vocab import TokenVocab

@dataclass
class TokenMatrix:
    """Per-tokenizer prep: byte columns of every real token, sorted longest first."""

    order: np.ndarray  # [N] token ids, longest first
    columns: np.ndarray  # [max_len, N] uint8: byte j of each token (0 past its end)
    longer_than: np.ndarray  # [max_len + 1] how many tokens have more than j bytes
    # The same tokens token-major and grouped by first byte, for the numba walk (token_walk.py):
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


def walk_all_tokens(dfa: DFA, mat: TokenMatrix, state: int) -> tuple[np.ndarray, np.ndarray]:
    """(token ids sorted, next states) of every token whose bytes stay alive from `state`."""
    if token_walk.worth_it(dfa.trans, mat, state):
        return token_walk.walk_tokens(dfa.trans, mat, int(mat.order.max()) + 1, state)
    return walk_lockstep(dfa, mat, state)


def walk_lockstep(dfa: DFA, mat: TokenMatrix, state: int) -> tuple[np.ndarray, np.ndarray]:
    """numpy: all tokens through the DFA together, one byte column at a time (dead ones drop out)."""
    flat = dfa.trans.ravel()
    cur = dfa.trans[state][mat.columns[0]] if len(mat.columns) else np.zeros(0, np.int32)
    idx = np.flatnonzero(cur >= 0)
    cur = cur[idx].astype(np.int64)
    ended_ids, ended_states = [], []
    for j in range(1, len(mat.columns) + 1):
        split = int(np.searchsorted(idx, mat.longer_than[j]))  # idx >= longer_than[j]: token ended
        if split < len(idx):
            ended_ids.append(idx[split:])
            ended_states.append(cur[split:])
            idx, cur = idx[:split], cur[:split]
        if not len(idx):
            break
        nxt = flat[cur * 256 + mat.columns[j][idx]]
        keep = nxt >= 0
        idx, cur = idx[keep], nxt[keep].astype(np.int64)
    if not ended_ids:
        return np.zeros(0, np.int32), np.zeros(0, np.int32)
    ids = mat.order[np.concatenate(ended_ids)]
    nexts = np.concatenate(ended_states).astype(np.int32)
    by_id = np.argsort(ids, kind="stable")
    return ids[by_id], nexts[by_id]


@dataclass
class StateTokens:
    """The cached answer for one DFA state."""

    ids: np.ndarray  # sorted allowed non-EOS token ids
    nexts: np.ndarray  # next DFA state per id
    next_dist: np.ndarray  # dist[next] per id, for the length budget
    mask: torch.Tensor  # bool [vocab_size], EOS included when accepting; callers must not modify
    budget_masks: dict[int, torch.Tensor] = field(default_factory=dict)


class TokenFSM:
    """Lazy token-level view of a DFA for one vocabulary; shared by all matchers of a grammar."""

    def __init__(self, dfa: DFA, vocab: TokenVocab, byte_dist: np.ndarray | None = None):
        self.dfa = dfa
        self.vocab = vocab
        self.matrix = token_matrix(vocab)
        self.eos = np.array(vocab.eos_ids, dtype=np.int64)
        self._states: dict[int, StateTokens] = {}
        self._forced: dict[int, list[int]] = {}
        self.first_visit_s: list[float] = []  # seconds per first visit, for reports
        if byte_dist is None:
            byte_dist = byte_distances(dfa.trans, dfa.accepting, vocab.single_byte_tokens(), dfa.classes)
        self.byte_dist = byte_dist
        self.dist = TokenDistances(dfa, vocab, byte_dist)
        if (byte_dist >= INF).any():  # some state cannot finish with one-byte tokens
            self.dist.set_exact(self._token_distances(byte_dist))

    def _token_distances(self, upper: np.ndarray) -> np.ndarray:
        """Exact token distances (Bellman-Ford over all states' token tables) for sparse vocabs."""
        tables = [walk_all_tokens(self.dfa, self.matrix, s) for s in range(self.dfa.num_states)]
        dist = np.where(self.dfa.accepting, 0, upper).astype(np.int32)
        changed = True
        while changed:
            changed = False
            for s, (_, nexts) in enumerate(tables):
                if len(nexts):
                    best = int(dist[nexts].min()) + 1
                    if best < dist[s]:
                        dist[s] = best
                        changed = True
        return dist

    def state(self, s: int) -> StateTokens:
        hit = self._states.get(s)
        if hit is None:
            hit = self._visit(s)
        return hit

    def _visit(self, s: int) -> StateTokens:
        t0 = time.perf_counter()
        ids, nexts = walk_all_tokens(self.dfa, self.matrix, s)
        next_dist = self.dist.many(nexts)
        reachable = next_dist < INF  # only false for vocabs that cannot spell every byte
        if not reachable.all():
            ids, nexts, next_dist = ids[reachable], nexts[reachable], next_dist[reachable]
        mask_np = np.zeros(self.vocab.vocab_size, dtype=bool)
        mask_np[ids] = True
        if self.dfa.accepting[s]:
            mask_np[self.eos] = True
        entry = StateTokens(ids=ids, nexts=nexts, next_dist=next_dist, mask=torch.from_numpy(mask_np))
        self._states[s] = entry
        self.first_visit_s.append(time.perf_counter() - t0)
        return entry

    def budget_mask(self, s: int, max_next_dist: int) -> torch.Tensor:
        """Mask of tokens whose next state can still finish within `max_next_dist` more tokens."""
        entry = self.state(s)
        if not len(entry.next_dist) or max_next_dist >= int(entry.next_dist.max()):
            return entry.mask
        cached = entry.budget_masks.get(max_next_dist)
        if cached is None:
            mask_np = np.zeros(self.vocab.vocab_size, dtype=bool)
            mask_np[entry.ids[entry.next_dist <= max_next_dist]] = True
            if self.dfa.accepting[s]:
                mask_np[self.eos] = True
            cached = entry.budget_masks[max_next_dist] = torch.from_numpy(mask_np)
        return cached

    def next_state(self, s: int, token_id: int) -> int:
        """Next DFA state after `token_id`, or -1 if it is not allowed (EOS is handled by the matcher)."""
        entry = self.state(s)
        pos = int(np.searchsorted(entry.ids, token_id))
        if pos < len(entry.ids) and entry.ids[pos] == token_id:
            return int(entry.nexts[pos])
        return -1

    def forced_bytes(self, s: int) -> bytes:
        """The byte path every completion from `s` must take next (stops at a choice or acceptance)."""
        out = bytearray()
        trans, accepting = self.dfa.trans, self.dfa.accepting
        while not accepting[s] and len(out) < 4096:
            live = np.flatnonzero(trans[s] >= 0)
            if len(live) != 1:
                break
            out.append(int(live[0]))
            s = int(trans[s, live[0]])
        return bytes(out)

    def forced_tokens(self, s: int) -> list[int]:
        """Tokens spelling the forced bytes from `s` exactly, greedily longest first; cached per state."""
        hit = self._forced.get(s)
        if hit is not None:
            return hit
        data = self.forced_bytes(s)
        longest = len(self.matrix.columns)
        tokens: list[int] = []
        i, cur = 0, s
        while i < len(data):
            for size in range(min(longest, len(data) - i), 0, -1):
                tid = self.vocab.id_for_bytes(data[i : i + size])
                if tid is not None:
                    break
            else:
                break  # this byte is no token on its own: stop, sampling takes over
            nxt = self.dfa.run(data[i : i + size], cur)
            if self.dist[nxt] >= INF:
                break
            tokens.append(tid)
            i, cur = i + size, nxt
        self._forced[s] = tokens
        return tokens
