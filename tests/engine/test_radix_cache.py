"""Radix cache at block granularity: sharing, ref counts protect held blocks, LRU eviction of leaves."""
from kvx.engine.block_manager import BlockManager
from kvx.engine.radix_cache import RadixCache

BS = 2


def publish_chain(cache, blocks, tokens):
    table = blocks.allocate(len(tokens) // BS)
    cache.publish(cache.root, tokens, table, 0, len(table))
    return table


def test_match_shares_only_full_blocks_and_held_blocks_survive_eviction():
    blocks = BlockManager(6, BS)
    cache = RadixCache(blocks)
    a = publish_chain(cache, blocks, [1, 2, 3, 4, 5, 6])
    found, _ = cache.match([1, 2, 3, 4, 9], max_blocks=2)
    assert found == a[:2]
    found, _ = cache.match([1, 2, 3], max_blocks=1)  # 3 alone is not a full block
    assert found == a[:1]
    assert cache.evict(10) == 0  # all held by "a"
    blocks.release(a)
    assert blocks.num_cached_idle == 3 and blocks.num_free == 3
    assert blocks.leaks() == []


def test_lru_evicts_least_recent_leaf_first_and_then_its_parent():
    blocks = BlockManager(4, BS)
    cache = RadixCache(blocks)
    old = publish_chain(cache, blocks, [1, 1, 2, 2])
    new = publish_chain(cache, blocks, [3, 3, 4, 4])
    blocks.release(old)
    blocks.release(new)
    cache.match([1, 1, 2, 2, 0], 2)  # touch "old": now "new" is least recently used
    assert cache.evict(1) == 1
    assert not cache.holds(new[1]) and cache.holds(new[0]) and cache.holds(old[1])
    assert cache.evict(1) == 1 and not cache.holds(new[0])  # its parent became a leaf
    got = blocks.allocate(3)  # needs one more eviction: the "old" leaf
    assert got is not None and cache.holds(old[0]) and not cache.holds(old[1])


def test_duplicate_block_is_swapped_for_the_cached_one():
    blocks = BlockManager(4, BS)
    cache = RadixCache(blocks)
    first = publish_chain(cache, blocks, [7, 7])
    second = blocks.allocate(1)
    cache.publish(cache.root, [7, 7], second, 0, 1)
    assert second == first and blocks.ref[first[0]] == 2 and blocks.num_free == 3
