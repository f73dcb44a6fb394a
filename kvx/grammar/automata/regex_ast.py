"""A small byte-level regex AST: the common language of every piece of the schema compiler.

Leaves are byte classes (a 256-bit int mask), literal texts or embedded DFAs; inner nodes are concatenation,
alternation, bounded repetition and `Graph`, an NFA-shaped node whose edges carry sub-ASTs (the
object builder uses it so a member's automaton appears once although several paths reach it).
Nodes are immutable and may be shared between trees.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

ALL_BYTES = (1 << 256) - 1


@dataclass(frozen=True)
class Bytes:
    mask: int  # bit b set <=> byte b matches; 0 matches nothing


@dataclass(frozen=True)
class Text:
    """A literal of two or more bytes: one leaf, where a byte class per byte cost the walk, the
    composer's shapes and its chains a big-int mask each (a median schema spells ~70 keys)."""

    data: bytes


@dataclass(frozen=True)
class Seq:
    items: tuple


@dataclass(frozen=True)
class Alt:
    items: tuple


@dataclass(frozen=True)
class Repeat:
    item: "Node"
    lo: int
    hi: Optional[int]  # None = unbounded


@dataclass(frozen=True, eq=False)
class Embed:
    dfa: object  # a trimmed DFA (kvx.grammar.automata.dfa) or its byte-class form (cdfa.CDFA)


@dataclass(frozen=True, eq=False)
class Graph:
    """States 0..num_states-1, start 0; edges (src, dst, node-or-None for epsilon)."""

    num_states: int
    edges: tuple
    finals: tuple


Node = Union[Bytes, Text, Seq, Alt, Repeat, Embed, Graph]
EMPTY = Seq(())  # matches the empty string
NOTHING = Alt(())  # matches nothing


def byte_set(*values: int) -> Bytes:
    mask = 0
    for v in values:
        mask |= 1 << v
    return Bytes(mask)


def byte_range(lo: int, hi: int) -> Bytes:
    """Bytes lo..hi inclusive."""
    if hi < lo:
        return Bytes(0)
    return Bytes(((1 << (hi - lo + 1)) - 1) << lo)


def chars(text: str) -> Bytes:
    """A class of ASCII characters, e.g. chars('0123456789')."""
    return byte_set(*text.encode())


_BYTES = tuple(Bytes(1 << b) for b in range(256))  # one leaf per byte, shared (nodes are immutable)


def lit(data: bytes | str) -> Node:
    if isinstance(data, str):
        data = data.encode()
    if len(data) == 1:
        return _BYTES[data[0]]
    return Text(data) if data else EMPTY


def literal_bytes(node: Node) -> bytes | None:
    """The one word of a literal leaf (a Text, or a class of one byte); None for anything else."""
    kind = node.__class__
    if kind is Text:
        return node.data
    if kind is Bytes and node.mask and not node.mask & (node.mask - 1):
        return _BYTE_TEXT[node.mask.bit_length() - 1]
    return None


_BYTE_TEXT = tuple(bytes([b]) for b in range(256))


def is_nothing(node: Node) -> bool:
    return (isinstance(node, Alt) and not node.items) or (isinstance(node, Bytes) and node.mask == 0)


def seq(*items: Node) -> Node:
    """The concatenation, flattened; neighbouring literals are one Text (a key, its quotes and colon),
    their bytes joined once (a long pattern literal is not copied once per byte)."""
    flat = []
    run = []  # (node, bytes) of the literals at the end, joined when something else follows
    for it in items:  # is_nothing and the class tests inline: the walk joins a few hundred a schema
        kind = it.__class__
        if kind is Seq:
            parts = it.items
        elif (kind is Alt and not it.items) or (kind is Bytes and not it.mask):
            return NOTHING
        else:
            parts = (it,)
        for part in parts:
            data = literal_bytes(part)
            if data is not None:
                run.append((part, data))
                continue
            if run:
                flat.append(_joined(run))
                run = []
            flat.append(part)
    if run:
        flat.append(_joined(run))
    return EMPTY if not flat else flat[0] if len(flat) == 1 else Seq(tuple(flat))


def _joined(run: list) -> Node:
    """One literal for a run of them (a lone one is kept as it is)."""
    return run[0][0] if len(run) == 1 else Text(b"".join(data for _, data in run))


def alt(*items: Node) -> Node:
    flat = []
    for it in items:
        kind = it.__class__
        if kind is Alt:
            flat.extend(it.items)
        elif not (kind is Bytes and not it.mask):
            flat.append(it)
    masks = [it for it in flat if it.__class__ is Bytes]
    if len(masks) > 1:  # merge single-byte alternatives into one class
        merged = 0
        for m in masks:
            merged |= m.mask
        flat = [Bytes(merged)] + [it for it in flat if it.__class__ is not Bytes]
    return flat[0] if len(flat) == 1 else Alt(tuple(flat))


def rep(item: Node, lo: int, hi: Optional[int]) -> Node:
    if hi is not None and hi < lo:
        return NOTHING
    if is_nothing(item):
        return EMPTY if lo == 0 else NOTHING
    if hi == 0:
        return EMPTY
    if lo == hi == 1:
        return item
    return Repeat(item, lo, hi)


def opt(item: Node) -> Node:
    return rep(item, 0, 1)


def star(item: Node) -> Node:
    return rep(item, 0, None)


def plus(item: Node) -> Node:
    return rep(item, 1, None)
