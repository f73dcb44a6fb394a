"""The prefix-affinity plan of an offline batch over N replicas (pure Python, no Ray).

An offline batch knows all its prompts before it starts, so instead of guessing per request like an
online router, kvx plans:
1. build the block-level prefix trie of the prompts (prefix_trie.py, engine block size) and read it
   in depth-first order: a contiguous run of that order is a set of whole subtrees (plus at most
   two partial ones at its ends) and its prefill cost is exact: its union of prefixes;
2. cost of a request = computed prompt tokens x prefill weight + expected output tokens x decode
   weight (CostModel), where a request computes only what its predecessor in the order left cached;
3. cut the order into N runs whose largest cost is minimal (bisection on the cap T with a greedy
   fill, which is optimal for contiguous runs). A subtree costing more than T spans
   ceil(cost / T) neighbouring replicas, each computing its shared prefix once: hot-prefix
   replication without moving KV. The recomputed tokens are reported (`redundant_tokens`);
4. each run is cut into `groups_per_replica` groups, the unit an idle replica steals.

Guarantee (tested): every request in exactly one group; the largest load is at most
mean + 2 x the largest single request (in practice within a request of the mean: see the
simulator's busy max/mean).
"""
from __future__ import annotations

import bisect
from array import array
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from kvx.cluster.prefix_trie import PrefixTrie


@dataclass(frozen=True)
class CostModel:
    """What one replica spends per computed prompt token and per generated token (any unit)."""

    prefill_token: float = 1.0
    decode_token: float = 1.0

    def of(self, computed_prompt: float, output: float) -> float:
        return computed_prompt * self.prefill_token + output * self.decode_token


@dataclass
class Group:
    replica: int
    start: int  # positions in Plan.order
    stop: int
    cost: float  # on its planned replica, after the group before it


@dataclass
class Plan:
    replicas: int
    order: array  # request indices in depth-first trie order
    groups: list[Group]
    loads: list[float]  # planned cost per replica
    prompt_tokens: int  # all prompts' tokens
    unique_tokens: int  # tokens the trie holds: what perfect routing with infinite caches computes
    redundant_tokens: int  # shared prefixes computed again because their subtree was split
    cap: float = 0.0  # the largest load the cut allowed
    by_replica: list[list[Group]] = field(default_factory=list)

    @property
    def ideal_hit_rate(self) -> float:
        return 1 - self.unique_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    @property
    def planned_hit_rate(self) -> float:
        computed = self.unique_tokens + self.redundant_tokens
        return 1 - computed / self.prompt_tokens if self.prompt_tokens else 0.0

    def members(self, group: Group) -> array:
        return self.order[group.start:group.stop]

    def summary(self) -> dict:
        mean = sum(self.loads) / len(self.loads) if self.loads else 0.0
        return {
            "replicas": self.replicas,
            "requests": len(self.order),
            "groups": len(self.groups),
            "prompt_tokens": self.prompt_tokens,
            "redundant_prefill_tokens": self.redundant_tokens,
            "ideal_hit_rate": round(self.ideal_hit_rate, 4),
            "planned_hit_rate": round(self.planned_hit_rate, 4),
            "load_max_over_mean": round(max(self.loads) / mean, 4) if mean else 1.0,
        }


def token_key(prompt_ids: Sequence[int], block_size: int) -> bytes:
    """The trie key of a token-id prompt: its full blocks as int32 bytes (4 * block_size a block)."""
    full = len(prompt_ids) // block_size * block_size
    return array("i", prompt_ids[:full]).tobytes()


def plan(items: Iterable[tuple[bytes, int, float]], replicas: int, block_tokens: int, unit: int,
         cost: CostModel = CostModel(), groups_per_replica: int = 8) -> Plan:
    """Plan `items` = (trie key, prompt tokens, expected output tokens), indexed in iteration order.

    `unit` is the key bytes per block (4 * block_tokens for token_key), `block_tokens` the tokens a
    block holds."""
    if replicas < 1:
        raise ValueError("replicas must be at least 1")
    trie = PrefixTrie(unit)
    prompts, outputs = array("q"), array("d")
    for index, (key, prompt_tokens, output_tokens) in enumerate(items):
        trie.insert(key, index)
        prompts.append(prompt_tokens)
        outputs.append(output_tokens)
    order, shared = array("q"), array("q")
    for item, blocks in trie.walk():
        order.append(item)
        shared.append(blocks * block_tokens)
    del trie  # the plan keeps per-request numbers only
    restart = [cost.of(prompts[i], outputs[i]) for i in order]
    prefill = cost.prefill_token
    step = [r - prefill * s for r, s in zip(restart, shared)]
    starts, cap = _cut(restart, step, replicas)
    groups, loads = _groups(starts, restart, step, len(order), replicas, groups_per_replica)
    total_prompt = sum(prompts)
    unique = total_prompt - sum(shared)
    redundant = sum(shared[a] for a in starts[1:])
    result = Plan(replicas, order, groups, loads, total_prompt, unique, redundant, cap)
    result.by_replica = [[g for g in groups if g.replica == r] for r in range(replicas)]
    return result


def _fill(restart: list[float], sums: list[float], cap: float, limit: int) -> list[int] | None:
    """Greedy cut: each run as long as it stays within cap (at least one request); None if it needs
    more than `limit` runs. Optimal for contiguous runs: starting a run later never costs more."""
    n, starts, a = len(restart), [], 0
    while a < n:
        if len(starts) == limit or restart[a] > cap:
            return None
        starts.append(a)
        # run [a, b) costs restart[a] + sums[b] - sums[a + 1]
        b = bisect.bisect_right(sums, cap - restart[a] + sums[a + 1], lo=a + 1) - 1
        a = max(b, a + 1)
    return starts


def _cut(restart: list[float], step: list[float], replicas: int) -> tuple[list[int], float]:
    if not restart:
        return [], 0.0
    sums = [0.0]
    for c in step:
        sums.append(sums[-1] + c)
    lo = sums[-1] / replicas
    hi = lo + 2 * max(restart)  # always feasible (see the module's guarantee)
    best = _fill(restart, sums, hi, replicas)
    for _ in range(60):
        if hi - lo <= 1e-9 * hi:
            break
        mid = (lo + hi) / 2
        starts = _fill(restart, sums, mid, replicas)
        if starts is None:
            lo = mid
        else:
            hi, best = mid, starts
    return best, hi


def _groups(starts: list[int], restart: list[float], step: list[float], n: int, replicas: int,
            per_replica: int) -> tuple[list[Group], list[float]]:
    groups, loads = [], [0.0] * replicas
    bounds = starts + [n]
    for r in range(len(starts)):
        a, b = bounds[r], bounds[r + 1]
        loads[r] = restart[a] + sum(step[a + 1:b])
        target = loads[r] / per_replica
        first, acc = a, 0.0
        for k in range(a, b):
            acc += restart[k] if k == a else step[k]
            if acc >= target or k == b - 1:
                groups.append(Group(r, first, k + 1, acc))
                first, acc = k + 1, 0.0
    return groups, loads
