"""A compressed trie of prompts at block granularity, read back in depth-first order.

Prompts are keyed by bytes, `unit` bytes per block (a token-id prompt: its full blocks as int32,
4 * block_size bytes a block). Only full blocks are shared, as in the engine's radix cache. An edge
holds a run of blocks (split when a later prompt diverges inside it), so the trie has at most two
nodes per prompt whatever the prompt lengths, and a shared prefix is stored once.

`walk()` yields the prompts in depth-first order with the blocks each shares with the previous one:
a contiguous run of that order is a union of subtrees, and its prefill is exactly
prompt(first) + sum(prompt(k) - shared(k)) over the rest (what the planner balances).
"""
from __future__ import annotations

from array import array
from typing import Iterator


class _Node:
    __slots__ = ("label", "children", "items")

    def __init__(self, label: bytes):
        self.label = label  # the blocks on the edge from the parent
        self.children: dict[bytes, _Node] | None = None  # first block of the child's label -> child
        self.items: array | None = None  # prompts whose full blocks end exactly here


class PrefixTrie:
    def __init__(self, unit: int):
        self.unit = unit
        self.root = _Node(b"")

    def insert(self, key: bytes, item: int) -> None:
        """Add prompt `item` whose full blocks are `key` (len(key) a multiple of unit)."""
        unit, node, pos, end = self.unit, self.root, 0, len(key)
        while pos < end:
            first = key[pos:pos + unit]
            children = node.children
            child = children.get(first) if children is not None else None
            if child is None:
                child = _Node(key[pos:])
                if children is None:
                    node.children = children = {}
                children[first] = child
                node, pos = child, end
                break
            label = child.label
            if key.startswith(label, pos):  # the common case: the whole edge matches (one memcmp)
                node, pos = child, pos + len(label)
                continue
            shared = _common_units(label, key, pos, unit)
            mid = _Node(label[:shared])
            child.label = label[shared:]
            mid.children = {child.label[:unit]: child}
            children[first] = mid
            node, pos = mid, pos + shared
        if node.items is None:
            node.items = array("q")
        node.items.append(item)

    def walk(self) -> Iterator[tuple[int, int]]:
        """(item, blocks shared with the previous item) in depth-first order, siblings by key."""
        unit = self.unit
        low = 0  # shallowest depth passed since the last item: the lowest common ancestor
        stack: list[tuple[_Node, int]] = [(self.root, 0)]
        while stack:
            node, parent_depth = stack.pop()
            low = min(low, parent_depth)
            depth = parent_depth + len(node.label) // unit
            if node.items is not None:
                for item in node.items:
                    yield item, low
                    low = depth
            if node.children:
                for key in sorted(node.children, reverse=True):
                    stack.append((node.children[key], depth))


def _common_units(label: bytes, key: bytes, pos: int, unit: int) -> int:
    """Bytes (whole blocks) label and key[pos:] share; at least one block (the child's first)."""
    lo, hi = 1, min(len(label), len(key) - pos) // unit  # blocks: lo shared, hi an upper bound
    while lo < hi:  # binary search with memcmp-backed slice compares
        mid = (lo + hi + 1) // 2
        if label[:mid * unit] == key[pos:pos + mid * unit]:
            lo = mid
        else:
            hi = mid - 1
    return lo * unit
