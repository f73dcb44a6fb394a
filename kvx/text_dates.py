"""Calendar dates a text states, however it spells them, so a normalised date counts as the text's.

A model asked for a date writes it its own way (`2024-03-05`) where the text says `March 5th, 2024`
or `3/5/24`: the same date, not an invented one. Spellings read: ISO `2024-03-05` (also with `/` or
`.`), numeric `5/3/2024` (day/month and month/day both taken: the text alone cannot tell), month
names `March 5, 2024`, `Mar. 5th 2024`, `5 March 2024`, `5th of March, 2024`, two-digit years as
19xx and 20xx. A date without its year is not one: a year the model added is invented.
"""
from __future__ import annotations

import re

Date = tuple[int, int, int]  # (year, month, day)

MONTHS = {name: i + 1 for i, names in enumerate((
    "january jan", "february feb", "march mar", "april apr", "may", "june jun", "july jul",
    "august aug", "september sep sept", "october oct", "november nov", "december dec"))
    for name in names.split()}
_MONTH = r"(?P<mon>" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>\d{4}|\d{2})"
SPELLINGS = [re.compile(p, re.I) for p in (
    r"(?<!\d)(?P<year>\d{4})[-/.](?P<a>\d{1,2})[-/.](?P<b>\d{1,2})(?!\d)",  # ISO order
    r"(?<!\d)(?P<a>\d{1,2})[-/.](?P<b>\d{1,2})[-/.]" + _YEAR + r"(?!\d)",  # d/m/y or m/d/y
    r"\b" + _MONTH + r"\s+" + _DAY + r",?\s+" + _YEAR + r"(?!\d)",  # March 5, 2024
    r"(?<!\d)" + _DAY + r"\s+(?:of\s+)?" + _MONTH + r",?\s+" + _YEAR + r"(?!\d)",  # 5 March 2024
)]


def _years(text: str) -> list[int]:
    y = int(text)
    return [y] if len(text) == 4 else [1900 + y, 2000 + y]


def _valid(dates: list[Date]) -> list[Date]:
    return [(y, m, d) for y, m, d in dates if 1 <= m <= 12 and 1 <= d <= 31]


def _dates_of(match: re.Match) -> list[Date]:
    parts = match.groupdict()
    if parts.get("mon"):
        month, day = MONTHS[parts["mon"].lower()], int(parts["day"])
        return _valid([(y, month, day) for y in _years(parts["year"])])
    a, b = int(parts["a"]), int(parts["b"])
    if len(parts["year"]) == 4 and match.start("year") == match.start():  # 2024-03-05: year first
        return _valid([(int(parts["year"]), a, b)])
    return _valid([(y, m, d) for y in _years(parts["year"]) for m, d in ((a, b), (b, a))])


def dates_in(text: str) -> set[Date]:
    """Every date the text spells, each reading of an ambiguous one included."""
    return {date for pattern in SPELLINGS for m in pattern.finditer(text) for date in _dates_of(m)}


def as_dates(value: str) -> set[Date]:
    """The readings of `value` if the whole of it spells a date (surrounding spaces aside), else none."""
    value = value.strip()
    return {date for pattern in SPELLINGS if (m := pattern.fullmatch(value)) for date in _dates_of(m)}
