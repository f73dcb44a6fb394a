"""Closed choices: the complete values the grammar allows from a state, when they are few.

Where a schema allows a small set of whole values (an enum, true/false, a const per anyOf branch,
small bounded integers) the decoder can score each value as a whole instead of trusting the first
token. Where it allows a literal (null, true, false) or an open value (a free string, a number),
it can weigh the literal against the open rest. This module finds such points on the byte DFA:

Walk forward from the state s, keeping for each reached state the byte paths from s to it, and
always expand the reached state farthest from acceptance (`byte_dist`), so a state every path must
pass through (nearer to acceptance than any state before it) tends to be reached on every path
before it is expanded: when the reached states shrink to one, its paths are the closed values.
A state reached again after its expansion is simply expanded again with the new paths; a branch
that loops (a free string, digits) ends up too long or too many and is "open": its first bytes
are set aside and the rest of the walk goes on, as does one that could end the document. Whatever
the order, the result is exact: every byte string from s either starts with an open byte or is one
of the paths followed by the final state's language, because every other reached state was
expanded on every byte. The walk gives up (no choice) at its limits.

Only value-level choices are kept: the closed values must be JSON values themselves (`null`,
`true`, `1`) or the contents of a string the grammar closes right after (an enum's strings);
that leaves out structural choices such as `}` against `,"key":...` or closing a free string.
"""
from __future__ import annotations

import heapq
import json
import weakref
from dataclasses import dataclass

import numpy as np
import torch

from kvx.grammar.budget import INF
from kvx.grammar.token_fsm import TokenFSM

MAX_OPTIONS = 64  # closed values at most at one point
MAX_VALUE_BYTES = 96  # bytes of one closed value at most
MAX_EXPANSIONS = 4096  # states one walk may expand


@dataclass(frozen=True)
class ValueOption:
    text: bytes  # the value's bytes from the choice point to where every option meets
    tokens: tuple[int, ...]  # a spelling (longest match), each token allowed after the ones before


@dataclass(frozen=True)
class ValueChoice:
    """The complete values allowed at one grammar state, and the tokens that start an open value."""

    key: int  # the grammar state: the same point of the schema gets the same key in every record
    options: tuple[ValueOption, ...]
    open_mask: torch.Tensor | None  # bool [vocab]: allowed tokens that start an open value (None: closed)

    @property
    def num_alternatives(self) -> int:
        return len(self.options) + (self.open_mask is not None)


_FOUND: "weakref.WeakKeyDictionary[TokenFSM, dict[int, ValueChoice | None]]" = weakref.WeakKeyDictionary()


def value_choice(fsm: TokenFSM, state: int) -> ValueChoice | None:
    """The choice at `state` (cached per FSM and state), or None where there is none to rank."""
    found = _FOUND.setdefault(fsm, {})
    if state not in found:
        found[state] = _find(fsm, state)
    return found[state]


def _find(fsm: TokenFSM, s: int) -> ValueChoice | None:
    trans, accepting = fsm.dfa.trans, fsm.dfa.accepting
    if accepting[s] or np.count_nonzero(trans[s] >= 0) < 2:
        return None
    before = _entering_bytes(fsm, s)
    if not (before == b'"' or all(b in VALUE_START for b in before)):
        return None  # inside a value (a string's contents, a number): no whole value starts here
    walk = _Walk(trans, accepting, fsm.byte_dist)
    walk.run(s)
    closed, join = walk.result()
    if not closed or (not walk.open_first and len(closed) < 2):
        return None
    closed = _whole_values(fsm, closed, join, before, bool(walk.open_first))
    if closed is None:
        return None
    options = tuple(o for o in (_spell(fsm, s, p) for p in sorted(closed)) if o is not None)
    open_mask = _open_mask(fsm, s, walk.open_first) if walk.open_first else None
    if len(options) + (open_mask is not None) < 2:
        return None
    return ValueChoice(key=s, options=options, open_mask=open_mask)


