"""What an earlier run of the same job already wrote, for --resume: which input records to skip.

Under the duplicate-id rule (kvx/io/duplicates.py) a row stands either for the first record with an
id (kept by id) or for a later repeat (kept by its exact error text, which names its own line). A
record is skipped only if its own row is there, so a resumed run writes each missing row once.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from kvx.io.duplicates import is_duplicate_row
from kvx.io.records import InputRecord


@dataclass
class DoneRows:
    ids: set[str] = field(default_factory=set)  # first records with these ids have their row
    repeats: set[tuple[str, str]] = field(default_factory=set)  # (id, error) of duplicate-id rows

    def add(self, rid: str, error: str | None) -> None:
        if is_duplicate_row(error):
            self.repeats.add((rid, error))
        else:
            self.ids.add(rid)

    def has(self, record: InputRecord) -> bool:
        if record.duplicate_of is None:
            return record.id in self.ids
        return (record.id, record.message(record.error or "")) in self.repeats

    def __len__(self) -> int:
        return len(self.ids) + len(self.repeats)
