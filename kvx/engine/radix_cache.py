"""Radix tree over token ids at block granularity: the prefix cache.

Every node below the root is one full KV block, keyed by its block_size token ids; the path from
the root spells the prefix whose KV the block holds. Only full blocks are shared. A sequence holds
(ref-counts) every block of its table, so the ancestors of a held node are held too, and an idle
node (ref 0) has only idle descendants: evicting idle leaves, least recently used first, can
reclaim every idle block. Finished sequences' blocks stay in the tree until evicted.
Ref counts and the free list belong to the BlockManager: the tree only calls its public methods.
"""
from __future__ import annotations

import heapq
import itertools

from kvx.engine.block_manager import BlockManager


class Node:
    __slots__ = ("key", "block", "parent", "children", "last_access")

    def __init__(self, key: tuple[int, ...] | None, block: int, parent: "Node | None"):
        self.key = key
        self.block = block
        self.parent = parent
        self.children: dict[tuple[int, ...], Node] = {}
        self.last_access = 0


class RadixCache:
    def __init__(self, blocks: BlockManager):
        self.blocks = blocks
        self.bs = blocks.block_size
        blocks.cache = self
        self.root = Node(None, -1, None)
        self.node_of: dict[int, Node] = {}  # block id -> its node
        self.num_idle = 0  # cached blocks with ref count 0
        self._clock = itertools.count(1)  # logical time: deterministic LRU order
        self._lru: list[tuple[int, int, Node]] = []  # (last_access, tiebreak, node); lazily pruned
        self._tiebreak = itertools.count()
        self.evicted_blocks = 0

    @property
    def num_blocks(self) -> int:
        return len(self.node_of)

    def holds(self, block: int) -> bool:
        return block in self.node_of

    # --- lookups -----------------------------------------------------------------------------
    def match(self, tokens: list[int], max_blocks: int) -> tuple[list[int], Node]:
        """Blocks of the longest cached prefix of tokens (at most max_blocks) and the deepest node.

        The caller increfs the returned blocks before anything can evict them."""
        node, found, bs = self.root, [], self.bs
        now = next(self._clock)
        for i in range(max_blocks):
            child = node.children.get(tuple(tokens[i * bs : (i + 1) * bs]))
            if child is None:
                break
            child.last_access = now
            found.append(child.block)
            node = child
        return found, node

    def publish(self, node: Node, tokens: list[int], table: list[int], start: int, stop: int) -> Node:
        """Add table[start:stop] (full, computed blocks of tokens) below node; returns the new deepest node.

        node is the node of table[start - 1] (root when start == 0). When the tree already holds a
        block with the same prefix, table[i] is swapped for it (same KV content) and the duplicate
        is released, so a table's published part always lies on one tree path."""
        bs, now = self.bs, next(self._clock)
        for i in range(start, stop):
            key = tuple(tokens[i * bs : (i + 1) * bs])
            child = node.children.get(key)
            if child is None:
                child = Node(key, table[i], node)
                node.children[key] = child
                self.node_of[table[i]] = child
            elif child.block != table[i]:
                self.blocks.incref(child.block)
                self.blocks.decref(table[i])
                table[i] = child.block
            child.last_access = now
            node = child
        return node

    # --- ref-count events from the block manager ---------------------------------------------
    def on_idle(self, block: int) -> None:
        node = self.node_of[block]
        self.num_idle += 1
        if not node.children:
            self._push(node)

    def on_held(self, block: int) -> None:
        self.num_idle -= 1  # its stale LRU entry is skipped when popped

    def _push(self, node: Node) -> None:
        heapq.heappush(self._lru, (node.last_access, next(self._tiebreak), node))
        if len(self._lru) > 4 * len(self.node_of) + 64:
            self._compact()

    def _evictable(self, node: Node) -> bool:
        return node.parent is not None and not node.children and self.blocks.is_idle(node.block)

    def _compact(self) -> None:
        live = {id(n): (n.last_access, t, n) for _, t, n in self._lru if self._evictable(n)}
        self._lru = list(live.values())
        heapq.heapify(self._lru)

    # --- eviction ----------------------------------------------------------------------------
    def evict(self, n: int) -> int:
        """Free up to n idle blocks, least recently used leaves first; returns how many were freed."""
        freed = 0
        while freed < n and self._lru:
            stamp, _, node = heapq.heappop(self._lru)
            if not self._evictable(node) or stamp != node.last_access:
                if self._evictable(node):  # touched since it was queued: requeue with its new time
                    self._push(node)
                continue
            parent = node.parent
            del parent.children[node.key]
            del self.node_of[node.block]
            node.parent = None
            self.num_idle -= 1
            self.blocks.reclaim(node.block)
            freed += 1
            if parent is not self.root and self._evictable(parent):
                self._push(parent)
        self.evicted_blocks += freed
        return freed

    def clear(self) -> None:
        """Drop every idle block (used between runs that must not share a cache, e.g. tests)."""
        self.evict(self.num_idle)
