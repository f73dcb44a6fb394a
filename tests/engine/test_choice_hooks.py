"""The hooks around greedy choices: contextual calibration's arithmetic (kvx/engine/calibration.py)
and a request's TokenVeto (the engine takes the best token the veto lets through; compared with a
plain greedy loop that never had the vetoed token, with drafting on)."""
import math
import random

import pytest
import torch

from engine_fakes import EOS, VOCAB, config_for, reference_greedy, tiny_loaded
from kvx.engine import Engine, Request, SamplingParams
from kvx.engine.calibration import ContextualCalibration


def test_calibration_ranks_what_the_text_adds():
    cal = ContextualCalibration()
    labels = [b"credit card", b"mortgage", b""]
    # content-free prompts: the model says "credit card" whatever the text (0.8 on average)
    cal.record(7, labels, [math.log(0.9), math.log(0.05), math.log(0.05)])
    cal.record(7, labels, [math.log(0.7), math.log(0.2), math.log(0.1)])
    p_free = {label: sum(ps) / 2 for label, ps in cal.seen[7].items()}
    assert p_free == pytest.approx({b"credit card": 0.8, b"mortgage": 0.125, b"": 0.075})
    # a record: "credit card" 0.6, "mortgage" 0.3: calibrated, mortgage wins (0.3/0.125 > 0.6/0.8)
    got = cal.scores(7, labels, [math.log(0.6), math.log(0.3), math.log(0.1)])
    assert max(range(3), key=got.__getitem__) == 1
    assert got[0] == pytest.approx(math.log(0.6 / 0.8))
    # a point the content-free runs never reached, or other values offered: ranked as it is
    raw = [math.log(0.6), math.log(0.4)]
    assert cal.scores(8, labels[:2], raw) == raw and cal.scores(7, [b"x", b"mortgage"], raw) == raw
    assert (cal.calibrated, cal.uncalibrated, cal.num_points) == (1, 2, 1)


class VetoEvery:
    """Refuses `banned` after any output ending in an odd token (state from the output, as a real veto)."""

    def __init__(self, banned: set[int]):
        self.banned = banned
        self.asked = 0

    def vetoes(self, output_ids, token):
        self.asked += 1
        return token in self.banned and bool(output_ids) and output_ids[-1] % 2 == 1

    def allowed(self, output_ids):
        return None


class OnlyAfterOdd:
    """Lets only `only` through after an odd token, and names them (`allowed`, as the code guard)."""

    def __init__(self, only: list[int]):
        self.only = only

    def vetoes(self, output_ids, token):
        return bool(output_ids) and output_ids[-1] % 2 == 1 and token not in self.only

    def allowed(self, output_ids):
        return self.only if output_ids and output_ids[-1] % 2 == 1 else None


class Without:
    """A matcher stand-in for the reference loop: every token but `banned` after an odd token."""

    def __init__(self, banned: set[int], only: list[int] | None = None):
        self.banned, self.only, self.last = banned, only, None

    def allowed_mask(self):
        m = torch.ones(VOCAB, dtype=torch.bool)
        if self.last is not None and self.last % 2 == 1:
            m[list(self.banned)] = False
            if self.only is not None:
                m[:] = False
                m[self.only] = True
        return m

    def advance(self, tok):
        self.last = tok

    def forced_tokens(self):
        return []


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_vetoed_tokens_give_way_to_the_next_best(seed):
    loaded = tiny_loaded()
    rng = random.Random(seed)
    prompts = [[rng.randrange(1, VOCAB) for _ in range(rng.randrange(5, 30))] for _ in range(8)]
    plain = Engine(loaded, config_for(loaded, 200, 4, "cpu"))
    free = {r.id: r.token_ids for r in plain.generate(
        [Request(str(i), p, SamplingParams(max_tokens=20)) for i, p in enumerate(prompts)])}
    banned = {t for out in free.values() for t in out[1:3] if t != EOS}  # tokens greedy really takes
    veto = VetoEvery(banned)
    engine = Engine(loaded, config_for(loaded, 200, 4, "cpu"))
    reqs = [Request(str(i), p, SamplingParams(max_tokens=20), token_veto=veto) for i, p in enumerate(prompts)]
    got = {r.id: r.token_ids for r in engine.generate(reqs)}
    # vetoed requests draft too: a draft stops before a token the veto refuses
    assert engine.metrics.vetoed_tokens > 0 and engine.metrics.accepted_draft_tokens > 0
    for i, p in enumerate(prompts):
        want = reference_greedy(loaded, p, 20, matcher=Without(banned))
        assert got[str(i)] == (want[:-1] if want and want[-1] == EOS else want)


@pytest.mark.parametrize("seed", [0, 1])
def test_a_veto_that_names_its_tokens_gets_the_likeliest_of_them(seed):
    """Far down the ranking (beyond the veto loop's tries) the named tokens are still found: the
    output equals a plain loop whose mask allows only them there."""
    loaded = tiny_loaded()
    rng = random.Random(seed)
    prompts = [[rng.randrange(1, VOCAB) for _ in range(rng.randrange(5, 30))] for _ in range(6)]
    only = sorted(rng.sample(range(1, VOCAB), 3))
    engine = Engine(loaded, config_for(loaded, 200, 4, "cpu"))
    reqs = [Request(str(i), p, SamplingParams(max_tokens=20), token_veto=OnlyAfterOdd(only)) for i, p in enumerate(prompts)]
    got = {r.id: r.token_ids for r in engine.generate(reqs)}
    for i, p in enumerate(prompts):
        want = reference_greedy(loaded, p, 20, matcher=Without(set(), only))
        assert got[str(i)] == (want[:-1] if want and want[-1] == EOS else want)
        assert all(b in only for a, b in zip(got[str(i)], got[str(i)][1:]) if a % 2 == 1)


class VetoAllAfterOdd:
    """Refuses every token after an odd token: no candidate gets through."""

    def vetoes(self, output_ids, token):
        return bool(output_ids) and output_ids[-1] % 2 == 1

    def allowed(self, output_ids):
        return None


def test_a_veto_that_refuses_every_try_gives_way_to_the_likeliest():
    """Past its tries the veto gives way: the greedy token is kept (never an unchecked later one)."""
    loaded = tiny_loaded()
    rng = random.Random(4)
    prompts = [[rng.randrange(1, VOCAB) for _ in range(rng.randrange(5, 30))] for _ in range(6)]
    engine = Engine(loaded, config_for(loaded, 200, 4, "cpu"))
    reqs = [Request(str(i), p, SamplingParams(max_tokens=20), token_veto=VetoAllAfterOdd()) for i, p in enumerate(prompts)]
    got = {r.id: r.token_ids for r in engine.generate(reqs)}
    assert engine.metrics.vetoed_tokens > 0
    for i, p in enumerate(prompts):
        want = reference_greedy(loaded, p, 20)
        assert got[str(i)] == (want[:-1] if want and want[-1] == EOS else want)