class _Walk:
    """The forward walk of the module docstring over one DFA."""

    def __init__(self, trans: np.ndarray, accepting: np.ndarray, dist: np.ndarray):
        self.trans, self.accepting, self.dist = trans, accepting, dist
        self.paths: dict[int, list[bytes]] = {}  # reached, not yet expanded state -> paths to it
        self.expanded: set[int] = set()
        self.open_first: set[int] = set()
        self._heap: list[tuple[int, int]] = []

    def _reach(self, state: int, paths: list[bytes]) -> None:
        if state not in self.paths:
            state = next((u for u in self.paths if self.dist[u] == self.dist[state] and self._same(u, state)), state)
        if state not in self.paths:
            self.paths[state] = []
            heapq.heappush(self._heap, (-min(int(self.dist[state]), int(INF)), state))
        self.paths[state].extend(paths)

    def _same(self, a: int, b: int, limit: int = 64) -> bool:
        """Whether two states have the same future, proven within `limit` state pairs (the
        compiler's DFA can hold such twins; the walk must see them as one meeting point)."""
        todo, seen = [(a, b)], set()
        while todo:
            a, b = todo.pop()
            if a == b or (a, b) in seen:
                continue
            seen.add((a, b))
            ra, rb = self.trans[a], self.trans[b]
            if len(seen) > limit or self.accepting[a] != self.accepting[b] or not np.array_equal(ra >= 0, rb >= 0):
                return False
            diff = np.flatnonzero(ra != rb)
            todo.extend(zip(ra[diff].tolist(), rb[diff].tolist()))
        return True

    def _set_open(self, paths: list[bytes]) -> None:
        self.open_first.update(p[0] for p in paths)

    def _live(self, paths: list[bytes]) -> list[bytes]:
        return [p for p in paths if p[0] not in self.open_first]

    def _settled(self, paths: list[bytes]) -> bool:
        """All closed paths meet in one state: where they meet unless an open branch was set aside;
        then the closed ones (a lone `nul`, say) go on until they are whole JSON values."""
        return not self.open_first or all(_json(p.rstrip(STRUCTURAL)) is not _NOT_JSON for p in paths)

    def run(self, s: int) -> None:
        self.expanded.add(s)  # s itself is not expanded again: coming back to it is a loop
        for b in np.flatnonzero(self.trans[s] >= 0):
            v, path = int(self.trans[s, b]), [bytes([b])]
            self._set_open(path) if v == s else self._reach(v, path)
        for _ in range(MAX_EXPANSIONS):
            if not self._heap:
                break
            live = {u: ps for u, ps in ((u, self._live(ps)) for u, ps in self.paths.items()) if ps}
            if not live or (len(live) == 1 and self._settled(next(iter(live.values())))):
                return
            _, u = heapq.heappop(self._heap)
            paths = self._live(self.paths.pop(u))
            if not paths:
                continue
            if self.accepting[u] or len(paths) > MAX_OPTIONS or max(map(len, paths)) >= MAX_VALUE_BYTES:
                self._set_open(paths)
                continue
            self.expanded.add(u)
            for b in np.flatnonzero(self.trans[u] >= 0):
                v = int(self.trans[u, b])
                grown = [p + bytes([b]) for p in paths]
                if v == u or v == s:  # a loop: not a closed value
                    self._set_open(grown)
                else:
                    self._reach(v, grown)  # again, if it was expanded already (then its paths grow)
        self.paths = {}  # over the limits: no choice

    def result(self) -> tuple[list[bytes], int]:
        """(closed paths, the state where they meet); ([], -1) when the walk found no meeting point."""
        live = {u: ps for u, ps in ((u, self._live(ps)) for u, ps in self.paths.items()) if ps}
        if len(live) != 1:
            return [], -1
        (join, paths), = live.items()
        if join in self.expanded:  # met where some paths went on before: no single meeting point
            return [], -1
        return paths, join


STRUCTURAL = b",}] \t\n\r"  # bytes that end a JSON value
VALUE_START = b":[, \t\n\r"  # bytes that come right before a JSON value


