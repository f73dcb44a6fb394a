"""Arrow column types implied by a JSON Schema, and converters from JSON values to those types.

strings -> string, integer -> int64, number -> float64, boolean -> bool, arrays -> list<...>,
objects with properties -> struct<...>, string enums -> dictionary<int32, string>. What has no single
Arrow type (mixed anyOf, free-form objects, recursion past MAX_DEPTH) is stored as JSON text, so no
value is ever lost or coerced into the wrong type. An object that allows keys it does not list
(additionalProperties not false) gets one more string child, EXTRA: the unlisted keys as a JSON
object text (null when there are none), so a Parquet row holds what the JSONL row holds.

A wide schema whose levels multiply (renovate's: properties that $ref definitions with properties
that $ref...) is cut shallower, level by level, until its record type takes at most MAX_COLUMNS
columns; the levels below are JSON text.

A valid value its column cannot hold exactly (an integer past int64, an integer a float64 would
round, a non-object where `properties` without `type` gave a struct) raises DoesNotFit naming its JSON
pointer, instead of being stored as null or rounded: the job retries the record, then writes the
reason in the row's error (kvx/job/job.py).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

import pyarrow as pa

from kvx.grammar.errors import UnsupportedSchema
from kvx.grammar.schema.refs import Document, escape

MAX_DEPTH = 8  # recursive $refs become JSON text below this
# columns built for one record type (anyOf branches count): past it the type is rebuilt a level
# shallower (renovate's schema at depth 8 was a type of 162 MB of text after 136 s, or no memory)
MAX_COLUMNS = 2_000
EXTRA = "_extra"  # the struct child holding an open object's unlisted keys (underscores added on a clash)
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


class DoesNotFit(ValueError):
    """A value its Parquet column cannot hold exactly; the message names its JSON pointer."""

    def __init__(self, where: str, what: str):
        super().__init__(f"the value at {where or '/'} {what}: the Parquet output cannot hold it "
                         f"(a .jsonl output can)")


@dataclass
class Column:
    type: pa.DataType
    # (JSON value, its JSON pointer) -> the Python value Arrow stores for `type`; DoesNotFit if none holds it
    convert: Callable[[Any, str], Any]

    def stored(self, record: Any) -> Any:
        """The record as this column stores it; DoesNotFit (naming the place) if it cannot hold it exactly."""
        return self.convert(record, "")


def _as_json(v: Any, where: str = "") -> Any:
    return None if v is None else json.dumps(v, ensure_ascii=False)


def _as_str(v: Any, where: str = "") -> Any:
    return v if v is None or isinstance(v, str) else _as_json(v)


def _shown(v: Any) -> str:
    text = _as_json(v)
    return text if len(text) <= 40 else text[:37] + "..."


def _as_int(v: Any, where: str) -> Any:
    if v is None:
        return None
    if isinstance(v, float) and v.is_integer():  # 2.0 is an integer to JSON Schema
        v = int(v)
    if not isinstance(v, int) or isinstance(v, bool):
        raise DoesNotFit(where, f"({_shown(v)}) is not an integer")
    if not INT64_MIN <= v <= INT64_MAX:
        raise DoesNotFit(where, f"({_shown(v)}) is past int64")
    return v


def _as_float(v: Any, where: str) -> Any:
    if v is None:
        return None
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        raise DoesNotFit(where, f"({_shown(v)}) is not a number")
    try:
        f = float(v)
    except OverflowError:  # an integer past float64 (10**400)
        raise DoesNotFit(where, f"({_shown(v)}) is past float64") from None
    if f != v:  # an integer past 2**53 that float64 would round
        raise DoesNotFit(where, f"({_shown(v)}) would be rounded by float64")
    return f


def _as_bool(v: Any, where: str) -> Any:
    if v is not None and not isinstance(v, bool):
        raise DoesNotFit(where, f"({_shown(v)}) is not a boolean")
    return v


JSON_TEXT = Column(pa.string(), _as_json)
SCALARS = {
    "string": Column(pa.string(), _as_str),
    "integer": Column(pa.int64(), _as_int),
    "number": Column(pa.float64(), _as_float),
    "boolean": Column(pa.bool_(), _as_bool),
}
ENUM = Column(pa.dictionary(pa.int32(), pa.string()), _as_str)


def column_for(schema: Any) -> Column:
    """The column of a record of `schema` (the whole document: its $refs resolve inside it): the
    deepest one, up to MAX_DEPTH levels, that takes at most MAX_COLUMNS columns."""
    doc = Document(schema) if isinstance(schema, dict) else None  # the grammar's $ref resolution
    for depth in range(MAX_DEPTH, -1, -1):
        try:
            return _Columns(doc, depth).of(schema, 0, "")
        except _TooWide:
            continue
    return JSON_TEXT  # even the top level has too many properties: the record as JSON text


class _TooWide(Exception):
    pass


class _Columns:
    def __init__(self, doc: Document | None, max_depth: int):
        self.doc = doc
        self.max_depth = max_depth
        self.built = 0

    def of(self, schema: Any, depth: int, where: str) -> Column:
        """`where`: the pointer of the last $ref target followed (refs resolve from its base URI)."""
        self.built += 1
        if self.built > MAX_COLUMNS:
            raise _TooWide
        if not isinstance(schema, dict) or depth > self.max_depth:
            return JSON_TEXT
        if isinstance(schema.get("$ref"), str) and self.doc is not None:
            try:
                target = self.doc.resolve(schema["$ref"], where)
            except UnsupportedSchema:  # remote, or pointing nowhere: stored as JSON text
                return JSON_TEXT
            return self.of(self.doc.at(target), depth + 1, target)
        if "const" in schema:
            return _for_values([schema["const"]])
        if "enum" in schema:
            return _for_values(schema["enum"])
        branches = schema.get("anyOf") or schema.get("oneOf")
        if branches:
            return _merge([self.of(b, depth + 1, where) for b in branches if not _is_null_only(b)])
        types = schema.get("type")
        if isinstance(types, list):
            return _merge([self.of({**schema, "type": t}, depth, where) for t in types if t != "null"])
        if types in SCALARS:
            return SCALARS[types]
        if types == "array":
            return self.list_column(schema, depth, where)
        if types == "object" or (types is None and "properties" in schema):
            return self.struct_column(schema, depth, where)
        return JSON_TEXT

    def list_column(self, schema: dict, depth: int, where: str) -> Column:
        items = self.of(schema.get("items", True), depth + 1, where)

        def convert(v: Any, where: str) -> Any:
            if v is None:
                return None
            if not isinstance(v, list):
                raise DoesNotFit(where, "is not an array")
            return [items.convert(x, f"{where}/{i}") for i, x in enumerate(v)]

        # "element" is the item name Parquet stores, so parts read back have exactly this type
        return Column(pa.list_(pa.field("element", items.type)), convert)

    def struct_column(self, schema: dict, depth: int, where: str) -> Column:
        props = schema.get("properties") or {}
        if not props:
            return JSON_TEXT  # a free-form object has no fixed columns
        children = {name: self.of(sub, depth + 1, where) for name, sub in props.items()}
        extra = _extra_name(children) if _is_open(schema) else None

        def convert(v: Any, where: str) -> Any:
            if v is None:
                return None
            if not isinstance(v, dict):
                raise DoesNotFit(where, "is not an object")
            out = {name: col.convert(v.get(name), f"{where}/{escape(name)}") for name, col in children.items()}
            if extra is not None:
                rest = {k: x for k, x in v.items() if k not in children}
                out[extra] = json.dumps(rest, ensure_ascii=False) if rest else None
            return out

        fields = [pa.field(n, c.type) for n, c in children.items()] + ([pa.field(extra, pa.string())] if extra else [])
        return Column(pa.struct(fields), convert)


def _for_values(values: list) -> Column:
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, str) for v in present):
        return ENUM if len(values) > 1 else SCALARS["string"]
    if present and all(isinstance(v, bool) for v in present):
        return SCALARS["boolean"]
    if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        return SCALARS["integer"]
    return JSON_TEXT


def _is_null_only(schema: Any) -> bool:
    return isinstance(schema, dict) and schema.get("type") == "null" and len(schema) == 1


def _merge(columns: list[Column]) -> Column:
    if not columns:
        return JSON_TEXT
    if JSON_TEXT in columns:  # a string beside JSON text would read back as the value it spells ("{}" as {})
        return JSON_TEXT
    kinds = {str(c.type) for c in columns}
    if len(kinds) == 1:
        return columns[0]
    if kinds <= {"int64", "double"}:
        return SCALARS["number"]  # an integer fits a float64 column exactly up to 2**53
    if kinds <= {"string", "dictionary<values=string, indices=int32, ordered=0>"}:
        return SCALARS["string"]
    return JSON_TEXT


def _is_open(schema: dict) -> bool:
    """Can a valid value of this object schema hold keys its properties do not list?"""
    closed = schema.get("additionalProperties") is False or (
        "additionalProperties" not in schema and schema.get("unevaluatedProperties") is False)
    return not closed or bool(schema.get("patternProperties"))


def _extra_name(children: dict) -> str:
    name = EXTRA
    while name in children:
        name += "_"
    return name


USAGE_TYPE = pa.struct([
    pa.field("prompt_tokens", pa.int64()),
    pa.field("cached_tokens", pa.int64()),
    pa.field("generated_tokens", pa.int64()),
    pa.field("truncated_tokens", pa.int64()),
])


UNGROUNDED_TYPE = pa.map_(pa.string(), pa.string())  # JSON pointer -> the value as JSON text


def ungrounded_entries(found: dict[str, Any] | None) -> list[tuple[str, str]] | None:
    """OutputRow.ungrounded as UNGROUNDED_TYPE takes it (the values as JSON text)."""
    return None if not found else [(k, _as_json(v)) for k, v in found.items()]


def output_schema(record: Column) -> pa.Schema:
    """The columns of a kvx output Parquet file: one row per input record."""
    return pa.schema([
        pa.field("id", pa.string(), nullable=False),
        pa.field("status", pa.dictionary(pa.int32(), pa.string()), nullable=False),
        pa.field("record", record.type),
        pa.field("error", pa.string()),
        pa.field("attempts", pa.int64()),
        pa.field("usage", USAGE_TYPE),
        pa.field("ungrounded", UNGROUNDED_TYPE),
    ])
