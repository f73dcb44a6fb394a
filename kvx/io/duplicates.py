"""The duplicate-id rule: an id already used by an earlier record of the input makes an `error` row.

The id is how a user joins rows back to inputs, so two records with one id would be ambiguous (and
a resumed run could not tell which of them it already did). The first record with an id is run;
each later one becomes `error: line 9 (id D1): duplicate id, first at line 2`. That message is
exact and ends in a line number, so --resume can tell such rows from the first record's row and
redo exactly the records whose rows are missing (kvx/io/done_rows.py).
"""
from __future__ import annotations

import re
from typing import Iterator

from kvx.io.records import InputRecord

DUPLICATE = "duplicate id, first at "
# `line 9 (id D1): duplicate id, first at line 2`; a model's output quoted in a message ends in a
# quote, so no other row's error can match.
DUPLICATE_ROW = re.compile(r"^(?:line|row) \d+(?: \(id .*\))?: duplicate id, first at (?:line|row) \d+$")


def flag_duplicates(records: Iterator[InputRecord]) -> Iterator[InputRecord]:
    """The records, with `duplicate_of` and `error` set on every repeat of an id seen before."""
    first: dict[str, str] = {}  # id -> where it was first seen
    for record in records:
        seen = first.get(record.id)
        if seen is None:
            first[record.id] = record.where
        else:
            record.duplicate_of = seen
            record.error = DUPLICATE + seen
        yield record


def is_duplicate_row(error: str | None) -> bool:
    return error is not None and DUPLICATE in error and DUPLICATE_ROW.match(error) is not None
