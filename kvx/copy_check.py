"""Values a record copied from the few-shot examples' outputs although its own text does not hold them.

A small model given one worked example tends to answer the example's name, amount and reference for
every record. A value counts as copied when it equals (case-insensitive for text, within a cent for
numbers) the value an example output has at the same place (array positions ignored) and the
record's text does not contain it. Values the schema itself lists (enum and const members) and
booleans are never counted: every record may rightly share them.

`CopyCheck` counts such records (the --examples warning); `CopyGuard` keeps a greedy decode from
writing them: it vetoes a token that would make the value being written the start (3 characters
or more) of an example value, or would end it with a run of 10 characters from inside one, where
the record's text lacks that start or run; the engine then takes the next best token. The example
still shows the format; its values are not there to be repeated.
"""
from __future__ import annotations

import re
from typing import Any, Iterator

from kvx.spelling import Spelling

NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
CENT = 0.005


def leaves(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """(JSON pointer with array positions as `*`, value) for every string and number in value."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from leaves(v, f"{path}/{k}")
    elif isinstance(value, list):
        for v in value:
            yield from leaves(v, f"{path}/*")
    elif isinstance(value, str) or (isinstance(value, (int, float)) and not isinstance(value, bool)):
        yield path, value


def schema_strings(schema: Any) -> set[str]:
    """Every string an `enum` or `const` of the schema lists (lower-cased)."""
    found: set[str] = set()
    if isinstance(schema, dict):
        for key, sub in schema.items():
            if key == "enum" and isinstance(sub, list):
                found.update(v.lower() for v in sub if isinstance(v, str))
            elif key == "const" and isinstance(sub, str):
                found.add(sub.lower())
            else:
                found |= schema_strings(sub)
    elif isinstance(schema, list):
        for sub in schema:
            found |= schema_strings(sub)
    return found


def text_numbers(text: str) -> list[float]:
    return [float(m.replace(",", "")) for m in NUMBER.findall(text)]


def in_text(value: str | float, lowered: str, numbers: list[float]) -> bool:
    """Whether a text (lower-cased, and its numbers) holds the value: a string case-insensitively,
    a number to the cent."""
    if isinstance(value, str):
        return value.strip().lower() in lowered
    return number_in(value, numbers)


def number_in(value: float, numbers: list[float]) -> bool:
    """Whether `value` is one of `numbers`, to the cent."""
    return any(abs(value - n) < CENT for n in numbers)


def _same(value: Any, example: Any) -> bool:
    """A record's value equal to an example's: strings case- and space-insensitively, numbers to the cent."""
    if isinstance(value, str) and isinstance(example, str):
        return value.strip().lower() == example.strip().lower()
    return isinstance(value, (int, float)) and isinstance(example, (int, float)) and abs(value - example) < CENT


class CopyCheck:
    def __init__(self, example_outputs: list[Any], schema: dict):
        listed = schema_strings(schema)
        self.values: dict[str, list[Any]] = {}
        for output in example_outputs:
            for path, v in leaves(output):
                if isinstance(v, str) and (not v.strip() or v.strip().lower() in listed):
                    continue
                self.values.setdefault(path, []).append(v)

    def copied(self, record: Any, text: str) -> list[str]:
        """Pointers of the record's values copied from an example and absent from its text."""
        lowered, numbers = text.lower(), text_numbers(text)
        return [path for path, v in leaves(record)
                if any(_same(v, ex) for ex in self.values.get(path, ())) and not in_text(v, lowered, numbers)]


MIN_COPY = 3  # characters of an example value's start a record may repeat before the guard steps in
COPY_RUN = 10  # characters from anywhere inside an example value that count as copying it
SPECIAL = re.compile(r'[:,\[{]')  # bytes after which a new value starts


class CopyGuard:
    """A token veto (kvx.engine.api.TokenVeto) for one record: no example value its text lacks."""

    def __init__(self, check: CopyCheck, text: str, spelling: Spelling):
        self.text = text.lower()
        numbers = text_numbers(text)
        values = set()
        for v in (v for vals in check.values.values() for v in vals if not in_text(v, self.text, numbers)):
            values.update({v.strip().lower()} if isinstance(v, str) else {f"{v:g}", str(v)})
        self.values = [v for v in values if len(v) >= MIN_COPY]
        self.spelling = spelling

    def vetoes(self, output_ids: list[int], token: int) -> bool:
        if not self.values or not self.spelling.knows(token):
            return False
        tail = self.spelling(output_ids[-48:]) + self.spelling.of(token)
        value = self._value(tail.decode("utf-8", errors="ignore"))
        if len(value) >= MIN_COPY and value not in self.text and any(v.startswith(value) for v in self.values):
            return True
        run = value[-COPY_RUN:]
        return len(run) == COPY_RUN and run not in self.text and any(run in v for v in self.values)

    def allowed(self, output_ids: list[int]) -> list[int] | None:
        return None  # refuses a few tokens; names none

    @staticmethod
    def _value(text: str) -> str:
        """The value being written at the end of the output: after the last `:`, `,`, `[` or `{`,
        without its opening quote, up to a closing one."""
        starts = [m.end() for m in SPECIAL.finditer(text)]
        value = text[starts[-1]:] if starts else text
        value = value.lstrip(" ")
        if value.startswith('"'):
            value = value[1:]
        return value.split('"', 1)[0].lower()
