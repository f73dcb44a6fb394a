"""Free text the grammar cut at its maxLength ends at its last full sentence.

A small model rarely ends a long free-text value by itself: it writes on until the string's
maxLength, where the grammar closes it mid-sentence, often mid-word ("... I have a lot of accounts
and"); 95 of the default model's 126 complaint summaries ended so. With `--cut-text sentence` (the
default) a value that reached its maxLength without ending a sentence is cut back to the end of its
last full sentence, if that end lies in its second half (an early "St." or "Jan." never counts)
and what is left still meets minLength; `keep` leaves it. Only what the model wrote is kept,
nothing is added, and the job checks the record against the schema again (a cut that would break
it is not made). Fields: strings without enum, const, format or pattern and with a maxLength,
nullable or not, nested and in arrays too (kvx/record_fields.py).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from kvx.grammar.schema.keywords import LONG_COUNT
from kvx.record_fields import Place, leaf_fields, places, replaced

CutText = Literal["sentence", "keep"]  # a free-text value that ran into its maxLength (--cut-text)
SENTENCE_END = re.compile(r"[.!?][\"')\]]?(?=\s)")  # a sentence's last character, before a space
ENDED = re.compile(r"[.!?][\"')\]]?\s*$")  # a value whose last sentence is whole
FIXED = ("enum", "const", "format", "pattern")  # strings whose form the schema sets: not prose


def _bounds(node: dict, optional: bool) -> tuple[int, int] | None:
    """(minLength, maxLength) of a free-text string field, else None."""
    types = node.get("type")
    types = [types] if isinstance(types, str) else types
    if any(k in node for k in FIXED) or not isinstance(types, list) or "string" not in types \
            or any(t not in ("string", "null") for t in types):
        return None
    lo, hi = node.get("minLength", 0), node.get("maxLength")
    whole = all(isinstance(x, int) and not isinstance(x, bool) for x in (lo, hi))
    # over LONG_COUNT the grammar leaves the bound to the check: it never cuts the value there
    return (lo, hi) if whole and hi <= LONG_COUNT else None


def at_sentence_end(value: str, lo: int, hi: int) -> str | None:
    """value cut back to its last full sentence; None where it stays (it ended before its bound or
    with a whole sentence, or no sentence ends in its second half, or the cut would be under lo)."""
    if len(value) < hi or ENDED.search(value):
        return None
    end = max((m.end() for m in SENTENCE_END.finditer(value)), default=0)
    return value[:end] if 2 * end >= len(value) and end >= max(lo, 1) else None


@dataclass
class TextCut:
    fields: dict[Place, tuple[int, int]]  # pattern -> (minLength, maxLength)

    @classmethod
    def of(cls, schema: dict) -> TextCut:
        return cls(leaf_fields(schema, _bounds))

    def cut(self, record: Any) -> tuple[Any, list[Place]]:
        """The record with its cut-off values ended at their last full sentence, and the patterns of
        the fields changed (one per value)."""
        new, where = {}, []
        for pattern, (lo, hi) in self.fields.items():
            for path, value in places(record, pattern):
                short = at_sentence_end(value, lo, hi) if isinstance(value, str) else None
                if short is not None:
                    new[path] = short
                    where.append(pattern)
        return (replaced(record, new), where) if new else (record, [])
