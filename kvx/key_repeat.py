"""Objects that loop on their keys. In a free-form map (`dict[str, str]`: an object whose other keys
take an `additionalProperties` schema) a greedy small model, once it repeats a member, rarely stops:
`"attributes":{"id":"12345","id":"12345",...` runs until the length budget closes the object in
the middle of a value. json.loads keeps the last member, cut short (`"1"`), and the record's token
budget is spent on nothing.

A JSON object never needs a key twice (RFC 8259: names should be unique; parsers keep one member),
so once an object has named a key twice, `KeyRepeatGuard` (a kvx.engine.api.TokenVeto) refuses
any token that would write a comma continuing that object; the grammar's other way on is its `}`.
By then the repeated member is complete, so the value json.loads keeps is the one the model wrote
in full. Part of the loop guard (`--no-repeat-ngram`, kvx/repeat_guard.py, off at 0).
"""
from __future__ import annotations

from kvx.json_cursor import JsonCursor

COMMA = ord(",")


class KeyRepeatGuard:
    def __init__(self, cursor: JsonCursor):
        self.cursor = cursor  # the record's scan, shared with its other JSON-reading guards

    def vetoes(self, output_ids: list[int], token: int) -> bool:
        if COMMA not in self.cursor.spelling.of(token):
            return False  # most tokens: no scan needed
        for state, byte in self.cursor.through(output_ids, token):
            if byte == COMMA and not state.in_string and state.frames and state.frames[-1].repeated:
                return True
        return False

    def allowed(self, output_ids: list[int]) -> list[int] | None:
        return None  # refuses a few tokens; names none
