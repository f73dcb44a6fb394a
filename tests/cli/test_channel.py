"""Noisy-channel scores (kvx/channel.py): which fields are scored, the scoring prompts, and how a
record's hook moves a ranked choice (against a reference computed here with numpy)."""
from __future__ import annotations

import numpy as np
import pytest

from kvx.channel import (CHANNEL_TOKENS, CHANNEL_WEIGHT, MAX_SCORED, MAX_VALUES, ChannelHook, ChannelScores, EnumField, collect, enum_fields,
                         point_owners, scoring_requests, top_level_key)
from kvx.engine.api import ChoiceTrace, Result, Usage


class ByteTokenizer:
    def encode(self, text: str) -> list[int]:
        return list(text.encode())


class PlusOne:  # a base hook (the calibration's place): moves every score
    def scores(self, key, labels, logprobs):
        return [x + 1.0 for x in logprobs]


KIND = EnumField("kind", ("alpha", "beta", "gamma ray"))


def test_only_top_level_string_enums_of_a_few_values_are_scored():
    schema = {"type": "object", "properties": {
        "kind": {"enum": list(KIND.values)},
        "mixed": {"enum": ["a", 1]},
        "single": {"enum": ["only"]},
        "many": {"enum": [f"v{i}" for i in range(40)]},
        "free": {"type": "string"},
        "nested": {"type": "object", "properties": {"x": {"enum": ["p", "q"]}}},
    }}
    assert enum_fields(schema) == [KIND]
    wide = {"properties": {f"f{i}": {"enum": [f"{i}-{j}" for j in range(MAX_VALUES)]} for i in range(3)}}
    assert [f.name for f in enum_fields(wide)] == ["f0", "f1"][:MAX_SCORED // MAX_VALUES]  # the cost stays bounded
    assert enum_fields({"type": "array"}) == [] and enum_fields(True) == []
    pydantic = {"$defs": {"Kind": {"enum": list(KIND.values), "type": "string", "title": "Kind"}},
                "properties": {"kind": {"$ref": "#/$defs/Kind"},
                               "v1": {"allOf": [{"$ref": "#/$defs/Kind"}], "description": "Pydantic v1"}}}
    assert enum_fields(pydantic) == [KIND, EnumField("v1", KIND.values)]


def test_optional_enums_are_scored_with_null_as_a_value():
    """Pydantic's Optional[Kind] (anyOf of the enum and null) and an enum listing null: null is one
    more value, spelled `null` (never inside quotes); a second null or a mixed enum is not scored."""
    schema = {"$defs": {"Kind": {"enum": list(KIND.values), "type": "string"}},
              "properties": {"opt": {"anyOf": [{"$ref": "#/$defs/Kind"}, {"type": "null"}], "default": None},
                             "listed": {"enum": ["lo", None, "hi"]},
                             "two_nulls": {"enum": ["lo", None, None]},
                             "three_way": {"anyOf": [{"enum": ["a"]}, {"enum": ["b"]}, {"type": "null"}]}}}
    assert enum_fields(schema) == [EnumField("opt", (*KIND.values, None)), EnumField("listed", ("lo", None, "hi"))]
    opt = enum_fields(schema)[0]
    assert opt.spellings[b"null"] == 3 and b"ul" not in opt.spellings and opt.spellings[b'"beta"'] == 1
    reqs = scoring_requests([opt], ByteTokenizer(), "some text", "1", context=512)
    assert bytes(reqs[3].prompt_ids[:reqs[3].sampling.score_from]) == b"opt: null\n"
    channel = [-40.0, -43.0, -41.5, -39.0]
    hook = ChannelHook([opt], ChannelScores({"opt": channel}))
    labels, logprobs = [b'"alpha"', b'"beta"', b'"gamma ray"', b"null"], [-1.0, -2.0, -3.0, -0.5]
    raw = np.array(channel)
    want = np.array(logprobs) + CHANNEL_WEIGHT * (raw - np.logaddexp.reduce(raw))
    assert hook.scores(("o",), labels, logprobs) == pytest.approx(want.tolist()) and hook.used == 1


def test_scoring_prompts_name_field_and_value_then_the_text_start():
    text = "z" * (CHANNEL_TOKENS + 50)
    reqs = scoring_requests([KIND], ByteTokenizer(), text, "7", context=512)
    assert [r.user_data for r in reqs] == [("7", "kind", i) for i in range(3)]
    for r, v in zip(reqs, KIND.values):
        prefix = list(f"kind: {v}\n".encode())
        assert r.prompt_ids == prefix + list((" " + text).encode())[:CHANNEL_TOKENS]
        assert r.sampling.score_from == len(prefix) and r.sampling.max_tokens == 0
    longest = len("kind: gamma ray\n") + CHANNEL_TOKENS
    fits = scoring_requests([KIND], ByteTokenizer(), text, "7", context=longest)  # a prompt must leave room
    assert [r.user_data[2] for r in fits] == [0, 1]
    assert scoring_requests([KIND], ByteTokenizer(), "", "7", context=512) != []  # " " is a text token


def _result(key, name, i, lp):
    return Result(f"{key}/{name}/{i}", [], "", "stop" if lp is not None else "error", Usage(), user_data=(key, name, i),
                  prompt_logprob=lp)


def test_collect_keeps_a_field_only_when_every_value_was_scored():
    results = [_result("1", "kind", i, -float(i)) for i in range(3)] + [_result("2", "kind", 0, -1.0),
                                                                        _result("2", "kind", 1, None)]
    got = collect([KIND], results)
    assert got["1"].fields == {"kind": [0.0, -1.0, -2.0]} and got["2"].fields == {}


def test_the_hook_adds_the_weighted_normalised_channel_at_the_fields_point():
    channel = [-40.0, -43.0, -41.5]  # log p(text | value) per value of KIND
    hook = ChannelHook([KIND], ChannelScores({"kind": channel}), PlusOne())
    labels = [b"gamma ray", b"alpha", b"beta"]  # the grammar's order, not the schema's
    logprobs = [-3.0, -0.5, -1.0]
    raw = np.array([channel[2], channel[0], channel[1]])
    want = np.array(logprobs) + 1.0 + CHANNEL_WEIGHT * (raw - np.logaddexp.reduce(raw))
    assert hook.scores(("k",), labels, logprobs) == pytest.approx(want.tolist())
    # a point of another field (null or a value) only gets the base hook
    assert hook.scores(("n",), [b"null", b""], [-1.0, -2.0]) == [0.0, -1.0]
    # values offered with their quotes, a subset of them: normalised over those offered
    sub = np.array([channel[1], channel[0]])
    got = hook.scores(("q",), [b'"beta"', b'"alpha"'], [-1.0, -2.0])
    assert got == pytest.approx((np.array([0.0, -1.0]) + CHANNEL_WEIGHT * (sub - np.logaddexp.reduce(sub))).tolist())
    assert hook.used == 2


def test_the_channel_can_overturn_the_base_choice():
    """A value the text is far likelier under wins although its direct score is lower."""
    hook = ChannelHook([KIND], ChannelScores({"kind": [-60.0, -20.0, -60.0]}))
    scores = hook.scores(("k",), [b"alpha", b"beta", b"gamma ray"], [-0.2, -2.5, -3.0])
    assert int(np.argmax(scores)) == 1
    unscored = ChannelHook([KIND], ChannelScores())  # the record's scoring failed: the base decides
    assert unscored.scores(("k",), [b"alpha", b"beta"], [-0.2, -2.5]) == [-0.2, -2.5]


def test_a_point_two_fields_could_own_is_left_to_the_base_hook():
    """impact and urgency share their values: a point offering them could be either field's, so
    neither field's channel scores move it; a field whose values are its own still gets its channel."""
    impact, urgency = EnumField("impact", ("low", "high")), EnumField("urgency", ("low", "medium", "high"))
    hook = ChannelHook([impact, urgency, KIND], ChannelScores({"impact": [-1.0, -9.0], "urgency": [-9.0, -9.0, -1.0],
                                                               "kind": [-40.0, -43.0, -41.5]}), PlusOne())
    assert hook.scores(("i",), [b"low", b"high"], [-1.0, -2.0]) == [0.0, -1.0]
    assert hook.scores(("u",), [b"low", b"medium", b"high"], [-1.0, -2.0, -3.0]) != [0.0, -1.0, -2.0]  # urgency's only
    assert hook.scores(("k",), [b"alpha", b"beta"], [-1.0, -1.0]) != [0.0, 0.0]
    assert hook.used == 2


@pytest.mark.parametrize("prefix,key", [
    ('{"product":"', "product"), ('{"product": ', "product"), ('{"a":1,"b":', "b"), ('{"a":"x, y","b":null,"c":"', "c"),
    ('{"a\\"b":"', 'a"b'), ('{"a":{"x":"', None), ('{"a":["', None), ('{"a":"va', None), ('{"', None),
    ('{"a":{"x":1},"b":', "b"), ('{"a":"}","b":', "b"), ('', None)])
def test_the_top_level_key_whose_value_starts_where_the_text_is_cut(prefix, key):
    assert top_level_key(prefix) == key


def _traced(text: str, points: list[tuple[tuple, str]]) -> Result:
    """A finished request over code-point tokens whose choices were made where each marker stands."""
    choices = [ChoiceTrace(key, [b"x"], [0.0], text.index(marker)) for key, marker in points]
    return Result("cf", [ord(c) for c in text], text, "stop", Usage(), choices=choices)


def test_points_are_owned_by_the_key_before_them_across_runs():
    decode = lambda ids: "".join(map(chr, ids))  # noqa: E731
    runs = [_traced('{"impact":"@low","urgency":"#high","x":{"level":"$low"}}', [(1, "@"), (2, "#"), (3, "$")]),
            _traced('{"impact":"@high","urgency":"#low"}', [(1, "@"), (2, "#")]),
            _traced('{"impact":"@low","urgency":"#high"}', [(4, "@"), (4, "#")])]  # one point, two fields
    assert point_owners(runs, decode) == {1: "impact", 2: "urgency", 3: None}


def test_a_point_with_an_owner_takes_its_fields_channel_only():
    """Owners known (the content-free runs met the points): each shared-values point gets its own
    field's channel; a nested point (owner None) gets none although its values match a field's."""
    impact, urgency = EnumField("impact", ("low", "high")), EnumField("urgency", ("low", "high"))
    scores = ChannelScores({"impact": [-1.0, -9.0], "urgency": [-9.0, -1.0]})
    hook = ChannelHook([impact, urgency], scores, owners={1: "impact", 2: "urgency", 3: None, 4: "flag"})
    labels = [b"low", b"high"]
    assert np.argmax(hook.scores(1, labels, [0.0, 0.0])) == 0 and np.argmax(hook.scores(2, labels, [0.0, 0.0])) == 1
    assert hook.scores(3, labels, [0.0, -1.0]) == [0.0, -1.0]  # nested
    assert hook.scores(4, [b"true", b"false"], [0.0, -1.0]) == [0.0, -1.0]  # a boolean field's point
    assert hook.scores(5, labels, [0.0, -1.0]) == [0.0, -1.0]  # unknown owner, values shared: no channel
    assert hook.used == 2
