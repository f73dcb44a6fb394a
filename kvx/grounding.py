"""Values a record states that its own text does not hold, in fields that may say null instead.

A nullable field that takes free text or a number (`"type": ["string", "null"]`, or Pydantic's
`Optional[str]`: `anyOf` of a string and null) asks for a value *from the text*, or null where the
text has none: a company "as named in the text", an order reference, an amount. A small model fills
such a field anyway: on the labelled complaints the default model wrote a company for 23 of 75
texts that name none (often the product it had just chosen), and 50 of 63 amounts the text does
not hold. Such a value is invented, so `--ungrounded null` (the default) writes null instead;
`keep` keeps it. Either way the row's `ungrounded` column names each one with the value the model
wrote, and the job counts them per field (the summary and `--stats`).

A string that spells (letters and digits alone) the value the record chose for one of its closed
fields (an enum or const of strings) is ungrounded too, whatever the text holds: it echoes the
model's own choice rather than quoting the text. On the labelled complaints the default model wrote
the product it had just chosen (`credit reporting`) as the company for 6 of the 75 texts that name
none (none of the 126 labelled companies is spelt like a product).

Grounded means: a string's letters and digits occur in the text's, in order (case, spacing and
punctuation aside: `FitTrack 2` holds `fit-track-2`); a number equals, to the cent, one of the
text's numbers (kvx/text_numbers.py): in digits (`$1,200.50`), with a scale word (`2.5 million`),
in words (`two hundred and fifty`), or a percentage as its fraction (`7%` holds 0.07); a string
that is a date, by any spelling of that date (kvx/text_dates.py: `2024-03-05` is held by
`March 5th, 2024`). Strings with an `enum`, `const` or `format` are left alone (they are
normalised values, not quotes); a `pattern` is not (order ids and codes are quoted). Fields that
cannot be null are left alone: null would break the schema. Fields are found in nested objects and
in the items of arrays too (`/seller/email`, `/line_items/*/sku`; kvx/record_fields.py).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from kvx.copy_check import number_in
from kvx.record_fields import Place, leaf_fields, places, replaced
from kvx.text_dates import as_dates, dates_in
from kvx.text_numbers import text_values

Ungrounded = Literal["null", "keep"]  # what a job does with an ungrounded value (--ungrounded)
VALUE_TYPES = {"string", "number", "integer"}
NON_ALNUM = re.compile(r"[^0-9a-z]+")
NORMALISED = ("enum", "const", "format")  # keywords that make a string a normalised value, not a quote


def _free(node: Any) -> bool:
    """A schema whose strings are quotes, not normalised values."""
    return isinstance(node, dict) and not any(k in node for k in NORMALISED)


def _value_type(node: dict, optional: bool) -> str | None:
    """The free value type a nullable field takes (string / number / integer), else None; the X of
    an Optional[X] is nullable already."""
    if not _free(node):
        return None
    types = node.get("type")
    if isinstance(types, str):
        types = [types, "null"] if optional else [types]
    if isinstance(types, list) and "null" in types:
        rest = [t for t in types if t != "null"]
        return rest[0] if len(rest) == 1 and rest[0] in VALUE_TYPES else None
    return None


def grounded_fields(schema: dict) -> dict[Place, str]:
    """Pattern of each nullable free-text or number field -> its value type (string / number / integer)."""
    return leaf_fields(schema, _value_type)


def _closed_strings(node: dict, optional: bool) -> bool | None:
    values = node.get("enum", [node["const"]] if "const" in node else None)
    return True if isinstance(values, list) and any(isinstance(v, str) for v in values) else None


def closed_fields(schema: dict) -> list[Place]:
    """Patterns of the fields whose strings the schema lists (enum / const)."""
    return list(leaf_fields(schema, _closed_strings))


def _letters(text: str) -> str:
    return NON_ALNUM.sub("", text.lower())


class UngroundedValue(NamedTuple):
    pattern: Place  # the grounded field (None for any array position)
    path: Place  # where in the record
    value: str | int | float  # what the model wrote there


@dataclass
class Grounding:
    """Checks a record's grounded fields against its text (see the module docstring)."""

    fields: dict[Place, str]  # pattern -> string / number / integer
    closed: list[Place] = field(default_factory=list)  # fields a string value must not echo

    @classmethod
    def of(cls, schema: dict) -> "Grounding":
        return cls(grounded_fields(schema), closed_fields(schema))

    def ungrounded(self, record: Any, text: str) -> list[UngroundedValue]:
        """Each grounded value the text does not hold, or that echoes the record's closed choices."""
        letters, numbers, dates, chosen = None, None, None, None
        out = []
        for pattern in self.fields:
            for path, value in places(record, pattern):
                if isinstance(value, str):
                    letters = _letters(text) if letters is None else letters
                    spelt = _letters(value)
                    held = spelt in letters
                    if not held and (readings := as_dates(value)):  # a date, spelt another way
                        dates = dates_in(text) if dates is None else dates
                        held = bool(readings & dates)
                    chosen = self._chosen(record) if chosen is None else chosen
                    held = held and spelt not in chosen
                elif isinstance(value, (int, float)) and not isinstance(value, bool):
                    numbers = text_values(text) if numbers is None else numbers
                    held = number_in(value, numbers)
                else:  # null, or a type the schema did not promise
                    continue
                if not held:
                    out.append(UngroundedValue(pattern, path, value))
        return out

    def _chosen(self, record: Any) -> set[str]:
        """The letters of the strings the record holds in its closed fields."""
        return {_letters(v) for pattern in self.closed for _, v in places(record, pattern)
                if isinstance(v, str) and _letters(v)}

    @staticmethod
    def nulled(record: Any, paths: list[Place]) -> Any:
        """A copy of the record with the values at those paths set to null."""
        return replaced(record, dict.fromkeys(paths))
