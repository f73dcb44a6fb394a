"""`$dynamicRef` (2020-12) and `$recursiveRef` (2019-09) where they cannot be dynamic.

A dynamic reference resolves like `$ref`; then, if its target carries the matching dynamic anchor
(`$dynamicAnchor` of the same name, `$recursiveAnchor: true`), it moves to the outermost schema
resource in the dynamic scope that carries one too. Where the document carries that anchor once at
most (or the reference's fragment is a JSON pointer, which no dynamic anchor matches), the outermost
one is the target itself: the reference is a plain `$ref` and is compiled as one (OpenAPI 3.1's
`"$dynamicRef": "#meta"` is such a case). Where a `$dynamicAnchor` is carried twice or more, every
route the record check can take is walked (dynamic_scope.py): a reference that lands on one place
whatever the route is a `kvx:ref` to it (the 2020-12 meta-schema's `"$dynamicRef": "#meta"`, entered
through its root), one that lands on several stays refused. jsonschema resolves a `$ref` naming a
`$dynamicAnchor` dynamically too, so those are rewritten alike. A `$recursiveRef` whose anchor is
carried twice or more stays refused.
"""
from __future__ import annotations

from collections import Counter
from typing import Any

from kvx.grammar.automata import deadline
from kvx.grammar.schema.dynamic_scope import ROUTE_DEPENDENT, DynamicScopes
from kvx.grammar.schema.keywords import ROUTE_REF
from kvx.grammar.schema.refs import META, Document, own_dialect, subschemas, with_children

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
        todo.extend(sub for _, _, sub in subschemas(node) if isinstance(sub, dict))  # no pointers needed here
    return names, recursive, any_ref


def with_static_refs(schema: Any, dialect: str) -> Any:
    """The schema (read in `dialect`) with each dynamic reference that cannot be dynamic written as a
    `$ref`, and each one that lands on one place whatever the route (dynamic_scope.py) written as a
    `kvx:ref` to it; a `$ref` naming a `$dynamicAnchor` too, which the record check resolves
    dynamically as well (a copy; the schema itself when there is none). Each subschema's own dialect
    names its dynamic keyword (a subschema's own $schema switches it)."""
    if not isinstance(schema, dict):
        return schema
    names, recursive, any_ref = _anchors(schema)
    shared = any(count > 1 for count in names.values())
    if not any_ref and not shared:
        return schema
    # (pointer, reference) -> where it lands, for every reference naming a $dynamicAnchor carried
    # twice or more; none where every anchor is carried once at most
    doc = Document(schema, dialect) if shared else None
    landed = DynamicScopes(doc).landings() if doc is not None else {}

    def static(ref: Any, keyword: str) -> bool:
        if not isinstance(ref, str):
            return False
        # a $dynamicRef naming a shared anchor is in `landed`; any other resolves as a $ref does
        return recursive <= 1 if keyword == "$recursiveRef" else True

    def rewrite(node: Any, inherited: str, ptr: str) -> Any:
        if not isinstance(node, dict):
            return node
        dialect = own_dialect(node, inherited)
        out = with_children(node, ptr, lambda sub, at: rewrite(sub, dialect, at))
        keyword = DYNAMIC.get(dialect)
        for kw in ("$ref", keyword) if keyword else ("$ref",):
            lands = landed.get((ptr, node.get(kw))) if landed and isinstance(node.get(kw), str) else None
            if lands is not None:
                if len(lands) == 1 and ROUTE_DEPENDENT not in lands:
                    if kw == "$ref" and doc.ref_replaces_siblings(ptr):  # drafts 4-7: the siblings go too
                        out = {k: v for k, v in out.items() if k in META and k != "$ref"}
                    _also(out, "kvx:ref", next(iter(lands)))
                    out.pop(kw, None)
                elif kw == "$ref":  # several: refused (keywords.py), as a $dynamicRef that stays
                    out[ROUTE_REF] = out.pop(kw)
                continue
            if kw == keyword and static(node.get(kw), kw) and isinstance(out.get("allOf", []), list):
                _also(out, "$ref", out.pop(kw))
        return out

    return rewrite(schema, dialect, "")


def _also(node: dict, keyword: str, value) -> None:
    """`keyword: value` added to `node`, in an allOf beside one it has already (each applies)."""
    if keyword in node:
        node["allOf"] = [*node.get("allOf", []), {keyword: value}]
    else:
        node[keyword] = value
