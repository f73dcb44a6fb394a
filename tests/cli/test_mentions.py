"""Mention scores (kvx/mentions.py): how much a record's text names each enum value, against the
documented formula worked by hand here, and how the channel hook adds them to a choice."""
from __future__ import annotations

import math

import numpy as np
import pytest

from kvx.channel import CHANNEL_WEIGHT, ChannelHook, ChannelScores, EnumField
from kvx.mentions import MENTION_WEIGHT, stem, value_mentions, value_words

PRODUCT = ("credit reporting", "debt collection", "mortgage", "student loan", "personal loan")


def test_a_value_scores_its_words_counts_weighted_by_how_few_values_hold_them():
    text = ("My mortgage servicer sold the mortgage; then debt collectors called about a debt I never had. "
            "I took a student loan once.")
    got = value_mentions(PRODUCT, text)
    n = len(PRODUCT)
    idf = {"once": math.log(n), "loan": math.log(n / 2)}
    want = [0.0,  # credit reporting: neither word in the text
            (idf["once"] * math.log(1 + 2) + idf["once"] * math.log(1 + 1)) / 2,  # debt x2, collect(ors) x1
            idf["once"] * math.log(1 + 2),  # mortgage x2
            (idf["once"] * math.log(1 + 1) + idf["loan"] * math.log(1 + 1)) / 2,  # student, loan
            (0.0 + idf["loan"] * math.log(1 + 1)) / 2]  # personal: absent; loan shared with student loan
    assert got == pytest.approx(want)
    assert int(np.argmax(got)) == 2


def test_words_every_value_holds_short_words_function_words_and_null_count_nothing():
    assert value_mentions(("card loan", "car loan"), "loan loan loan") == [0.0, 0.0]  # loan in both
    assert value_mentions(("no", "other", None), "no other way, no") == [0.0, 0.0, 0.0]
    assert value_mentions(("alpha", "beta"), "nothing of the kind") == [0.0, 0.0]


@pytest.mark.parametrize("value,words", [("feature_request", ["feature", "request"]), ("FeatureRequest", ["feature", "request"]),
                                         ("debt-collection", ["debt", "collect"]), ("checking or savings", ["check", "saving"]),
                                         ("HTTP2 errors", ["http2", "error"])])
def test_value_words_split_case_styles_and_are_stemmed(value, words):
    assert value_words(value) == words


@pytest.mark.parametrize("a,b,same", [("reported", "reporting", True), ("collectors", "collection", True),
                                      ("cards", "card", True), ("cardholder", "card", False), ("transfer", "transunion", False),
                                      ("transfers", "transferred", True), ("accounts", "account", True)])
def test_stems_match_forms_of_one_word_only(a, b, same):
    assert (value_mentions((a, "zzz"), b)[0] > 0) == same, (stem(a), stem(b))


KIND = EnumField("kind", ("alpha", "beta", "gamma ray"))


def test_the_hook_adds_weighted_mentions_to_the_channel_and_base_scores():
    channel, mentions = [-40.0, -43.0, -41.5], [0.0, 1.5, 0.25]
    hook = ChannelHook([KIND], ChannelScores({"kind": channel}, {"kind": mentions}))
    labels, logprobs = [b"gamma ray", b"beta"], [-1.0, -2.0]  # a subset, in the grammar's order
    raw = np.array([channel[2], channel[1]])
    want = np.array(logprobs) + CHANNEL_WEIGHT * (raw - np.logaddexp.reduce(raw)) + MENTION_WEIGHT * np.array([0.25, 1.5])
    assert hook.scores(("k",), labels, logprobs) == pytest.approx(want.tolist())
    # without channel scores (the prompt did not fit the context) the mentions still count
    alone = ChannelHook([KIND], ChannelScores({}, {"kind": mentions}))
    assert alone.scores(("k",), labels, logprobs) == pytest.approx([-1.0 + MENTION_WEIGHT * 0.25, -2.0 + MENTION_WEIGHT * 1.5])
    # another field's point gets neither
    assert hook.scores(("n",), [b"null", b""], [-1.0, -2.0]) == [-1.0, -2.0]


def test_with_mentions_scores_every_field_from_the_whole_text():
    fields = [KIND, EnumField("mood", ("calm", "angry", None))]
    got = ChannelScores({"kind": [-1.0, -2.0, -3.0]}).with_mentions(fields, "calm now. " * 50 + "a gamma ray at the end")
    assert got.fields == {"kind": [-1.0, -2.0, -3.0]}
    assert got.mentions["kind"][2] > 0 and got.mentions["kind"][:2] == [0.0, 0.0]  # named only after 300 words
    assert got.mentions["mood"][0] > 0 and got.mentions["mood"][1:] == [0.0, 0.0]
