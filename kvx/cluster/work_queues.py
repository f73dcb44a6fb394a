"""Per-replica queues of planned groups, handed out in plan order, with stealing.

A replica takes requests from its current group, then its next untouched group. When its own
queue is dry it steals: among the replicas that still have untouched groups it draws two and robs
the one with more work left (power of two choices), taking that queue's largest untouched group
(the last one on a tie: the farthest from what the victim works on now). When no group is left
untouched, it splits off the back half of the requests not yet handed out of another replica's
current group. So a replica whose output lengths were underestimated does not leave the others
idle. Costs are the plan's estimates.
"""
from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field


@dataclass
class WorkGroup:
    keys: deque  # request keys not yet handed out, in plan order
    cost: float  # estimated cost of the whole group
    size: int = 0

    def __post_init__(self):
        self.size = self.size or len(self.keys)

    @property
    def left(self) -> float:
        return self.cost * len(self.keys) / self.size if self.size else 0.0


@dataclass
class ReplicaQueue:
    current: WorkGroup | None = None  # touched: some of its requests were handed out
    untouched: deque = field(default_factory=deque)

    def left(self) -> float:
        return (self.current.left if self.current else 0.0) + sum(g.cost for g in self.untouched)

    def requests(self) -> int:
        return (len(self.current.keys) if self.current else 0) + sum(len(g.keys) for g in self.untouched)


class WorkQueues:
    def __init__(self, replicas: int, seed: int = 0):
        self.queues = [ReplicaQueue() for _ in range(replicas)]
        self.live = set(range(replicas))
        self.steals = 0
        self.stolen_requests = 0
        self._rng = random.Random(seed)

    def add(self, replica: int, group: WorkGroup, front: bool = False) -> None:
        if group.keys:
            q = self.queues[replica].untouched
            q.appendleft(group) if front else q.append(group)

    def take(self, replica: int, n: int, steal: bool = True) -> list[int]:
        """Up to n request keys for `replica`: its own queue first, then (if `steal`) stolen groups."""
        q, out = self.queues[replica], []
        while len(out) < n:
            if q.current is None or not q.current.keys:
                q.current = q.untouched.popleft() if q.untouched else (self._steal(replica) if steal else None)
                if q.current is None:
                    break
            while q.current.keys and len(out) < n:
                out.append(q.current.keys.popleft())
        return out

    def _steal(self, thief: int) -> WorkGroup | None:
        busy = [r for r in self.live if r != thief and self.queues[r].untouched]
        if busy:
            victim = self.queues[self._busier(busy)]
            best = max(range(len(victim.untouched)), key=lambda i: (victim.untouched[i].cost, i))
            group = victim.untouched[best]
            del victim.untouched[best]
        else:  # the end of the batch: split the back half off a group another replica is in
            busy = [r for r in self.live if r != thief and self.queues[r].current and len(self.queues[r].current.keys) > 1]
            if not busy:
                return None
            current = self.queues[self._busier(busy)].current
            half = len(current.keys) // 2
            keys = deque(current.keys.pop() for _ in range(half))
            keys.reverse()
            group = WorkGroup(keys, current.cost * half / current.size)
            current.cost -= group.cost
            current.size -= half
        self.steals += 1
        self.stolen_requests += len(group.keys)
        return group

    def _busier(self, busy: list[int]) -> int:
        """Power of two choices: of two drawn replicas, the one with more work left."""
        drawn = self._rng.sample(sorted(busy), min(2, len(busy)))
        return max(drawn, key=lambda r: self.queues[r].left())

    def remove(self, replica: int) -> None:
        """A replica died: its queue goes to the live replica with the least work left, group by group."""
        self.live.discard(replica)
        q = self.queues[replica]
        groups = ([q.current] if q.current and q.current.keys else []) + list(q.untouched)
        self.queues[replica] = ReplicaQueue()
        for group in groups:
            self.add(self.least_loaded(), group)

    def least_loaded(self) -> int:
        return min(sorted(self.live), key=lambda r: self.queues[r].left())

    def requests(self) -> int:
        return sum(self.queues[r].requests() for r in self.live)
