"""Record ids: from the --id-field value to the string in the output, and how messages show them.

The output's `id` column is a string: a number id is written as its JSON text (`123`), so the number
123 and the string "123" are the same id there (the second is then a duplicate, see duplicates.py).
A missing or null id falls back to the line/row number. An id that is an object, array or boolean
cannot name a row: the record becomes an error row (under the line/row number).
"""
from __future__ import annotations

import json
from typing import Any

from kvx.io.json_values import escape_surrogates

SHOWN_ID_CHARS = 60  # an id quoted in a message is cut after this many characters


def record_id(fields: dict[str, Any], id_field: str, number: int) -> tuple[str, str | None]:
    """(id, problem): the id as the output writes it, and why it could not be used (or None)."""
    value = fields.get(id_field)
    if value is None:
        return str(number), None
    if isinstance(value, (bool, dict, list)):
        kind = "a boolean" if isinstance(value, bool) else f"an {'object' if isinstance(value, dict) else 'array'}"
        return str(number), f"the id field '{id_field}' holds {kind}, not a string or a number"
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace"), None
    if isinstance(value, str):
        return escape_surrogates(value), None  # storable; the record itself is refused (json_values)
    return str(value), None


def show_id(rid: str) -> str:
    """An id as a message quotes it: control characters escaped (one line), long ids cut."""
    text = json.dumps(rid, ensure_ascii=False)[1:-1]
    return text if len(text) <= SHOWN_ID_CHARS else text[:SHOWN_ID_CHARS] + "..."
