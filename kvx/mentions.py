"""How much a record's text names each value of an enum field (`--mentions`, with `--choices
calibrated` or `channel`).

A 135M model hears the subject of a text faintly (the labelled complaints: 58% balanced product
accuracy with the channel alone). The words of the values themselves are a signal no decoder
reads: the mention score of a value is, over its words, the mean of
idf(word) x log(1 + count of the word in the text), where idf = log(values / values holding the
word): a word every value shares tells them apart by nothing ("loan", in three loan types of nine,
counts less than "mortgage", in one). The channel hook (ChannelHook, kvx/channel.py) adds
MENTION_WEIGHT x that score to the field's choice, so a value the text keeps naming wins unless the
model is sure otherwise; where the text names no value's words the model decides alone.

Words are compared by a light stem (plural, -ing, -ed, -er, -ion endings stripped; a stem of five
letters or more also matches its longer forms: "collect" ~ "collector", "report" ~ "reporting").
Function words and words under three letters never count ("no" and "other" are in most texts).
The endings are English ones: in another language, only a value's words as written (or their
longer forms) count.
"""
from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

# log-probability units per mention unit; tuned on ../shared/eval (product balanced accuracy
# 62-76% over weights 2-20 against 58% without; see README, extraction quality)
MENTION_WEIGHT = 4.0
MIN_LETTERS = 3
FUNCTION_WORDS = frozenset(
    "the and for not but nor yet with from into onto over under about other others any all none "
    "some this that these those its our your their his her was were are has have had been being "
    "yes per via etc".split())
_SUFFIXES = ("ings", "ing", "ions", "ion", "ers", "er", "ed", "es", "s")  # longest first
_WORD = re.compile(r"[^\W_]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def stem(word: str) -> str:
    """The word less its first ending that leaves four letters (three for a plural -s: "fees")."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= (MIN_LETTERS if suffix == "s" else 4):
            return word[: -len(suffix)]
    return word


def _same(a: str, b: str) -> bool:
    """Two stems name the same word: equal, or the shorter (five letters or more) starts the longer."""
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    return short == long_ or (len(short) >= 5 and long_.startswith(short))


def value_words(value: str) -> list[str]:
    """A value's content words, stemmed: snake_case, kebab-case and CamelCase split."""
    words = _WORD.findall(_CAMEL.sub(" ", value).lower())
    return [stem(w) for w in words if len(w) >= MIN_LETTERS and w not in FUNCTION_WORDS and not w.isdigit()]


def value_mentions(values: Sequence[str | None], text: str) -> list[float]:
    """Each value's mention score in `text` (0 for null and for values without content words)."""
    words = [value_words(v) if v is not None else [] for v in values]
    holding = Counter(w for ws in words for w in set(ws))
    counts = Counter(stem(w) for w in _WORD.findall(text.lower()) if len(w) >= MIN_LETTERS)
    count_of: dict[str, int] = {}
    for w in holding:
        count_of[w] = sum(n for s, n in counts.items() if _same(w, s))
    out = []
    for ws in words:
        if not ws:
            out.append(0.0)
            continue
        out.append(sum(math.log(len(values) / holding[w]) * math.log1p(count_of[w]) for w in ws) / len(ws))
    return out
