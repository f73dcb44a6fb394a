"""A source that pauses (a replica waiting for its next group) keeps the engine stepping: every
request still gives the tokens of a plain single-sequence run, and the engine ends only when the
source does."""
import random

from engine_fakes import EOS, VOCAB, config_for, reference_greedy, tiny_loaded
from kvx.engine import Engine, Request, SamplingParams
from kvx.engine.api import PAUSE


def test_paused_source_keeps_stepping_and_matches_alone():
    loaded = tiny_loaded()
    rng = random.Random(5)
    shared = [rng.randrange(1, VOCAB) for _ in range(20)]
    reqs = [Request(f"r{i}", shared + [rng.randrange(1, VOCAB) for _ in range(rng.randrange(1, 9))],
                    SamplingParams(max_tokens=rng.randrange(2, 12))) for i in range(12)]
    engine = Engine(loaded, config_for(loaded, 200, attention="cpu"))
    steps_at_pause = []

    def source():
        for i, req in enumerate(reqs):
            yield req
            if i % 4 == 3:
                for _ in range(3):  # three pauses in a row: the engine steps between them
                    steps_at_pause.append(engine.metrics.steps)
                    yield PAUSE

    results = {r.id: r for r in engine.generate(source())}
    assert sorted(results) == sorted(r.id for r in reqs)
    for req in reqs:
        out = reference_greedy(loaded, req.prompt_ids, req.sampling.max_tokens)
        assert results[req.id].token_ids == (out[:-1] if out and out[-1] == EOS else out)
    assert len(set(steps_at_pause)) == len(steps_at_pause)  # a step ran after each pause


def test_pause_with_nothing_held_asks_again():
    loaded = tiny_loaded()
    engine = Engine(loaded, config_for(loaded, 50))
    asked = []

    def source():
        for _ in range(3):
            asked.append(1)
            yield PAUSE
        yield Request("late", [3, 5, 7, 9], SamplingParams(max_tokens=3))

    results = list(engine.generate(source()))
    assert len(asked) == 3 and [r.id for r in results] == ["late"]


def test_later_rounds_of_a_job_add_to_its_figures():
    """A job's calibration run and retry rounds are separate generate() calls: with
    reset_metrics=False their figures add up instead of the last round's replacing them."""
    loaded = tiny_loaded()
    rng = random.Random(7)
    rounds = [[Request(f"{k}.{i}", [rng.randrange(1, VOCAB) for _ in range(6)], SamplingParams(max_tokens=5))
               for i in range(3)] for k in range(2)]
    engine = Engine(loaded, config_for(loaded, 100, attention="cpu"))
    alone = []
    for reqs in rounds:
        list(engine.generate(reqs))
        alone.append(engine.metrics.snapshot())
    list(engine.generate(rounds[0]))
    list(engine.generate(rounds[1], reset_metrics=False))
    both = engine.metrics.snapshot()
    assert alone[1]["requests_done"] == 3 and both["requests_done"] == 6
    assert both["generated_tokens"] == alone[0]["generated_tokens"] + alone[1]["generated_tokens"]
    assert both["steps"] >= alone[0]["steps"] + 1
