"""The compact JSON texts an instance is tried as: its own key order and the schema's
(`properties` order through $ref/allOf/anyOf/oneOf, members' values by their `properties`,
matching `patternProperties` or `additionalProperties` schemas), each with numbers as Python writes them and
"plain" (integral floats as integers, no exponents). All texts of one instance are the same JSON
value, so they share its label; an engine accepts the instance if it accepts any of them."""
from __future__ import annotations

import json
import math
import re
from decimal import Decimal

import referencing.exceptions

from benchmarks.grammar_bench.generate import root_resolver

MAX_APPLICABLE = 64


def variants(value, schema) -> list[str]:
    try:
        ordered = SchemaOrder(schema).apply(value)
    except (RecursionError, referencing.exceptions.Unresolvable, ValueError, TypeError):
        ordered = value
    out = []
    for v in (value, ordered):
        for plain in (False, True):
            text = dumps(v, plain)
            if text not in out:
                out.append(text)
    return out


def dumps(value, plain: bool) -> str:
    if isinstance(value, dict):
        return "{" + ",".join(f"{_string(k)}:{dumps(v, plain)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(dumps(v, plain) for v in value) + "]"
    if isinstance(value, float) and plain and math.isfinite(value):
        return str(int(value)) if value.is_integer() else format(Decimal(repr(value)), "f")
    return json.dumps(value, ensure_ascii=False)


def _same(a, b) -> bool:
    """JSON equality (1 == 1.0, but True != 1)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b


def _search(pattern: str, key: str) -> bool:
    try:
        return re.search(pattern, key) is not None
    except (re.error, TypeError):  # a regex Python does not read: the member keeps its own order
        return False


def _string(key: str) -> str:
    return json.dumps(key, ensure_ascii=False)


class SchemaOrder:
    """Reorders object keys as the schema lists them (declared keys first, the rest after)."""

    def __init__(self, schema):
        self.schema = schema
        self.resolver = root_resolver(schema) if isinstance(schema, dict) else None

    def apply(self, value):
        return self._order(value, self._applicable([self.schema]))

    def _applicable(self, nodes) -> list[dict]:
        out, todo = [], list(nodes)
        while todo and len(out) < MAX_APPLICABLE:
            node = todo.pop(0)
            if not isinstance(node, dict) or any(node is seen for seen in out):
                continue
            out.append(node)
            if isinstance(node.get("$ref"), str) and self.resolver is not None:
                try:
                    todo.append(self.resolver.lookup(node["$ref"]).contents)
                except referencing.exceptions.Unresolvable:
                    pass
            for kw in ("allOf", "anyOf", "oneOf"):
                if isinstance(node.get(kw), list):
                    todo += node[kw]
            todo += [node[kw] for kw in ("then", "else") if kw in node]
        return out

    def _order(self, value, nodes):
        for node in nodes:  # a const/enum member is written as the schema spells it
            members = ([node["const"]] if "const" in node else []) + (node["enum"] if isinstance(node.get("enum"), list) else [])
            for member in members:
                if _same(member, value):
                    return member
        if isinstance(value, dict):
            order: list[str] = []
            for node in nodes:
                props = node.get("properties")
                order += [k for k in (props if isinstance(props, dict) else []) if k not in order]
            for node in nodes:
                req = node.get("required")
                order += [k for k in (req if isinstance(req, list) else []) if k not in order]
            keys = [k for k in order if k in value] + [k for k in value if k not in order]
            return {k: self._order(value[k], self._applicable(self._member(nodes, k))) for k in keys}
        if isinstance(value, list):
            return [self._order(v, self._applicable(self._item(nodes, i))) for i, v in enumerate(value)]
        return value

    @staticmethod
    def _member(nodes, key) -> list:
        """The schemas whose key order a member's value takes: its `properties` entry; for a name
        the node does not declare, every `patternProperties` entry whose regex it matches, else
        `additionalProperties`."""
        out = []
        for node in nodes:
            props = node.get("properties")
            patterns = node.get("patternProperties")
            if isinstance(props, dict) and key in props:
                out.append(props[key])
            elif matched := [sub for pat, sub in (patterns.items() if isinstance(patterns, dict) else ())
                             if _search(pat, key)]:
                out += matched
            elif "additionalProperties" in node:
                out.append(node["additionalProperties"])
        return out

    @staticmethod
    def _item(nodes, index) -> list:
        out = []
        for node in nodes:
            prefix = node.get("prefixItems", node.get("items"))
            if isinstance(prefix, list):
                if index < len(prefix):
                    out.append(prefix[index])
                continue
            if "items" in node:
                out.append(node["items"])
        return out
