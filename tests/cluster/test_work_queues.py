"""Handing out planned groups: plan order, stealing from the busier queue, a dead replica's queue
moved to the others; every key handed out exactly once."""
from collections import deque

from kvx.cluster.work_queues import WorkGroup, WorkQueues


def group(keys, cost):
    return WorkGroup(deque(keys), cost)


def test_own_groups_in_order_then_steal_largest_untouched_from_busiest():
    q = WorkQueues(3)
    q.add(0, group([1, 2], 2.0))
    q.add(1, group([10, 11], 2.0))
    q.add(1, group([12, 13, 14], 9.0))
    q.add(1, group([15], 1.0))
    q.add(2, group([20], 1.0))
    assert q.take(0, 2) == [1, 2] and q.steals == 0
    assert q.take(0, 2, steal=False) == [] and q.steals == 0
    assert q.take(0, 2) == [12, 13]  # replica 1 has more left; its largest untouched group
    assert q.steals == 1 and q.take(0, 3) == [14, 10, 11] and q.steals == 2  # 1 still has more left
    assert sorted(q.take(1, 5)) == [15, 20] and q.requests() == 0


def test_every_key_once_under_stealing_and_death():
    q = WorkQueues(4, seed=3)
    keys = iter(range(1000))
    for r in range(4):
        for _ in range(5):
            q.add(r, group([next(keys) for _ in range(10)], 10.0 * (r + 1)))
    seen = []
    seen += q.take(0, 25)
    q.remove(2)
    for step in range(200):
        r = [0, 1, 3][step % 3] if step % 7 else 0
        seen += q.take(r, 7)
    assert sorted(seen) == list(range(200))
    assert q.requests() == 0 and q.steals > 0


def test_power_of_two_robs_the_queue_with_more_work():
    q = WorkQueues(3, seed=0)
    q.add(1, group([1], 1.0))
    q.add(1, group([2], 1.0))
    q.add(2, group([3], 50.0))
    q.add(2, group([4], 60.0))
    assert q.take(0, 1) == [4]  # two busy replicas drawn: 2 has more left; its largest group


def test_end_of_batch_splits_the_back_half_of_a_current_group():
    q = WorkQueues(2)
    q.add(1, group(list(range(10)), 10.0))
    assert q.take(1, 2) == [0, 1]  # replica 1 is inside its only group: nothing untouched left
    assert q.take(0, 4) == [6, 7, 8, 9] and q.steals == 1  # half of the 8 not handed out
    assert q.take(1, 10) == [2, 3, 4, 5] and q.requests() == 0 and q.take(0, 1) == []
