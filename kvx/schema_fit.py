"""The schema's field list shortened to a token budget, so a big schema still leaves the prompt room
for the record's text.

Real-world schemas describe themselves at length: of the 714 corpus schemas
(benchmarks/grammar_coverage.py), 102 give a field list over 4,000 tokens and 60 over 7,000, past
what an 8k context can spare. The list is shortened a step at a time, the least useful detail
first (long descriptions, then descriptions, long enums, deep levels), and at the end only as many
top-level fields are listed as fit. The grammar enforces the whole schema whatever the prompt says.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from kvx.schema_text import FULL, Detail, TooLong, field_lines

# Each step drops more; the first whose list fits is used.
STEPS: tuple[tuple[Detail, str | None], ...] = (
    (FULL, None),
    (Detail(descriptions=160), "descriptions cut to 160 characters"),
    (Detail(descriptions=0, enum_values=12), "no descriptions, 12 enum values"),
    (Detail(descriptions=0, enum_values=12, depth=2), "no descriptions, 12 enum values, 3 levels"),
    (Detail(descriptions=0, enum_values=6, depth=1), "no descriptions, 6 enum values, 2 levels"),
    (Detail(descriptions=0, enum_values=6, depth=0), "top-level fields only"),
)
CHARS_PER_TOKEN = 8  # a field list is cut off once its characters pass this many per budget token


@dataclass(frozen=True)
class FieldList:
    text: str
    tokens: int
    shortened: str | None  # how, when the whole list did not fit: "no descriptions, ...", None if whole
    fields_left_out: int = 0  # top-level fields not listed (the last step only)


def fitted_field_list(schema: dict, count_tokens: Callable[[str], int], budget: int | None) -> FieldList:
    """The schema's field list at the most detail that fits `budget` tokens (None: no limit)."""
    for detail, how in STEPS:
        try:
            lines = field_lines(schema, detail, None if budget is None else budget * CHARS_PER_TOKEN)
        except TooLong:
            continue
        text = "\n".join(lines)
        tokens = count_tokens(text)
        if budget is None or tokens <= budget:
            return FieldList(text, tokens, how)
    return _first_fields(schema, count_tokens, budget)


def _first_fields(schema: dict, count_tokens: Callable[[str], int], budget: int) -> FieldList:
    """As many top-level fields as fit, and a line saying how many more the output holds."""
    lines = field_lines(schema, STEPS[-1][0])
    lo, hi = 0, len(lines)  # the most lines that fit, by bisection (each try counts the whole text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count_tokens(_with_rest(lines, mid)) <= budget:
            lo = mid
        else:
            hi = mid - 1
    text = _with_rest(lines, lo)
    return FieldList(text, count_tokens(text), f"the first {lo} of {len(lines)} top-level fields",
                     fields_left_out=len(lines) - lo)


def _with_rest(lines: list[str], n: int) -> str:
    rest = len(lines) - n
    return "\n".join(lines[:n] + [f"- ... and {rest} more fields, not listed here"] * bool(rest))
