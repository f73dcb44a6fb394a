"""The pushdown automaton: the hand-off between the schema compiler and the token layer.

A schema compiles to *rules* (the document, every object/array shape, large strings), each a byte DFA
whose body may *call* other rules: a nested container is one call edge, not a copy of its automaton,
so depth and recursion are unbounded and every shape is compiled once. While a rule body is
composed, a call is spelled as three bytes that never occur in UTF-8 JSON text (0xFF, then the rule
id, high byte first); `link` reads those edges back out of the composed DFAs and concatenates all
rules into one state table. The id is written in base 255, so neither digit is 0xFF either.

Semantics (a recursive transition network): at state s, byte b either moves inside the rule
(trans[s, b]) or, for a call edge (s, C, r), starts rule C (trans[start[C], b]) with r pushed as the
return state. A rule other than the root is complete in a `final` state, which has no way out: the
frame is popped and its caller resumes at r. The document is complete when only the root frame is
left and it is in a final (accepting) state. Several edges may fit one byte (anyOf branches calling
different rules): the runtime then follows every alternative, as a set of stacks.

Invariants `link` guarantees: every state is reachable from the root's start and can complete its
rule, every call edge's callee can complete (unproductive rules are cut), non-root final states have
no transitions and no calls.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from kvx.grammar.automata import deadline, graph_kernels
from kvx.grammar.automata import regex_ast as ra
from kvx.grammar.automata.cdfa import CDFA, column_classes, flat_tables, reach
from kvx.grammar.automata.subset_kernel import LOOK_EVERY
from kvx.grammar.errors import TooLarge

CALL_BYTE = 0xFF  # not a UTF-8 byte: cannot clash with any JSON text
MAX_RULES = 255 * 255
MAX_STATES = 400_000  # all rules together (the token layer keeps a [states, 256] table)


def call_symbol(rule: int) -> ra.Node:
    """The byte spelling of a call of `rule` inside a rule body (removed again by `link`)."""
    if not 0 < rule < MAX_RULES:
        raise TooLarge(f"more than {MAX_RULES - 1} rules")
    return ra.lit(bytes([CALL_BYTE, rule // 255, rule % 255]))


@dataclass
class Program:
    table: np.ndarray  # [N, K] int32 over global states and byte classes, -1 = dead (call spellings removed)
    final: np.ndarray  # [N] bool: the state's rule is complete (root: the document is)
    rule_of: np.ndarray  # [N] int32: the rule each state belongs to
    rule_start: np.ndarray  # [R] int32: global start state of each rule (rule 0 = the document)
    call_ptr: np.ndarray  # [N + 1] int64: call edges of state s are call_ptr[s]:call_ptr[s + 1]
    call_rule: np.ndarray  # [M] int32: callee of each edge
    call_ret: np.ndarray  # [M] int32: state the caller resumes in
    classes: np.ndarray  # [256] int64: the class (column of `table`) of each byte

    @property
    def num_states(self) -> int:
        return int(self.table.shape[0])

    @cached_property
    def trans(self) -> np.ndarray:
        """[N, 256] int32: the table by byte, built on first use (tests and tools that read it by
        byte); the compiler and the token layer read `table` through `classes`, a quarter to a
        tenth of its size (a median program's [N, 256] table was 0.6 ms of its compile to write)."""
        return np.ascontiguousarray(self.table[:, self.classes])

    @property
    def num_rules(self) -> int:
        return int(self.rule_start.shape[0])

    @property
    def live_rules(self) -> int:
        """Rules the document can reach (ids of the others are kept, with start -1)."""
        return int((self.rule_start >= 0).sum())

    @property
    def start(self) -> int:
        return int(self.rule_start[0])

    def calls(self, s: int) -> list[tuple[int, int]]:
        a, b = int(self.call_ptr[s]), int(self.call_ptr[s + 1])
        return list(zip(self.call_rule[a:b].tolist(), self.call_ret[a:b].tolist()))

    @cached_property
    def pop_states(self) -> np.ndarray:
        """[N] bool: reaching the state completes a frame that must be popped (a final state of a
        non-root rule)."""
        return self.final & (self.rule_of != 0)

    @cached_property
    def call_starts(self) -> dict[int, list[tuple[int, int]]]:
        """Calling state -> its calls as (the callee's start state, the return state)."""
        return {s: [(int(self.rule_start[c]), r) for c, r in self.calls(s)]
                for s in np.flatnonzero(np.diff(self.call_ptr) > 0).tolist()}

    def step(self, s: int, b: int) -> list[tuple[int | None, int]]:
        """Moves on byte b from state s: (pushed return state or None, next state)."""
        out: list[tuple[int | None, int]] = []
        c = int(self.classes[b])
        t = int(self.table[s, c])
        if t >= 0:
            out.append((None, t))
        for start, ret in self.call_starts.get(s, ()):
            t = int(self.table[start, c])
            if t >= 0:
                out.append((ret, t))
        return out

    def run(self, data: bytes, stacks=None) -> set[tuple[int, ...]]:
        """Stacks (return states..., top state) after `data`, following every alternative."""
        current = {(self.start,)} if stacks is None else set(stacks)
        for b in data:
            nxt = set()
            for stack in current:
                for ret, t in self.step(stack[-1], b):
                    grown = stack[:-1] + ((ret,) if ret is not None else ()) + (t,)
                    while len(grown) > 1 and self.pop_states[grown[-1]]:
                        grown = grown[:-1]
                    nxt.add(grown)
            current = nxt
            if not current:
                break
        return current

    def accepts(self, data: bytes) -> bool:
        return any(len(st) == 1 and self.final[st[0]] for st in self.run(data))


@dataclass
class _Body:
    """One composed rule body over its byte classes, its call spellings turned into edges."""

    table: np.ndarray  # [n, K] int32 over the body's byte classes
    final: np.ndarray
    start: int
    classes: np.ndarray  # [256] class of each byte
    edges: np.ndarray  # [m, 3] (state, callee, return state), local state numbers

    def reach(self, forward: bool, seeds: np.ndarray, callees_ok: np.ndarray) -> np.ndarray:
        """States reachable from `seeds` (forward) or co-reachable to them, over bytes and over the
        call edges whose callee is ok (a call goes from its state to its return state)."""
        rows, cols = np.nonzero(self.table >= 0)
        usable = self.edges[callees_ok[self.edges[:, 1]]]
        src = np.concatenate([rows, usable[:, 0]]).astype(np.int64)
        dst = np.concatenate([self.table[rows, cols], usable[:, 2]]).astype(np.int64)
        n = len(self.final)
        return reach(n, src, dst, seeds) if forward else reach(n, dst, src, seeds)


def _body(c: CDFA) -> _Body:
    """Read the call spellings (0xFF, hi, lo) of a composed rule body back out as edges, and drop
    the states that only spelled them."""
    call = int(c.cob[CALL_BYTE])  # a class of its own when there are calls: no real byte moves with it
    table = np.ascontiguousarray(c.trans, dtype=np.int32).copy()
    edges, spelling = _call_edges(table, c.cob, call)
    body = _Body(table, c.accepting.astype(bool), int(c.start), c.cob.astype(np.int64),
                 np.asarray(edges, dtype=np.int64).reshape(-1, 3))
    if spelling:
        table[:, call] = -1
        rows = np.ones(len(table), dtype=bool)
        rows[list(spelling)] = False
        entered = np.zeros(len(table) + 1, dtype=bool)
        entered[table[rows].ravel()] = True  # -1 lands on the extra slot
        entered[body.start] = True
        entered[body.edges[:, 2]] = True
        body = _keep(body, entered[:-1] | rows)
    return body


def _call_edges(table: np.ndarray, cob: np.ndarray, call: int) -> tuple[list, set]:
    """link_kernel._call_edges's edges in the same order (and read_body's states)."""
    bytes_of = lambda k: np.flatnonzero(cob == k).tolist()
    edges, spelling = [], set()
    for s in np.flatnonzero(table[:, call] >= 0).tolist():
        m1 = int(table[s, call])
        spelling.add(m1)
        for k1 in np.flatnonzero(table[m1] >= 0).tolist():
            m2 = int(table[m1, k1])
            spelling.add(m2)
            for k2 in np.flatnonzero(table[m2] >= 0).tolist():
                ret = int(table[m2, k2])
                edges += [(s, hi * 255 + lo, ret) for hi in bytes_of(k1) for lo in bytes_of(k2)]
    return edges, spelling


def _keep(b: _Body, keep: np.ndarray) -> _Body:
    """The body restricted to the `keep` states (transitions into the others removed)."""
    remap = np.full(len(keep) + 1, -1, dtype=np.int64)
    remap[np.flatnonzero(keep)] = np.arange(int(keep.sum()))
    edges = b.edges[keep[b.edges[:, 0]] & keep[b.edges[:, 2]]]
    return _Body(remap[b.table[keep]].astype(np.int32), b.final[keep], int(remap[b.start]), b.classes,
                 np.stack([remap[edges[:, 0]], edges[:, 1], remap[edges[:, 2]]], axis=1).reshape(-1, 3))


def link(composed: list[CDFA | None]) -> Program | None:
    """One Program from the composed rule bodies (index = rule id, 0 = the document; None = a rule
    with no word). Calls of rules that cannot complete are cut, with every state that needed them;
    rules the document never reaches are dropped. None if the document itself cannot complete.
    With numba, in one compiled call (link_kernel.link_program: the same program); else below."""
    compiled = graph_kernels.kernels()
    if compiled is not None:
        return _link_compiled(compiled.link, composed)
    read: dict[int, _Body] = {}  # a body composed once for several rules is read once
    for d in composed:
        deadline.check()
        if d is not None and id(d) not in read:
            read[id(d)] = _body(d)
    n_rules = len(composed)
    bodies = [None if d is None else read[id(d)] for d in composed]
    for b in read.values():
        b.edges = b.edges[b.edges[:, 1] < n_rules]
    bodies = _merge_equal_rules(bodies)
    ok = _productive_rules(bodies)
    if not ok[0]:
        return None
    for r, b in enumerate(bodies):
        if b is not None and ok[r] and not ok[b.edges[:, 1]].all():
            bodies[r] = _cut(b, ok)
    used = _called_from_root(bodies, ok)
    deadline.check()
    # the cap is on the table the program holds, after the merging: counted per rule, a body composed
    # once for many rules counted each time (ruff's pyproject schema: 929,745 states for 46,860)
    if sum(len(b.final) for r, b in enumerate(bodies) if used[r]) > MAX_STATES:
        raise TooLarge(f"more than {MAX_STATES} states in all rules")
    return _concatenate([b if used[r] else None for r, b in enumerate(bodies)])


def _link_compiled(kernel, composed: list[CDFA | None]) -> Program | None:
    index: dict[int, int] = {}  # a body composed once for several rules is read once
    distinct: list[CDFA] = []
    rule_body = []
    for d in composed:
        if d is not None and id(d) not in index:
            index[id(d)] = len(distinct)
            distinct.append(d)
        rule_body.append(-1 if d is None else index[id(d)])
    if rule_body[0] < 0:
        return None
    status, table, final, rule_of, rule_start, call_ptr, call_rule, call_ret, classes = kernel(
        *flat_tables(distinct), np.array([d.start for d in distinct], dtype=np.int64),
        np.array(rule_body, dtype=np.int64), CALL_BYTE, MAX_STATES, LOOK_EVERY)
    deadline.raise_for_stop(status, MAX_STATES, "states in all rules")
    if status == 1:
        return None
    return Program(table=table, final=final, rule_of=rule_of, rule_start=rule_start, call_ptr=call_ptr,
                   call_rule=call_rule, call_ret=call_ret, classes=classes)


def _merge_equal_rules(bodies: list) -> list:
    """Rules with equal bodies calling equal rules are one rule: each class keeps its first rule, the
    others are dropped (None) and every call goes to the kept one. Classes are refined from equal
    tables by their call edges (state, callee's class, return state), as Moore refines states, so
    equal recursive rules merge too. The document (rule 0) stays apart: a callee's final states may
    not continue."""
    sizes: dict[tuple, list] = {}  # first by size (no copy of a table), then by content where sizes meet
    for r, b in enumerate(bodies):
        key = ("rule", r) if b is None or r == 0 else (len(b.final), b.start, len(b.edges), int(b.final.sum()))
        sizes.setdefault(key, []).append(r)
    if len(sizes) == len(bodies):  # no two tables alike: nothing to merge
        return bodies
    tables: dict[tuple, int] = {}
    contents: dict[int, tuple] = {}  # per body object: rules composed alike share one
    cls = np.empty(len(bodies), dtype=np.int64)
    for key, rules in sizes.items():
        for r in rules:
            if len(rules) > 1 and id(bodies[r]) not in contents:
                contents[id(bodies[r])] = _content(bodies[r])
            cls[r] = tables.setdefault(key if len(rules) == 1 else (key, *contents[id(bodies[r])]), len(tables))
    count = len(tables)
    # every body's call edges in one table (rule, state, callee, return), sorted once a round
    calling = [(r, b.edges) for r, b in enumerate(bodies) if b is not None and len(b.edges)]
    calls_of = np.zeros((0, 4), dtype=np.int64)
    if calling:
        owner = np.repeat(np.array([r for r, _ in calling], dtype=np.int64), [len(e) for _, e in calling])
        calls_of = np.column_stack([owner, np.concatenate([e for _, e in calling]).astype(np.int64, copy=False)])
    bounds = np.searchsorted(calls_of[:, 0], np.arange(len(bodies) + 1)).tolist()  # rules come in order
    while True:
        deadline.check()
        refined: dict[tuple, int] = {}
        new = np.empty_like(cls)
        callee = cls[calls_of[:, 2]]
        order = np.lexsort((calls_of[:, 3], callee, calls_of[:, 1], calls_of[:, 0]))
        # per rule, its (state, callee's class, return) triples as rows of three blocks, as bytes
        triples = np.stack([calls_of[order, 1], callee[order], calls_of[order, 3]])
        for r, c in enumerate(cls.tolist()):
            new[r] = refined.setdefault((c, triples[:, bounds[r]:bounds[r + 1]].tobytes()), len(refined))
        cls = new
        if len(refined) == count:
            break
        count = len(refined)
    keep = np.full(count, -1, dtype=np.int64)
    for r in range(len(bodies)):
        if keep[cls[r]] < 0:
            keep[cls[r]] = r
    alias = keep[cls]
    if (alias == np.arange(len(bodies))).all():
        return bodies
    merged = []
    for r, b in enumerate(bodies):
        if b is None or alias[r] != r:
            merged.append(None)
            continue
        edges = b.edges.copy()
        edges[:, 1] = alias[edges[:, 1]]
        merged.append(_Body(b.table, b.final, b.start, b.classes, edges))
    return merged


def _content(b: _Body) -> tuple[bytes, bytes, bytes]:
    """A body's table over the classes of its columns, those classes and its final states: the call
    bytes' classes are empty columns once the calls are read, merged here, so equal bodies that call
    other rule ids compare equal."""
    reps, of_class = column_classes(b.table)
    return np.ascontiguousarray(b.table[:, reps]).tobytes(), of_class[b.classes].tobytes(), b.final.tobytes()


def _productive_rules(bodies: list) -> np.ndarray:
    """Rules whose start can reach a final state, calling only rules that can (least fixpoint)."""
    ok = np.zeros(len(bodies), dtype=bool)
    callees = [() if b is None else sorted(set(b.edges[:, 1].tolist())) for b in bodies]
    callers: dict[int, set] = {}
    for r, called in enumerate(callees):
        for callee in called:
            callers.setdefault(callee, set()).add(r)
    # callees first; a rule is looked at again only when one of its callees is found to complete
    queue = deque(r for r in _callees_first(callees) if bodies[r] is not None)
    queued = set(queue)
    while queue:
        r = queue.popleft()
        queued.discard(r)
        b = bodies[r]
        if ok[r]:
            continue
        # a body is trimmed with its calls counted as bytes: once all its callees can complete, it
        # can; else (recursion, or a call of a rule that cannot complete) search its graph over the
        # calls of rules that can
        if all(ok[c] for c in callees[r]) or b.reach(True, np.array([b.start]), ok)[b.final].any():
            ok[r] = True
            for c in callers.get(r, ()):
                if not ok[c] and c not in queued:
                    queued.add(c)
                    queue.append(c)
    return ok


def _callees_first(callees: list) -> list[int]:
    """Every rule after the rules it calls (depth-first post-order; a cycle is cut where it closes)."""
    order, done = [], [False] * len(callees)
    for root in range(len(callees)):
        if done[root]:
            continue
        done[root] = True
        stack = [(root, iter(callees[root]))]
        while stack:
            r, it = stack[-1]
            nxt = next((c for c in it if not done[c]), None)
            if nxt is None:
                stack.pop()
                order.append(r)
            else:
                done[nxt] = True
                stack.append((nxt, iter(callees[nxt])))
    return order


def _cut(b: _Body, ok: np.ndarray) -> _Body:
    """Drop calls of unproductive rules and the states that can no longer complete or be reached."""
    edges = b.edges[ok[b.edges[:, 1]]]
    b = _Body(b.table, b.final, b.start, b.classes, edges)
    live = b.reach(False, np.flatnonzero(b.final), ok)
    table = np.where((b.table >= 0) & live[np.maximum(b.table, 0)], b.table, -1)
    edges = edges[live[edges[:, 0]] & live[edges[:, 2]]]
    b = _Body(table, b.final, b.start, b.classes, edges)
    return _keep(b, b.reach(True, np.array([b.start]), ok) & live)


def _called_from_root(bodies: list, ok: np.ndarray) -> np.ndarray:
    used = np.zeros(len(bodies), dtype=bool)
    used[0] = True
    stack = [0]
    while stack:
        for callee in set(bodies[stack.pop()].edges[:, 1].tolist()):
            if ok[callee] and not used[callee]:
                used[callee] = True
                stack.append(callee)
    return used


def _concatenate(bodies: list) -> Program:
    """All bodies in one table: states renumbered by offset, columns over a joint byte partition."""
    sizes = np.array([0 if b is None else len(b.final) for b in bodies], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    present = [(r, b) for r, b in enumerate(bodies) if b is not None]
    reps, joint = column_classes(np.stack([b.classes for _, b in present]))  # numbered by their first byte
    table = np.empty((int(offsets[-1]), len(reps)), dtype=np.int32)
    for r, b in present:  # each body's rows straight into place, its classes read at the joint ones
        columns = b.classes[reps]
        t = np.where(b.table >= 0, b.table + offsets[r], -1).astype(np.int32)
        np.take(t, columns, axis=1, out=table[offsets[r] : offsets[r + 1]])
    final = np.concatenate([b.final for _, b in present])
    rule_of = np.repeat(np.arange(len(bodies), dtype=np.int32), sizes)
    rule_start = np.array([-1 if b is None else offsets[r] + b.start for r, b in enumerate(bodies)], dtype=np.int32)
    edges = np.concatenate([b.edges + np.array([offsets[r], 0, offsets[r]]) for r, b in present]).astype(np.int64)
    edges = edges[np.lexsort((edges[:, 1], edges[:, 0]))]
    counts = np.bincount(edges[:, 0], minlength=len(final))
    return Program(table=table, final=final, rule_of=rule_of, rule_start=rule_start,
                   call_ptr=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
                   call_rule=edges[:, 1].astype(np.int32), call_ret=edges[:, 2].astype(np.int32),
                   classes=joint.astype(np.int64))
