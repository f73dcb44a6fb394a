"""The planner against brute force: every request in exactly one group, each replica's planned
load equal to the union of its prompts' block prefixes (the engine's cache granularity), the cap."""
import random

from hypothesis import given, settings, strategies as st

from kvx.cluster.planner import CostModel, plan, token_key

BS = 4
COST = CostModel(prefill_token=1.0, decode_token=3.0)


@st.composite
def batches(draw):
    """Prompts in families sharing prefixes of any length (not block-aligned), some duplicated."""
    rng = random.Random(draw(st.integers(0, 10**6)))
    bases = [[rng.randrange(50) for _ in range(rng.randrange(0, 40))] for _ in range(draw(st.integers(1, 6)))]
    prompts = []
    for _ in range(draw(st.integers(1, 60))):
        base = rng.choice(bases)
        cut = rng.randrange(len(base) + 1)
        prompts.append(base[:cut] + [rng.randrange(50) for _ in range(rng.randrange(1, 12))])
    prompts += prompts[: draw(st.integers(0, 5))]  # exact duplicates share every full block
    outputs = [float(rng.randrange(0, 20)) for _ in prompts]
    return prompts, outputs


def reference_cost(prompts, outputs, members):
    """A replica's cost computed directly: each distinct full-block prefix once, tails and outputs each."""
    blocks, tails, out = set(), 0, 0.0
    for i in members:
        p = prompts[i]
        full = len(p) // BS
        blocks.update(tuple(p[: (b + 1) * BS]) for b in range(full))
        tails += len(p) - full * BS
        out += outputs[i]
    return COST.of(len(blocks) * BS + tails, out)


def make_plan(prompts, outputs, replicas, groups=3):
    items = [(token_key(p, BS), len(p), o) for p, o in zip(prompts, outputs)]
    return plan(items, replicas, BS, 4 * BS, COST, groups_per_replica=groups)


@settings(max_examples=150, deadline=None)
@given(batches(), st.integers(1, 9))
def test_every_request_once_and_loads_exact(batch, replicas):
    prompts, outputs = batch
    p = make_plan(prompts, outputs, replicas)
    placed = [i for g in p.groups for i in p.members(g)]
    assert sorted(placed) == list(range(len(prompts)))
    for r in range(replicas):
        members = [i for g in p.by_replica[r] for i in p.members(g)]
        assert abs(p.loads[r] - reference_cost(prompts, outputs, members)) < 1e-6
        assert abs(sum(g.cost for g in p.by_replica[r]) - p.loads[r]) < 1e-6
    # H*: the trie holds each distinct full-block prefix once, plus every partial tail
    assert abs(COST.of(p.unique_tokens, sum(outputs)) - reference_cost(prompts, outputs, range(len(prompts)))) < 1e-6


@settings(max_examples=150, deadline=None)
@given(batches(), st.integers(1, 9))
def test_load_cap(batch, replicas):
    prompts, outputs = batch
    p = make_plan(prompts, outputs, replicas)
    once = COST.of(p.unique_tokens, sum(outputs))  # the whole batch on one replica
    largest = max(COST.of(len(pr), o) for pr, o in zip(prompts, outputs))
    assert max(p.loads) <= once / replicas + 2 * largest + 1e-6
    assert max(p.loads) <= p.cap + 1e-6


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10**6), st.sampled_from([2, 8, 32]))
def test_cap_within_five_percent_when_requests_are_small(seed, replicas):
    """Many requests, each small against a replica's share: the cut lands within 5% of the mean."""
    rng = random.Random(seed)
    systems = [[rng.randrange(50) for _ in range(rng.randrange(8, 64))] for _ in range(rng.randrange(1, 20))]
    prompts = [rng.choice(systems) + [rng.randrange(50) for _ in range(rng.randrange(4, 30))] for _ in range(1500)]
    outputs = [float(rng.randrange(5, 40)) for _ in prompts]
    p = make_plan(prompts, outputs, replicas)
    mean = sum(p.loads) / replicas
    assert max(p.loads) <= 1.05 * mean


def test_hot_prefix_split_across_replicas_recomputes_it_once_each():
    shared = list(range(1, 41))  # 10 blocks every prompt shares
    prompts = [shared + [100 + i, 7, 7, 7] for i in range(64)]
    p = make_plan(prompts, [4.0] * 64, 4)
    assert all(len(g) for g in p.by_replica)
    assert p.redundant_tokens == 3 * 40  # the three other replicas compute the prefix once each
    assert abs(p.planned_hit_rate - (1 - (p.unique_tokens + 120) / p.prompt_tokens)) < 1e-12
