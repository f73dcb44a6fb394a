"""`$dynamicRef` (2020-12) and `$recursiveRef` (2019-09) where they cannot be dynamic.

A dynamic reference resolves like `$ref`; then, if its target carries the matching dynamic anchor
(`$dynamicAnchor` of the same name, `$recursiveAnchor: true`), it moves to the outermost schema
resource in the dynamic scope that carries one too. Where the document carries that anchor once at
most (or the reference's fragment is a JSON pointer, which no dynamic anchor matches), the outermost
one is the target itself: the reference is a plain `$ref` and is compiled as one (OpenAPI 3.1's
`"$dynamicRef": "#meta"` is such a case). Where the anchor is carried twice or more, the reference
can resolve to either at run time, and stays refused.
"""
from __future__ import annotations

from collections import Counter
from typing import Any
from urllib.parse import unquote, urldefrag

from kvx.grammar.automata import deadline
from kvx.grammar.schema.refs import child_pointers, own_dialect, with_children

DYNAMIC = {"2020-12": "$dynamicRef", "2019-09": "$recursiveRef"}  # the dialect's dynamic reference


def _anchors(root: dict) -> tuple[Counter, int, bool]:
    """($dynamicAnchor name -> how many carry it, how many carry `$recursiveAnchor: true`, whether
    any dynamic reference is there at all)."""
    names: Counter = Counter()
    recursive, any_ref, todo = 0, False, [root]
    seen = 0
    while todo:
        seen += 1
        if seen % 1024 == 0:  # a 2 MB schema: 50 ms a walk
            deadline.check()
        node = todo.pop()
        if isinstance(node.get("$dynamicAnchor"), str):
            names[node["$dynamicAnchor"]] += 1
        recursive += node.get("$recursiveAnchor") is True
        any_ref = any_ref or "$dynamicRef" in node or "$recursiveRef" in node
        todo.extend(sub for _, sub in child_pointers(node, "") if isinstance(sub, dict))
    return names, recursive, any_ref


def with_static_refs(schema: Any, dialect: str) -> Any:
    """The schema (read in `dialect`) with each dynamic reference that cannot be dynamic written as a
    `$ref` (a copy; the schema itself when there is none). Each subschema's own dialect names its
    dynamic keyword (a subschema's own $schema switches it)."""
    if not isinstance(schema, dict):
        return schema
    names, recursive, any_ref = _anchors(schema)
    if not any_ref:
        return schema

    def static(ref: Any, keyword: str) -> bool:
        if not isinstance(ref, str):
            return False
        if keyword == "$recursiveRef":
            return recursive <= 1
        fragment = urldefrag(ref)[1]
        return fragment == "" or fragment.startswith("/") or names[unquote(fragment)] <= 1

    def rewrite(node: Any, inherited: str) -> Any:
        if not isinstance(node, dict):
            return node
        dialect = own_dialect(node, inherited)
        out = with_children(node, lambda sub: rewrite(sub, dialect))
        keyword = DYNAMIC.get(dialect)
        if keyword is not None and static(node.get(keyword), keyword) and isinstance(out.get("allOf", []), list):
            ref = out.pop(keyword)
            if "$ref" in out:  # both: each applies (2019-09 on)
                out["allOf"] = [*out.get("allOf", []), {"$ref": ref}]
            else:
                out["$ref"] = ref
        return out

    return rewrite(schema, dialect)
