"""The JSON text the grammar emits for a value: compact, UTF-8, object keys in `properties` order
(declared keys first, in the order the schema's properties/required list them, then the rest)."""
from __future__ import annotations

import json

from kvx.grammar.schema.refs import Document


def _applicable(doc: Document, node, pointer: str, seen: set):
    """The subschema dicts that apply at one place (through $ref/allOf/anyOf/oneOf), in the
    order the compiler merges them."""
    if not isinstance(node, dict) or pointer in seen:
        return
    seen.add(pointer)
    yield pointer, node
    if "$ref" in node:
        try:
            target = doc.resolve(node["$ref"], pointer)
            yield from _applicable(doc, doc.at(target), target, seen)
        except Exception:
            pass
    for kw in ("allOf", "anyOf", "oneOf"):
        for i, sub in enumerate(node.get(kw, []) if isinstance(node.get(kw), list) else []):
            yield from _applicable(doc, sub, f"{pointer}/{kw}/{i}", seen)


def _children(doc, nodes, key=None, index=None):
    out = []
    for ptr, node in nodes:
        if key is not None:
            props = node.get("properties", {})
            if isinstance(props, dict) and key in props:
                out += list(_applicable(doc, props[key], f"{ptr}/properties/{key}", set()))
            elif "additionalProperties" in node:
                out += list(_applicable(doc, node["additionalProperties"], f"{ptr}/additionalProperties", set()))
        else:
            pre = node.get("prefixItems", [])
            if isinstance(pre, list) and index < len(pre):
                out += list(_applicable(doc, pre[index], f"{ptr}/prefixItems/{index}", set()))
            elif "items" in node:
                out += list(_applicable(doc, node["items"], f"{ptr}/items", set()))
    return out


def _reorder(doc, value, nodes):
    from kvx.grammar.schema.values import integral_ints, json_equal

    for _, node in nodes:  # an enum/const member is written as the schema spells it
        for member in ([node["const"]] if "const" in node else []) + list(node.get("enum", []) or []):
            if json_equal(member, value):
                return integral_ints(member)
    if isinstance(value, dict):
        order = []
        for _, node in nodes:
            props = node.get("properties", {})
            order += [k for k in (props if isinstance(props, dict) else []) if k not in order]
        for _, node in nodes:
            req = node.get("required", [])
            order += [k for k in (req if isinstance(req, list) else []) if k not in order]
        keys = [k for k in order if k in value] + [k for k in value if k not in order]
        return {k: _reorder(doc, value[k], _children(doc, nodes, key=k)) for k in keys}
    if isinstance(value, list):
        return [_reorder(doc, v, _children(doc, nodes, index=i)) for i, v in enumerate(value)]
    return value


def canonical_json(value, schema) -> str:
    """`value` written the way the grammar for `schema` writes it (compact whitespace)."""
    doc = Document(schema)
    ordered = _reorder(doc, value, list(_applicable(doc, schema, "", set())))
    return json.dumps(ordered, ensure_ascii=False, separators=(",", ":"))
