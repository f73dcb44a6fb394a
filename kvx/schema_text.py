"""A JSON Schema as a readable list of fields, for the prompt: a small model follows `- product: one
of "mortgage", "student loan"` far better than the schema's JSON (measured: benchmarks/quality.py).

One line per property (name, type, allowed values, bounds, the schema's `description`); nested
objects and lists of objects are indented below their field. `$ref`s within the schema are followed
(once per path, so recursion stops); keywords without a short reading are left to the grammar.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

from kvx.grammar.errors import UnsupportedSchema
from kvx.grammar.schema.refs import Document

FORMATS = {"date": "a date YYYY-MM-DD", "date-time": "a date and time (ISO 8601)", "time": "a time HH:MM:SS",
           "email": "an email address", "uri": "a URI", "uuid": "a UUID"}
TYPE_WORDS = {"string": "text", "integer": "integer", "number": "number", "boolean": "true or false",
              "null": "null", "array": "list", "object": "object"}
MAX_DEPTH = 4


@dataclass(frozen=True)
class Detail:
    """How much of the schema the field list spells out (kvx/schema_fit.py shortens it to fit a
    prompt); the defaults spell out everything."""
    descriptions: int | None = None  # characters of each `description` kept: None all, 0 none
    enum_values: int | None = None  # enum members listed before "(N values)": None all
    depth: int = MAX_DEPTH  # nested levels listed below the top-level fields


FULL = Detail()


class TooLong(Exception):
    """The field list passed the character cap it was written under."""


def describe_fields(schema: dict, detail: Detail = FULL, max_chars: int | None = None) -> str:
    """The schema's fields as `- name: reading — description` lines (one line for a non-object).
    TooLong once the text passes `max_chars`: a schema whose list runs to megabytes (recursive
    bundles) is given up early instead of written out whole."""
    return "\n".join(field_lines(schema, detail, max_chars))


def field_lines(schema: dict, detail: Detail = FULL, max_chars: int | None = None) -> list[str]:
    return _Describer(schema, detail, max_chars).lines(schema, 0, ())


Resolve = Callable[[Any, tuple[str, ...]], tuple[Any, tuple[str, ...]]]  # (node, targets followed) -> the same, resolved


def top_level_properties(schema: dict, resolve: Resolve | None = None) -> dict[str, Any]:
    """The root object's properties, resolved as the field list reads them (local `$ref`s and a lone
    `allOf` member merged in): what the record's top-level fields accept. `resolve`: the schema's
    resolver (kvx.schema_text.resolver), when the caller has one."""
    resolve = resolve or resolver(schema)
    root, seen = resolve(schema, ())
    props = root.get("properties") if isinstance(root, dict) else None
    return {name: resolve(sub, seen)[0] for name, sub in (props or {}).items()}


def resolver(schema: dict) -> Resolve:
    """Follows a node's local `$ref` and merges a lone `allOf` (as the field list reads them); the
    tuple holds the targets followed on this path, so a recursive schema stops."""
    return _Describer(schema).resolve


def optional_branch(node: Any, resolve: Resolve, seen: tuple[str, ...] = ()) -> tuple[dict, tuple[str, ...]] | None:
    """The other branch, resolved, of an `anyOf` / `oneOf` of two where one is `{"type": "null"}`
    (Pydantic's `Optional[X]`); None for any other node."""
    for key in ("anyOf", "oneOf"):
        branches = node.get(key) if isinstance(node, dict) else None
        if isinstance(branches, list) and len(branches) == 2:
            resolved = [resolve(b, seen) for b in branches]
            values = [(b, s) for b, s in resolved if not (isinstance(b, dict) and b.get("type") == "null")]
            if len(values) == 1 and isinstance(values[0][0], dict):
                return values[0]
    return None


def _as_object(schema: Any) -> dict:
    """A schema as an object: `true` allows anything (`{}`), `false` nothing (`{"not": {}}`)."""
    if isinstance(schema, dict):
        return schema
    return {} if schema is True else {"not": {}}


def _allows_nothing(schema: Any) -> bool:
    return schema is False or (isinstance(schema, dict) and schema.get("not") in ({}, True))


class _Describer:
    def __init__(self, root: dict, detail: Detail = FULL, max_chars: int | None = None):
        self.doc = Document(root)  # the grammar's reference resolution: JSON pointers, $id, $anchor
        self.detail = detail
        self.chars_left = max_chars

    def resolve(self, node: Any, seen: tuple[str, ...]) -> tuple[Any, tuple[str, ...]]:
        """`node` with its `$ref` (local, or to a bundled file) followed and a lone `allOf` member (Pydantic v1 wraps a
        referenced model or enum so) merged in, the node's own keys winning; `seen`: the targets
        followed on this path, so recursion stops."""
        while isinstance(node, dict):
            if isinstance(node.get("$ref"), str):
                try:  # relative to the last target followed: a bundled file's refs name its neighbours
                    target = self.doc.resolve(node["$ref"], seen[-1] if seen else "")
                except UnsupportedSchema:  # points nowhere: nothing to describe
                    return {}, seen
                if target in seen:
                    return {}, seen
                seen = (*seen, target)
                node = {**_as_object(self.doc.at(target)), **{k: v for k, v in node.items() if k != "$ref"}}
            elif isinstance(node.get("allOf"), list) and len(node["allOf"]) == 1 and isinstance(node["allOf"][0], dict):
                node = {**node["allOf"][0], **{k: v for k, v in node.items() if k != "allOf"}}
            else:
                break
        return node, seen

    def lines(self, node: Any, depth: int, seen: tuple[str, ...]) -> list[str]:
        node, seen = self.resolve(node, seen)
        if not isinstance(node, dict):
            return []
        props = node.get("properties")
        if not isinstance(props, dict) or not props:
            return [f"- the value: {self.reading(node, seen)}"] if depth == 0 else []
        required = set(node.get("required") or [])
        out = []
        for name, sub in props.items():
            sub, sub_seen = self.resolve(sub, seen)
            if _allows_nothing(sub):  # the key must be absent: no field to describe
                continue
            line = f"{'  ' * depth}- {name}: {self.reading(sub, sub_seen)}"
            if name not in required:
                line += " (optional)"
            about = self.about(sub)
            if about:
                line += f" — {about}"
            self.spend(line)
            out.append(line)
            if depth < self.detail.depth:
                out += self.lines(self.inner_object(sub, sub_seen), depth + 1, sub_seen)
        return out

    def about(self, node: Any) -> str:
        """The node's `description`, cut at `detail.descriptions` characters (at a word, with "...")."""
        about = node.get("description") if isinstance(node, dict) else None
        keep = self.detail.descriptions
        if not isinstance(about, str) or keep == 0:
            return ""
        if keep is None:
            return about.strip()
        about = " ".join(about.split())
        return about if len(about) <= keep else about[:keep].rsplit(" ", 1)[0].rstrip(",;:") + "..."

    def spend(self, line: str) -> None:
        if self.chars_left is not None:
            self.chars_left -= len(line) + 1
            if self.chars_left < 0:
                raise TooLong

    def inner_object(self, node: Any, seen: tuple[str, ...]) -> Any:
        """The object whose fields go below this one: itself, or its list's items."""
        node, seen = self.resolve(node, seen)
        if isinstance(node, dict) and isinstance(node.get("items"), dict):
            return self.resolve(node["items"], seen)[0]
        return node

    def reading(self, node: Any, seen: tuple[str, ...]) -> str:
        """A short reading of one value's schema: `one of "a", "b"`, `text or null, at most 80 characters`."""
        node, seen = self.resolve(node, seen)
        if not isinstance(node, dict):
            return "any value"
        if "const" in node:
            return f"always {json.dumps(node['const'], ensure_ascii=False)}"
        if isinstance(node.get("enum"), list):
            values, keep = node["enum"], self.detail.enum_values
            listed = ", ".join(json.dumps(v, ensure_ascii=False) for v in values[:keep])
            return f"one of {listed}" + (f", ... ({len(values)} values)" if keep is not None and len(values) > keep else "")
        for key in ("anyOf", "oneOf"):
            if isinstance(node.get(key), list):
                return " or ".join(self.reading(b, seen) for b in node[key])
        types = node.get("type")
        types = [types] if isinstance(types, str) else list(types or [])
        if not types:
            types = ["object"] if "properties" in node else ["array"] if "items" in node else []
        words = [self.type_word(t, node, seen) for t in types] or ["any value"]
        return ", ".join([" or ".join(words), *self.bounds(node)])

    def type_word(self, t: str, node: dict, seen: tuple[str, ...]) -> str:
        if t == "string" and node.get("format") in FORMATS:
            return FORMATS[node["format"]]
        if t == "array" and isinstance(node.get("items"), dict):
            item = self.resolve(node["items"], seen)[0]
            inner = "objects with the fields below" if isinstance(item, dict) and "properties" in item else self.reading(item, seen)
            return f"list of {inner}"
        if t == "object":
            return "object with the fields below" if "properties" in node else "object"
        return TYPE_WORDS.get(t, t)

    @staticmethod
    def bounds(node: dict) -> list[str]:
        out = []
        lo, hi = node.get("minLength"), node.get("maxLength")
        if hi is not None:
            # "text" says non-empty: "1 to 240 characters" was echoed into summaries (7 of 126)
            out.append(f"{lo} to {hi} characters" if lo and lo > 1 else f"at most {hi} characters")
        elif lo:
            out.append("not empty" if lo == 1 else f"at least {lo} characters")
        lo = node.get("minimum", node.get("exclusiveMinimum"))
        hi = node.get("maximum", node.get("exclusiveMaximum"))
        if lo is not None and hi is not None:
            out.append(f"from {lo} to {hi}")
        elif lo is not None:
            out.append(f"at least {lo}")
        elif hi is not None:
            out.append(f"at most {hi}")
        if node.get("maxItems") is not None:
            out.append(f"at most {node['maxItems']} items")
        if isinstance(node.get("pattern"), str):
            out.append(f"matching {node['pattern']}")
        return out
