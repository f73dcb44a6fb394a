"""Codes copied from the text: a nullable string field with a `pattern` (an order id, a reference,
a VAT number) takes its value from the record's text (`--copy-codes`, the default).

A small model rarely copies a code: on the demo's 60 tickets, 25 texts hold a span that fits
`order_id` (`^[A-Z0-9-]{4,20}$`, "order ORD-61877"), and the default model wrote one of them once;
it wrote "1234567890" or "123456789012345678" (null after the grounding check) or a part ("58213"
for ORD-58213). The *spans* of a text that fit a field (`spans`: one to four words, surrounding
punctuation aside, as written or joined by `_` or `-`, that match its pattern and length bounds)
are few, so once the model opens such a string `CodeGuard` lets it write only one of them: at each
token, the tokens that continue a span (the engine takes the likeliest the grammar allows,
`TokenVeto.allowed`). Whether to write a code at all (null or a string) stays the model's choice,
and a text with no fitting span leaves the field as it was. The grammar still has the last word:
a span it cannot write (a pattern Python's `re` reads otherwise) is never forced.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from kvx.grammar.schema.unicode_properties import python_pattern
from kvx.json_cursor import JsonCursor
from kvx.record_fields import Place, leaf_fields, places

MAX_WORDS = 4  # words in one span
JOINS = ("_", "-")  # how a span's words may be joined in a code
EDGE = "\"'()[]{}<>,.;:!?"  # punctuation around a word that is not part of the span
QUOTE = ord('"')


@dataclass(frozen=True)
class CodeField:
    pattern: re.Pattern
    min_length: int
    max_length: int | None

    def fits(self, span: str) -> bool:
        return (len(span) >= self.min_length and (self.max_length is None or len(span) <= self.max_length)
                and self.pattern.search(span) is not None)


def _code_field(node: dict, optional: bool) -> CodeField | None:
    """A nullable string field with a pattern and nothing that makes it a normalised value (as
    kvx/grounding.py reads "from the text, or null"; a required one, such as a table name in a
    query plan, may rightly be a word the text does not hold)."""
    types = node.get("type")
    types = [types, "null"] if isinstance(types, str) and optional else [types] if isinstance(types, str) else types
    pattern = node.get("pattern")
    if (not isinstance(pattern, str) or not isinstance(types, list) or set(types) != {"string", "null"}
            or any(k in node for k in ("enum", "const", "format"))):
        return None
    try:
        compiled = re.compile(python_pattern(pattern))
    except re.error:  # a dialect Python does not read: no spans
        return None
    low, high = node.get("minLength", 0), node.get("maxLength")
    return CodeField(compiled, low if isinstance(low, int) else 0, high if isinstance(high, int) else None)


def code_fields(schema: dict) -> dict[Place, CodeField]:
    """Place pattern of each code field (kvx/record_fields.py)."""
    return leaf_fields(schema, _code_field)


def spans(text: str, field: CodeField) -> list[str]:
    """The text's spans that fit the field, in order of first appearance: as written, or with its
    words joined by `_` or `-`, as written or in lower case (`Total Revenue` fits an identifier as
    `total_revenue`, `ORD 61877` a code as `ORD-61877`)."""
    words = [m for m in re.finditer(r"\S+", text)]
    found: dict[str, None] = {}
    for i in range(len(words)):
        for j in range(i, min(i + MAX_WORDS, len(words))):
            span = text[words[i].start():words[j].end()].strip(EDGE)
            joined = [span] + [sep.join(span.split()) for sep in JOINS] if j > i else [span]
            for form in (f for v in joined for f in (v, v.lower())):
                if form and field.fits(form):
                    found.setdefault(form)
    return list(found)


@dataclass
class CodeSpans:
    """The code fields of a schema and each one's spans in one record's text."""

    spans: dict[Place, list[bytes]]  # place pattern -> each span as the grammar writes it, quotes included

    @classmethod
    def of(cls, fields: dict[Place, CodeField], text: str) -> "CodeSpans":
        out = {}
        for place, field in fields.items():
            found = spans(text, field)
            if found:
                out[place] = [json.dumps(s, ensure_ascii=False).encode() for s in found]
        return cls(out)

    def copied(self, record: Any) -> int:
        """How many of the record's code values are spans of its text."""
        return sum(1 for place, written in self.spans.items() for _, v in places(record, place)
                   if isinstance(v, str) and json.dumps(v, ensure_ascii=False).encode() in written)


class CodeGuard:
    """A token veto (kvx.engine.api.TokenVeto) for one record: inside a code field's string, only a
    span of the text."""

    def __init__(self, spans: CodeSpans, cursor: JsonCursor):
        self.spans = spans.spans
        self.spelling = cursor.spelling
        self.cursor = cursor  # the record's scan, shared with its other JSON-reading guards

    def _open(self, output_ids: list[int]) -> tuple[list[bytes], bytes] | None:
        """(the spans of the field whose value is being written, what of it is written) or None
        where no code field's value is."""
        state = self.cursor.at(output_ids)
        if state.is_key or not (state.in_string or state.expect == "value"):
            return None
        spans = self.spans.get(state.place)
        return None if spans is None else (spans, self.cursor.written(state))

    def vetoes(self, output_ids: list[int], token: int) -> bool:
        open_ = self._open(output_ids)
        if open_ is None:
            return False
        spans, written = open_
        spelt = self.spelling.of(token)
        if not written and not spelt.startswith(b'"'):
            return False  # null, or not a string: the grammar's affair
        return not any(_fits(span, written + spelt) for span in spans)

    def allowed(self, output_ids: list[int]) -> list[int] | None:
        open_ = self._open(output_ids)
        if open_ is None or not open_[1]:  # at the value's start null stays possible: no list
            return None
        spans, written = open_
        ids: set[int] = set()
        for span in spans:
            if not span.startswith(written) or len(span) == len(written):
                continue
            rest = span[len(written):]
            ids.update(t for k in range(1, len(rest) + 1) if (t := self.spelling.id_of(rest[:k])) is not None)
            ids.update(t for t in self.spelling.holding_any(bytes([QUOTE])) if self.spelling.of(t).startswith(rest))
        return sorted(ids) or None  # none: what is written fits no span (the veto gave way), so no list


def _fits(span: bytes, written: bytes) -> bool:
    """Whether a string written so far (opening quote on) is on its way to the span, or has
    written it whole (what follows its closing quote is the grammar's)."""
    return span.startswith(written) or written.startswith(span)
