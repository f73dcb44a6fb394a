"""The numbers a text states, however it writes them, so an amount the model wrote in digits counts as
the text's.

Read: digits (`$1,200.50`), digits with a scale word (`2.5 million`, `3k`), number words
(`five`, `twenty-five`, `two hundred and fifty`, `fifteen hundred`, `a thousand`), and a percentage
also as its fraction (`7%` and `7 percent` are 7 and 0.07: a rate field may hold either).
"""
from __future__ import annotations

import re

from kvx.copy_check import NUMBER

SCALED = re.compile(rf"({NUMBER.pattern})(?:\s*(thousand|million|billion|k|m|bn)\b)?", re.I)  # copy_check's numbers, scaled
SCALES = {"thousand": 1e3, "k": 1e3, "million": 1e6, "m": 1e6, "billion": 1e9, "bn": 1e9}
PERCENT = re.compile(rf"({NUMBER.pattern})\s*(?:%|percent\b|per cent\b)", re.I)
UNITS = {w: i for i, w in enumerate("zero one two three four five six seven eight nine ten eleven twelve thirteen "
                                    "fourteen fifteen sixteen seventeen eighteen nineteen".split())}
TENS = {w: 10 * i for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split(), start=2)}
MULTIPLIERS = {"hundred": 100, "thousand": 1e3, "million": 1e6, "billion": 1e9}
WORD = re.compile(r"[a-z]+")


def _float(digits: str) -> float:
    return float(digits.replace(",", ""))


def _digits(text: str) -> list[float]:
    return [_float(m.group(1)) * SCALES.get((m.group(2) or "").lower(), 1) for m in SCALED.finditer(text)]


def _percents(text: str) -> list[float]:
    return [_float(m.group(1)) / 100 for m in PERCENT.finditer(text)]


def _words(text: str) -> list[float]:
    """Each run of number words as one number (`two hundred and fifty` is 250)."""
    found: list[float] = []
    total, current, in_run, last = 0.0, 0.0, False, ""

    def close() -> None:
        nonlocal total, current, in_run
        if in_run:
            found.append(total + current)
        total, current, in_run = 0.0, 0.0, False

    for w in WORD.findall(text.lower()):
        if w in UNITS or w in TENS:
            value = UNITS.get(w, TENS.get(w, 0))
            if in_run and (last in UNITS or (last in TENS and w in TENS)):  # "one two": two numbers
                close()
            current += value
            in_run = True
        elif w in MULTIPLIERS and (in_run or last == "a"):
            base = current or 1.0  # "a hundred", "hundred" after a multiplier
            if w == "hundred":
                current = base * 100
            else:
                total += base * MULTIPLIERS[w]
                current = 0.0
            in_run = True
        elif w == "and" and in_run and last in MULTIPLIERS:
            pass  # "two hundred and fifty" (but "five and ten" are two numbers)
        else:
            close()
        last = w
    close()
    return found


def text_values(text: str) -> list[float]:
    """Every number the text states (see the module doc)."""
    return _digits(text) + _percents(text) + _words(text)
