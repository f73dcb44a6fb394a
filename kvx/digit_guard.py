"""Digits in free text come from the text (`--copy-digits`, the default).

A small model that starts a number in a summary or a name rarely stops at one the text holds: on
the demo's 60 tickets the default model wrote "123456789012345678", "2022-01-01 12:00:00",
"1_1_1_1_11_11_11_20_20_..." and "Billing-82510-M-8-10-20-20-20-..." into 7 records' strings, and on
the 126 labelled complaints "15 USC 1511", "1000000001" or "at most 240 characters" into 17. A
number the text lacks is the most harmful thing a summary can invent (an amount, a date, an id).

`DigitGuard` is a token veto (kvx.engine.api.TokenVeto) for one record: inside a string value it
refuses a token that would write a run of digits that no run of digits in the record's text holds
(as a whole or as a part: "20" of "2023" passes, and "1200" where the text writes "1,200"); the
engine then takes the next best token. Words, keys, JSON numbers and literals are never touched;
nor are string fields whose schema shapes their digits (a `pattern`, a `format` such as a date, an
`enum` or `const`): a date normalised to ISO form may rightly hold digits the text spells out.
"""
from __future__ import annotations

import re
from typing import Any, Iterator

from kvx.json_cursor import JsonCursor
from kvx.record_fields import Place, leaf_fields

DIGITS = re.compile(rb"[0-9]+")
DIGIT_BYTES = b"0123456789"
GROUPED = re.compile(r"\d{1,3}(?:[,' ]\d{3})+")  # 1,200 / 1'200 / 1 200: the run as written without them
SHAPING = ("pattern", "format", "enum", "const")  # string keywords that decide what digits a value holds
QUOTE, BACKSLASH = ord('"'), ord("\\")
TAIL = 64  # bytes of the open string read back at a digit token (a run cut there is a part of the whole one)


def held_runs(text: str) -> bytes:
    """The text's runs of digits (and grouped numbers without their separators), each between
    `|`s, so that a run is held where it is a substring of this."""
    runs = [m.group() for m in DIGITS.finditer(text.encode("utf-8"))]
    runs += [re.sub(r"\D", "", m.group()).encode() for m in GROUPED.finditer(text)]
    return b"|" + b"|".join(runs) + b"|"


def _shaped(node: dict, optional: bool) -> bool | None:
    types = node.get("type")
    stringy = types is None or types == "string" or (isinstance(types, list) and "string" in types)
    return True if stringy and any(k in node for k in SHAPING) else None


def shaped_places(schema: Any) -> frozenset[Place]:
    """Place patterns of the string fields whose schema shapes their digits (left alone)."""
    return frozenset(leaf_fields(schema, _shaped)) if isinstance(schema, dict) else frozenset()


class DigitGuard:
    """A token veto for one record: inside a string value that no `pattern`/`format`/`enum` shapes,
    only runs of digits its text holds."""

    def __init__(self, text: str, cursor: JsonCursor, shaped: frozenset[Place] = frozenset()):
        self.held = held_runs(text)
        self.shaped = shaped
        self.cursor = cursor  # the record's scan, shared with its other JSON-reading guards
        self.spelling = cursor.spelling

    def vetoes(self, output_ids: list[int], token: int) -> bool:
        if token not in self.spelling.holding_any(DIGIT_BYTES):  # the hot path: most tokens hold no digit
            return False
        state = self.cursor.at(output_ids)
        if not state.in_string or state.is_key or state.place in self.shaped:
            return False
        # only the string's end can hold the run a token extends (long values: no copy, no rescan)
        written = self.cursor.written(state, last=TAIL + 1)
        if len(written) > TAIL:  # cut (or just the quote and TAIL bytes): read as a string of its last TAIL
            written = b'"' + written[1:]
        return any(run not in self.held for run in _new_runs(written, written + self.spelling.of(token)))

    def allowed(self, output_ids: list[int]) -> list[int] | None:
        return None  # refuses a few tokens; names none


def _new_runs(written: bytes, data: bytes) -> Iterator[bytes]:
    """The run of digits each digit of data past `written` ends (data: a string from its opening
    quote); escapes (`\\n`, `\\u0039`) are no digits, and the string's closing quote ends the scan."""
    run, i = b"", 1
    while i < len(data):
        byte = data[i]
        if byte == BACKSLASH:
            i, run = i + (6 if data[i + 1 : i + 2] == b"u" else 2), b""
            continue
        if byte == QUOTE:
            return
        if 48 <= byte <= 57:
            run += data[i : i + 1]
            if i >= len(written):
                yield run
        else:
            run = b""
        i += 1