def _next_bytes(trans: np.ndarray, state: int) -> bytes:
    return bytes(np.flatnonzero(trans[state] >= 0).tolist())


_ENTERING: "weakref.WeakKeyDictionary[TokenFSM, np.ndarray]" = weakref.WeakKeyDictionary()


def _entering_bytes(fsm: TokenFSM, state: int) -> bytes:
    """The bytes on which some transition enters `state` (empty for the start state)."""
    table = _ENTERING.get(fsm)
    if table is None:  # [states, 256] bool, once per FSM
        trans = fsm.dfa.trans
        table = np.zeros(trans.shape, dtype=bool)
        for b in range(trans.shape[1]):
            col = trans[:, b]
            table[col[col >= 0], b] = True
        _ENTERING[fsm] = table
    return bytes(np.flatnonzero(table[state]).tolist())


def _whole_values(fsm: TokenFSM, paths: list[bytes], join: int, before: bytes, mixed: bool) -> list[bytes] | None:
    """The closed paths as whole values: where they meet may lie inside the values (`tru`/`fals`
    meet before the `e` they share), so the bytes the grammar forces next are added until each
    one is a whole value (see _value_level); None if they never are."""
    forced = fsm.forced_bytes(join)
    for k in range(len(forced) + 1):
        state = fsm.dfa.run(forced[:k], join)
        grown = [p + forced[:k] for p in paths]
        after, then = _next_bytes(fsm.dfa.trans, state), fsm.forced_bytes(state)
        if all(_value_level(p, before, after, then, mixed) for p in grown):
            return grown
    return None


def _value_level(path: bytes, before: bytes, after: bytes, forced: bytes, mixed: bool) -> bool:
    """Whether a closed path is a whole value: a JSON value after a value-start byte (against an
    open value: not a bare number, which is as likely a longer number), or the whole contents of a
    string, right after its opening quote and closed by the quote; ended by structural bytes in
    the path or next. This keeps out pieces of values: escapes, date digits, fractions."""
    core = path.rstrip(STRUCTURAL)
    ended = len(core) < len(path) or (bool(after) and all(b in STRUCTURAL for b in after))
    value = _json(core)
    if value is not _NOT_JSON and ended and core and all(b in VALUE_START for b in before):
        return not (mixed and isinstance(value, (int, float)))
    if mixed or before != b'"':
        return False
    if ended and core.endswith(b'"') and _json(b'"' + core) is not _NOT_JSON:
        return True  # an enum's string, closing quote included (the opening one came before)
    closes = forced[:1] == b'"' and (len(forced) == 1 or forced[1] in STRUCTURAL)
    return closes and _json(b'"' + core + b'"') is not _NOT_JSON  # the grammar closes the string next


_NOT_JSON = object()


def _json(data: bytes):
    try:
        return json.loads(data)
    except ValueError:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return _NOT_JSON


def _spell(fsm: TokenFSM, s: int, data: bytes) -> ValueOption | None:
    """Longest-match tokens spelling `data` from state s, each allowed where it is placed."""
    tokens, i, cur = [], 0, s
    while i < len(data):
        for size in range(min(fsm.vocab.longest, len(data) - i), 0, -1):
            tid = fsm.vocab.id_for_bytes(data[i : i + size])
            if tid is not None:
                nxt = fsm.next_state(cur, tid)
                if nxt >= 0:
                    break
        else:
            return None
        tokens.append(tid)
        i, cur = i + size, nxt
    return ValueOption(text=data, tokens=tuple(tokens))


def _open_mask(fsm: TokenFSM, s: int, first_bytes: set[int]) -> torch.Tensor | None:
    entry = fsm.state(s)
    starts = np.array([fsm.vocab.token_bytes[t][0] for t in entry.ids], dtype=np.int64)
    ids = entry.ids[np.isin(starts, list(first_bytes))]
    if not len(ids):
        return None
    mask = torch.zeros(fsm.vocab.vocab_size, dtype=torch.bool)
    mask[torch.from_numpy(ids.astype(np.int64))] = True
    return mask
