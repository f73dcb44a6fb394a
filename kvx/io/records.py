"""The rows that flow through a job: what a reader yields and what a writer stores."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvx.io.ids import show_id
from kvx.io.json_values import escape_surrogates

STATUSES = ("ok", "invalid", "error")


@dataclass
class InputRecord:
    index: int  # 0-based position in the input, for --ordered
    id: str  # the --id-field value, else the line/row number
    where: str  # "line 7" / "row 7": where a message should point the user
    fields: dict[str, Any] | None  # None when the input itself was unreadable
    error: str | None = None  # why the input could not be read (one line)
    duplicate_of: str | None = None  # where an earlier record with this id is (kvx/io/duplicates.py)

    def place(self) -> str:
        """'line 7 (id T-1007)' — names both, so the user can find the record either way."""
        return self.where if self.where.endswith(f" {self.id}") else f"{self.where} (id {show_id(self.id)})"

    def message(self, problem: str) -> str:
        """The `error` column of this record's row: 'line 7 (id T-1007): missing field 'text''."""
        return escape_surrogates(f"{self.place()}: {problem}")  # e.g. a --field name from undecodable argv


@dataclass
class RowUsage:
    prompt_tokens: int = 0
    cached_tokens: int = 0
    generated_tokens: int = 0
    truncated_tokens: int = 0  # record text tokens cut to fit the context (--truncate)

    def add(self, prompt: int, cached: int, generated: int) -> None:
        self.prompt_tokens += prompt
        self.cached_tokens += cached
        self.generated_tokens += generated


@dataclass
class OutputRow:
    id: str
    status: str  # one of STATUSES
    record: Any = None  # the validated record (status ok), else None
    error: str | None = None
    attempts: int = 0  # generations spent on this row (0 for input errors)
    usage: RowUsage = field(default_factory=RowUsage)
    # JSON pointer -> the value the model wrote there that its text does not hold (kvx/grounding.py):
    # written as null under --ungrounded null, kept under keep; None when there is none
    ungrounded: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "status": self.status,
            "record": self.record,
            "error": self.error,
            "attempts": self.attempts,
            "usage": {
                "prompt_tokens": self.usage.prompt_tokens,
                "cached_tokens": self.usage.cached_tokens,
                "generated_tokens": self.usage.generated_tokens,
                "truncated_tokens": self.usage.truncated_tokens,
            },
            "ungrounded": self.ungrounded,
        }
