"""Scoring extracted records against labels: enum accuracy with its baselines, company names, numbers.

- enum fields: accuracy, the majority-class baseline (always answer the commonest label), and
  balanced accuracy (the mean of the per-class recalls over the classes in the labels: a constant
  answer scores 1 / number of classes, whatever the class sizes);
- company names: case- and punctuation-insensitive. `exact` compares the whole normalised names;
  `name` compares the names without legal-form words (`TransUnion` names `TRANSUNION INTERMEDIATE
  HOLDINGS, INC.`). Null and non-null are counted apart: a text that does not name the company
  (it was redacted as XXXX) should give null, one that names it should give the name;
- numbers: right within one cent; without labels, a number counts as grounded if the text holds it;
- free text (the summary): whether it loops, repeating a phrase of three words its text lacks
  (words as letters and digits, case aside; counted on the text, whatever the tokenizer), and
  whether it stops mid-sentence (its last character is no `.`, `!` or `?`);
- digits: whether any string of a record holds a run of digits that no run of digits of its text
  holds (as a part; a grouped number such as 1,200 also counts joined), as kvx/digit_guard.py reads
  it, but over every string and written out again here.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from kvx.copy_check import CENT, leaves, text_numbers

LEGAL_WORDS = {"inc", "llc", "corp", "corporation", "company", "co", "na", "n", "a", "national", "association",
               "holdings", "intermediate", "group", "the", "plc", "ltd", "lp", "fsb"}
GENERIC_FIRST = {"bank", "first", "american", "united", "credit", "capital", "citizens", "national"}


def normalise(name: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9 ]+", " ", name.lower().replace("&", " ")).split())


def core_words(name: str) -> list[str]:
    return [w for w in normalise(name).split() if w not in LEGAL_WORDS]


def names_match(pred: str, label: str) -> bool:
    """The prediction's core words are the label's first core words (or all of them, reordered)."""
    p, lab = core_words(pred), core_words(label)
    if not p or not lab:
        return False
    return p[0] == lab[0] and set(p) <= set(lab)


def named_in(text: str, label: str) -> bool:
    """Whether the text names the labelled company (its distinctive first word, or its whole core name)."""
    words, core = set(normalise(text).split()), core_words(label)
    if not core:
        return False
    if core[0] not in GENERIC_FIRST and len(core[0]) >= 3:
        return core[0] in words
    return " ".join(core) in normalise(text)


@dataclass
class EnumScore:
    n: int
    accuracy: float
    majority: float  # accuracy of always answering the commonest label
    majority_label: str
    balanced: float
    top_share: float  # share of the commonest prediction (1.0: the same answer for every text)
    predicted: Counter


def score_enum(preds: list[Any], labels: list[str]) -> EnumScore:
    counts = Counter(labels)
    majority_label, majority_n = counts.most_common(1)[0]
    recall = [sum(p == c for p, lab in zip(preds, labels) if lab == c) / n for c, n in counts.items()]
    predicted = Counter(preds)
    return EnumScore(len(labels), sum(p == lab for p, lab in zip(preds, labels)) / len(labels),
                     majority_n / len(labels), majority_label, sum(recall) / len(recall),
                     predicted.most_common(1)[0][1] / len(preds), predicted)


@dataclass
class NameScore:
    n: int
    accuracy: float  # named texts with the right name + unnamed texts with null, over all
    exact: int  # normalised whole-name matches
    named: int  # texts that name the company
    named_right: int  # ... answered with its name
    named_null: int  # ... answered null
    unnamed: int
    unnamed_null: int  # texts that do not name it, answered null
    majority: float  # accuracy of always answering the commonest label's name (null for none)


def score_company(preds: list[Any], labels: list[str], texts: list[str]) -> NameScore:
    named = [named_in(t, lab) for t, lab in zip(texts, labels)]
    right = [isinstance(p, str) and names_match(p, lab) for p, lab in zip(preds, labels)]
    exact = sum(isinstance(p, str) and normalise(p) == normalise(lab) for p, lab in zip(preds, labels))
    common = Counter(labels).most_common(1)[0][0]
    const = sum((names_match(common, lab) if n else False) for n, lab in zip(named, labels))
    good = sum(r if n else p is None for p, r, n in zip(preds, right, named))
    return NameScore(
        n=len(labels), accuracy=good / len(labels), exact=exact, named=sum(named),
        named_right=sum(r for r, n in zip(right, named) if n),
        named_null=sum(p is None for p, n in zip(preds, named) if n),
        unnamed=len(labels) - sum(named), unnamed_null=sum(p is None for p, n in zip(preds, named) if not n),
        majority=const / len(labels))


def number_right(pred: Any, label: Any) -> bool:
    if label is None or pred is None:
        return pred is None and label is None
    return isinstance(pred, (int, float)) and abs(pred - float(label)) < CENT


@dataclass
class NumberScore:
    n: int
    nulls: int
    grounded: int  # non-null values the text holds (within a cent)
    right: int | None  # against labels, when the set has them


def score_number(preds: list[Any], texts: list[str], labels: list[Any] | None = None) -> NumberScore:
    grounded = sum(p is not None and any(abs(p - x) < CENT for x in text_numbers(t)) for p, t in zip(preds, texts))
    right = None if labels is None else sum(number_right(p, lab) for p, lab in zip(preds, labels))
    return NumberScore(len(preds), sum(p is None for p in preds), grounded, right)


def loops(value: str | None, text: str, n: int = 3) -> bool:
    """Whether value repeats a run of n words that the text does not hold."""
    words = re.findall(r"\w+", (value or "").lower())
    held = " ".join(re.findall(r"\w+", text.lower()))
    seen: set[str] = set()
    for i in range(len(words) - n + 1):
        gram = " ".join(words[i:i + n])
        if gram in seen and gram not in held:
            return True
        seen.add(gram)
    return False


def unfinished(value: str | None) -> bool:
    """Whether a free-text value stops mid-sentence."""
    return bool(value) and not re.search(r"[.!?][\"')\]]?\s*$", value)


def invented_digits(record: Any, text: str) -> bool:
    """Whether a string of the record holds a run of digits that its text does not."""
    held = set(re.findall(r"\d+", text)) | {re.sub(r"\D", "", m) for m in re.findall(r"\d{1,3}(?:[,' ]\d{3})+", text)}
    return any(not any(run in h for h in held) for _, s in leaves(record) if isinstance(s, str) for run in re.findall(r"\d+", s))
