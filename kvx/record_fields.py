"""Where a schema's fields sit in its records: the walk that finds them, and their values in a record.

A field's place is a tuple of keys, None standing for any array position (`("line_items", None,
"sku")`, written `/line_items/*/sku`). `leaf_fields` walks a schema's properties and array items
(following local `$ref`s, merging a lone `allOf`, stopping at recursion and MAX_DEPTH levels) and
keeps the nodes a caller's `leaf` picks; Pydantic's `Optional[X]` (`anyOf` of X and null) is seen
as X, nullable. kvx/grounding.py picks the nullable free-text and number fields, kvx/cut_text.py
the bounded free-text ones.
"""
from __future__ import annotations

from typing import Any, Callable, TypeVar

from kvx.grammar.schema.refs import escape
from kvx.schema_text import optional_branch, resolver

MAX_DEPTH = 8  # object / array levels searched for fields
Place = tuple[str | int | None, ...]  # keys and array positions into a record; in a pattern None is any position
T = TypeVar("T")


def leaf_fields(schema: dict, leaf: Callable[[dict, bool], T | None]) -> dict[Place, T]:
    """Place pattern of each field `leaf` picks -> what it returned. `leaf(node, optional)` sees each
    node (optional False) and the X of an `Optional[X]` (optional True); objects and arrays it does
    not pick are walked into."""
    resolve, out = resolver(schema), {}

    def walk(node: Any, path: Place, seen: tuple) -> None:
        node, seen = resolve(node, seen)
        if not isinstance(node, dict) or len(path) > MAX_DEPTH:
            return
        got = leaf(node, False)
        optional = optional_branch(node, resolve, seen) if got is None else None
        if optional is not None:
            got = leaf(optional[0], True)
            if got is None:  # an optional object or array: its fields
                node, seen = optional
        if got is not None:
            if path:
                out[path] = got
            return
        properties = node.get("properties")
        for name, sub in (properties.items() if isinstance(properties, dict) else ()):
            walk(sub, (*path, name), seen)
        if isinstance(node.get("items"), dict):
            walk(node["items"], (*path, None), seen)

    walk(schema, (), ())
    return out


def pointer(path: Place) -> str:
    """A JSON pointer (`/line_items/*/sku` for a pattern)."""
    return "".join("/" + ("*" if p is None else escape(str(p))) for p in path)


def places(value: Any, pattern: Place, at: Place = ()) -> list[tuple[Place, Any]]:
    """(path, value) for each place of a record that a pattern names."""
    if not pattern:
        return [(at, value)]
    key, rest = pattern[0], pattern[1:]
    if key is None:
        items = enumerate(value) if isinstance(value, list) else ()
    else:
        items = [(key, value[key])] if isinstance(value, dict) and key in value else ()
    return [found for k, v in items for found in places(v, rest, (*at, k))]


def replaced(record: Any, new: dict[Place, Any]) -> Any:
    """A copy of the record with the values at those paths replaced."""
    def at(value: Any, path: Place) -> Any:
        if path in new:
            return new[path]
        if isinstance(value, dict):
            return {k: at(v, (*path, k)) for k, v in value.items()}
        if isinstance(value, list):
            return [at(v, (*path, i)) for i, v in enumerate(value)]
        return value

    return at(record, ())
