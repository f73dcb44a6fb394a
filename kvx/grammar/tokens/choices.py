"""Closed choices: the complete values the grammar allows at a point, when they are few.

Where a schema allows a small set of whole values (an enum, true/false, a const per anyOf branch,
small bounded integers) the decoder can score each value as a whole instead of trusting the first
token. Where it allows a literal (null, true, false) or an open value (a free string, a number),
it can weigh the literal against the open rest. This module finds such points on the pushdown
program, byte by byte through calls and returns (stacks.py's walk_bytes), from a configuration:

Walk forward from the configuration c, keeping for each reached configuration the byte paths from
c to it, and always expand the reached one farthest from acceptance (in bytes), so a configuration
every path must pass through tends to be reached on every path before it is expanded: when the
reached ones shrink to one, its paths are the closed values. One reached again after its expansion
is expanded again with the new paths; a branch that loops (a free string, digits) ends up too long
or too many and is "open": its first bytes are set aside and the rest of the walk goes on, as does
one that could end the document. Whatever the order, the result is exact: every byte string from c
either starts with an open byte or is one of the paths followed by the meeting configuration's
language, because every other reached configuration was expanded on every byte. The walk gives up
(no choice) at its limits.

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

from kvx.grammar.tokens.budget import INF
from kvx.grammar.tokens.stacks import TokenPDA

MAX_OPTIONS = 64  # closed values at most at one point
MAX_VALUE_BYTES = 96  # bytes of one closed value at most
MAX_EXPANSIONS = 4096  # configurations one walk may expand
PointKey = tuple  # a decision point: its stacks spelled out (state, return states...), stable across processes


@dataclass(frozen=True)
class ValueOption:
    text: bytes  # the value's bytes from the choice point to where every option meets
    tokens: tuple[int, ...]  # a spelling (longest match), each token allowed after the ones before


@dataclass(frozen=True)
class ValueChoice:
    """The complete values allowed at one point of the grammar, and the tokens that start an open value."""

    key: PointKey  # the same point of the schema has the same key in every record and every process
    options: tuple[ValueOption, ...]
    open_mask: torch.Tensor | None  # bool [vocab]: allowed tokens that start an open value (None: closed)

    @property
    def num_alternatives(self) -> int:
        return len(self.options) + (self.open_mask is not None)


class _Program:
    """Byte-level moves over configurations, with the tables the walk needs (one per TokenPDA)."""

    def __init__(self, pda: TokenPDA):
        self.pda = pda
        prog = pda.program
        self.table = prog.table  # over the program's byte classes
        self.found: dict[int, ValueChoice | None] = {}
        self._steps: dict[tuple[int, int], int] = {}
        self._byte_dist: dict[int, int] = {}
        self._live: dict[int, bytes] = {}
        self.entering = self._entering_table()
        first = np.full(pda.vocab.vocab_size, -1, dtype=np.int64)
        for t, tb in enumerate(pda.vocab.token_bytes):
            if tb:
                first[t] = tb[0]
        self.first_byte = first

    def _entering_table(self) -> np.ndarray:
        """[states, 256] bool: bytes on which some move enters a state (a return state: the bytes
        that complete its callee)."""
        prog, moves = self.pda.program, self.table
        table = np.zeros(moves.shape, dtype=bool)  # by class, spread over the bytes at the end
        for c in range(moves.shape[1]):
            col = moves[:, c]
            table[col[col >= 0], c] = True
        finals_of: dict[int, np.ndarray] = {}
        for s in np.flatnonzero(np.diff(prog.call_ptr) > 0).tolist():
            for callee, ret in prog.calls(s):
                if callee not in finals_of:
                    finals_of[callee] = table[prog.final & (prog.rule_of == callee)].any(axis=0)
                table[ret] |= finals_of[callee]
        return table[:, prog.classes]

    def stacks(self, cid: int) -> tuple:
        return self.pda.configs[cid].stacks

    def key(self, cid: int) -> PointKey:
        pda, out = self.pda, []
        for s, node in self.stacks(cid):
            spelled = [s]
            while node:
                spelled.append(pda.node_ret[node])
                node = pda.node_parent[node]
            out.append(tuple(spelled))
        return tuple(out)

    def accepting(self, cid: int) -> bool:
        return self.pda.accepting(cid)

    def byte_dist(self, cid: int) -> int:
        """Fewest bytes to finish the document from cid (over its stacks)."""
        hit = self._byte_dist.get(cid)
        if hit is None:
            pda, dist, best = self.pda, self.pda.byte_dist, int(INF)
            for s, node in self.stacks(cid):
                d = int(dist[s])
                while node:
                    d += int(dist[pda.node_ret[node]])
                    node = pda.node_parent[node]
                best = min(best, d)
            hit = self._byte_dist[cid] = best
        return hit

    def live_bytes(self, cid: int) -> bytes:
        hit = self._live.get(cid)
        if hit is None:
            first = np.flatnonzero(self.pda.first_bytes(self.stacks(cid))).tolist()
            hit = self._live[cid] = bytes(b for b in first if self.step(cid, b) >= 0)
        return hit

    def step(self, cid: int, b: int) -> int:
        """The configuration after byte b, or -1."""
        hit = self._steps.get((cid, b))
        if hit is None:
            hit = self._steps[(cid, b)] = self.pda.config(self.pda.walk_bytes(list(self.stacks(cid)), bytes([b])))
        return hit

    def run(self, cid: int, data: bytes) -> int:
        for b in data:
            if cid < 0:
                break
            cid = self.step(cid, b)
        return cid

    def entering_bytes(self, cid: int) -> bytes:
        rows = np.zeros(256, dtype=bool)
        for s, _ in self.stacks(cid):
            rows |= self.entering[s]
        return bytes(np.flatnonzero(rows).tolist())

    def same(self, a: int, b: int) -> bool:
        """Whether two configurations have the same future: stacks with equal frames below and top
        states proven equivalent (the compiler's DFAs can hold such twins; the walk must see them
        as one meeting point)."""
        sa, sb = self.stacks(a), self.stacks(b)
        if len(sa) != len(sb) or [n for _, n in sa] != [n for _, n in sb]:
            return False
        return all(self._same_state(x, y) for (x, _), (y, _) in zip(sa, sb))

    def _same_state(self, a: int, b: int, limit: int = 64) -> bool:
        prog = self.pda.program
        todo, seen = [(a, b)], set()
        while todo:
            a, b = todo.pop()
            if a == b or (a, b) in seen:
                continue
            seen.add((a, b))
            ra, rb = self.table[a], self.table[b]
            if (len(seen) > limit or prog.final[a] != prog.final[b] or not np.array_equal(ra >= 0, rb >= 0)
                    or prog.calls(a) != prog.calls(b)):
                return False
            diff = np.flatnonzero(ra != rb)
            todo.extend(zip(ra[diff].tolist(), rb[diff].tolist()))
        return True


_PROGRAMS: "weakref.WeakKeyDictionary[TokenPDA, _Program]" = weakref.WeakKeyDictionary()


def value_choice(pda: TokenPDA, cid: int) -> ValueChoice | None:
    """The choice at configuration `cid` (cached per automaton), or None where there is none to rank."""
    prog = _PROGRAMS.get(pda)
    if prog is None:
        prog = _PROGRAMS[pda] = _Program(pda)
    if cid not in prog.found:
        prog.found[cid] = _find(prog, cid)
    return prog.found[cid]


def _find(prog: _Program, c: int) -> ValueChoice | None:
    if prog.accepting(c):
        return None
    before = prog.entering_bytes(c)  # first: cheaper than the moves, and most points are inside values
    if not (before == b'"' or all(b in VALUE_START for b in before)) or len(prog.live_bytes(c)) < 2:
        return None  # inside a value (a string's contents, a number): no whole value starts here
    walk = _Walk(prog)
    walk.run(c)
    closed, join = walk.result()
    if not closed or (not walk.open_first and len(closed) < 2):
        return None
    closed = _whole_values(prog, closed, join, before, bool(walk.open_first))
    if closed is None:
        return None
    options = tuple(o for o in (_spell(prog.pda, c, p) for p in sorted(closed)) if o is not None)
    open_mask = _open_mask(prog, c, walk.open_first) if walk.open_first else None
    if len(options) + (open_mask is not None) < 2:
        return None
    return ValueChoice(key=prog.key(c), options=options, open_mask=open_mask)


class _Walk:
    """The forward walk of the module docstring."""

    def __init__(self, prog: _Program):
        self.prog = prog
        self.paths: dict[int, list[bytes]] = {}  # reached, not yet expanded configuration -> paths to it
        self.expanded: set[int] = set()
        self.open_first: set[int] = set()
        self._heap: list[tuple[int, int, int]] = []

    def _reach(self, cid: int, paths: list[bytes]) -> None:
        dist = self.prog.byte_dist
        if cid not in self.paths:
            cid = next((u for u in self.paths if dist(u) == dist(cid) and self.prog.same(u, cid)), cid)
        if cid not in self.paths:
            self.paths[cid] = []
            # farthest from the end first; on a tie the shorter paths first (a value's own bytes
            # before what follows the values: `0` goes on to `0.` before `null` to `null,`)
            heapq.heappush(self._heap, (-min(dist(cid), int(INF)), min(map(len, paths)), cid))
        self.paths[cid].extend(paths)

    def _set_open(self, paths: list[bytes]) -> None:
        self.open_first.update(p[0] for p in paths)

    def _live(self, paths: list[bytes]) -> list[bytes]:
        return [p for p in paths if p[0] not in self.open_first]

    def _settled(self, paths: list[bytes]) -> bool:
        """All closed paths meet in one place: where they meet unless an open branch was set aside;
        then the closed ones (a lone `nul`, say) go on until they are whole JSON values."""
        return not self.open_first or all(_json(p.rstrip(STRUCTURAL)) is not _NOT_JSON for p in paths)

    def _expand(self, u: int, paths: list[bytes], start: int) -> None:
        for b in self.prog.live_bytes(u):
            v = self.prog.step(u, b)
            grown = [p + bytes([b]) for p in paths]
            if v == u or v == start:  # a loop: not a closed value
                self._set_open(grown)
            else:
                self._reach(v, grown)  # again, if it was expanded already (then its paths grow)

    def run(self, c: int) -> None:
        self.expanded.add(c)  # c itself is not expanded again: coming back to it is a loop
        self._expand(c, [b""], c)
        for _ in range(MAX_EXPANSIONS):
            if not self._heap:
                break
            live = {u: ps for u, ps in ((u, self._live(ps)) for u, ps in self.paths.items()) if ps}
            if not live or (len(live) == 1 and self._settled(next(iter(live.values())))):
                return
            _, _, u = heapq.heappop(self._heap)
            paths = self._live(self.paths.pop(u))
            if not paths:
                continue
            if self.prog.accepting(u) or len(paths) > MAX_OPTIONS or max(map(len, paths)) >= MAX_VALUE_BYTES:
                self._set_open(paths)
                continue
            self.expanded.add(u)
            self._expand(u, paths, c)
        self.paths = {}  # over the limits: no choice

    def result(self) -> tuple[list[bytes], int]:
        """(closed paths, the configuration where they meet); ([], -1) when they never meet."""
        live = {u: ps for u, ps in ((u, self._live(ps)) for u, ps in self.paths.items()) if ps}
        if len(live) != 1:
            return [], -1
        (join, paths), = live.items()
        if join in self.expanded:  # met where some paths went on before: no single meeting point
            return [], -1
        return paths, join


STRUCTURAL = b",}] \t\n\r"  # bytes that end a JSON value
VALUE_START = b":[, \t\n\r"  # bytes that come right before a JSON value


def _whole_values(prog: _Program, paths: list[bytes], join: int, before: bytes, mixed: bool) -> list[bytes] | None:
    """The closed paths as whole values: where they meet may lie inside the values (`tru`/`fals`
    meet before the `e` they share), so the bytes the grammar forces next are added until each
    one is a whole value (see _value_level); None if they never are."""
    forced = prog.pda.forced_bytes(join)
    for k in range(len(forced) + 1):
        cid = prog.run(join, forced[:k])
        if cid < 0:
            return None
        grown = [p + forced[:k] for p in paths]
        after, then = prog.live_bytes(cid), prog.pda.forced_bytes(cid)
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


def _spell(pda: TokenPDA, c: int, data: bytes) -> ValueOption | None:
    """Longest-match tokens spelling `data` from configuration c, each allowed where it is placed."""
    tokens, i, cur = [], 0, c
    while i < len(data):
        for size in range(min(pda.vocab.longest, len(data) - i), 0, -1):
            tid = pda.vocab.id_for_bytes(data[i : i + size])
            if tid is not None:
                nxt = pda.next(cur, tid)
                if nxt >= 0 and pda.dist(nxt) < INF:
                    break
        else:
            return None
        tokens.append(tid)
        i, cur = i + size, nxt
    return ValueOption(text=data, tokens=tuple(tokens))


def _open_mask(prog: _Program, c: int, first_bytes: set[int]) -> torch.Tensor | None:
    allowed = prog.pda.mask(c).numpy()
    ids = np.flatnonzero(allowed & np.isin(prog.first_byte, sorted(first_bytes)))
    if not len(ids):
        return None
    mask = torch.zeros(prog.pda.vocab.vocab_size, dtype=torch.bool)
    mask[torch.from_numpy(ids.astype(np.int64))] = True
    return mask
