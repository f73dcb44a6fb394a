"""Where a JSON text written token by token stands: the place of the value being written, and how
much of a string value is written so far (for the token vetoes that look at one field's value,
kvx/code_spans.py).

A place is a tuple of keys with None for any array position (kvx/record_fields.py's pattern form:
`("line_items", None, "sku")`). The cursor keeps its scan between calls, a token at a time; an
output that lost its tail since the last call (a dropped draft) is rescanned from the common prefix.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Iterator, NamedTuple

from kvx.record_fields import Place
from kvx.spelling import Spelling

QUOTE, BACKSLASH = ord('"'), ord("\\")
WHITESPACE = b" \t\r\n"


class Frame(NamedTuple):
    """One open container."""

    is_object: bool
    key: str | None = None  # an object's current key
    keys: frozenset = frozenset()  # an object's keys so far
    repeated: bool = False  # an object named one of its keys twice


@dataclass(frozen=True)
class At:
    """The scan after some output."""

    frames: tuple[Frame, ...] = ()  # the open containers, outermost first
    expect: str = "value"  # value (one starts next) | key | colon | after (a value or key just ended)
    in_string: bool = False
    is_key: bool = False  # the open string is a key
    escaped: bool = False
    start: int = -1  # byte offset of the open string's opening quote

    @property
    def place(self) -> Place:
        """The place of the value being written, or about to start."""
        return tuple(f.key if f.is_object else None for f in self.frames)

    def step(self, byte: int, offset: int, text: bytes | bytearray) -> "At":
        """The scan after one more byte (at `offset` of the output's bytes `text`)."""
        if self.in_string:
            if self.escaped:
                return replace(self, escaped=False)
            if byte == BACKSLASH:
                return replace(self, escaped=True)
            if byte != QUOTE:
                return self
            if not self.is_key:
                return replace(self, in_string=False, expect="after", start=-1)
            try:
                key = json.loads(text[self.start : offset + 1].decode("utf-8", errors="replace"))
            except ValueError:
                key = None
            frames = self.frames
            if frames:
                top = frames[-1]
                frames = frames[:-1] + (Frame(True, key, top.keys | {key}, top.repeated or key in top.keys),)
            return replace(self, frames=frames, in_string=False, is_key=False, expect="colon", start=-1)
        if byte in WHITESPACE:
            return self
        if byte == QUOTE:
            return replace(self, in_string=True, is_key=self.expect == "key", start=offset)
        if byte == ord("{"):
            return replace(self, frames=self.frames + (Frame(True),), expect="key")
        if byte == ord("["):
            return replace(self, frames=self.frames + (Frame(False),), expect="value")
        if byte in b"}]":
            return replace(self, frames=self.frames[:-1], expect="after")
        if byte == ord(":"):
            return replace(self, expect="value")
        if byte == ord(","):
            return replace(self, expect="key" if self.frames and self.frames[-1].is_object else "value")
        return replace(self, expect="after")  # inside a number or literal


class JsonCursor:
    def __init__(self, spelling: Spelling):
        self.spelling = spelling
        self._ids: list[int] = []
        self._text = bytearray()
        self._ends: list[int] = []  # text length after each scanned token
        self._states: list[At] = [At()]  # the scan after each scanned token (index 0: before any)

    def at(self, output_ids: list[int]) -> At:
        keep = min(len(self._ids), len(output_ids))
        if output_ids[:keep] != self._ids[:keep]:
            keep = next(i for i, (a, b) in enumerate(zip(output_ids, self._ids)) if a != b)
        del self._ids[keep:], self._ends[keep:], self._states[keep + 1:]
        del self._text[self._ends[-1] if self._ends else 0:]
        state = self._states[-1]
        for token in output_ids[keep:]:
            offset = len(self._text)
            self._text += self.spelling.of(token)
            for i in range(offset, len(self._text)):
                state = state.step(self._text[i], i, self._text)
            self._ids.append(token)
            self._ends.append(len(self._text))
            self._states.append(state)
        return state

    def through(self, output_ids: list[int], token: int) -> Iterator[tuple[At, int]]:
        """(the scan before the byte, the byte) for each byte `token` would add after output_ids."""
        state = self.at(output_ids)
        text = self._text + self.spelling.of(token)
        for i in range(len(self._text), len(text)):
            yield state, text[i]
            state = state.step(text[i], i, text)

    def written(self, state: At, last: int | None = None) -> bytes:
        """The open string value's bytes so far, its opening quote included (after `at`); only its
        `last` bytes where it is longer."""
        if not state.in_string:
            return b""
        return bytes(self._text[state.start if last is None else max(state.start, len(self._text) - last):])
