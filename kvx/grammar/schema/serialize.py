"""The JSON text the grammar emits for a value: compact, UTF-8, object members in the order the
compiler writes them (applicators.key_order: the names the value's schemas list, then the rest as
the value has them), enum/const members spelled as the schema spells them."""
from __future__ import annotations

import json
import re

from kvx.grammar.schema.applicators import Applicators
from kvx.grammar.schema.keywords import Notes
from kvx.grammar.schema.refs import Document
from kvx.grammar.schema.unicode_properties import python_pattern
from kvx.grammar.schema.values import integral_ints, json_equal


def canonical_json(value, schema) -> str:
    """`value` written the way the grammar for `schema` writes it (compact whitespace)."""
    doc = Document(schema)
    apps = Applicators(doc, Notes(doc, lenient=True))
    ordered = _reorder(apps, value, apps.applicable(("",)) if isinstance(schema, dict) else ())
    return json.dumps(ordered, ensure_ascii=False, separators=(",", ":"))


def _matching(nodes: list, key: str) -> frozenset[str]:
    """The `patternProperties` regexes of `nodes` that `key` matches (Python's `re`, which reads the
    patterns schemas use as ECMA 262 does; one it cannot read matches nothing)."""
    out = set()
    for node in nodes:
        pats = node.get("patternProperties")
        for pat in pats if isinstance(pats, dict) else ():
            try:
                if re.search(python_pattern(pat), key):
                    out.add(pat)
            except (re.error, TypeError):
                pass
    return frozenset(out)


def _reorder(apps: Applicators, value, context: tuple):
    nodes = [apps.doc.at(p) for p in context]
    for node in nodes:  # an enum/const member is written as the schema spells it
        members = ([node["const"]] if "const" in node else []) + list(node.get("enum", []) or [])
        for member in members:
            if json_equal(member, value):
                return integral_ints(member)
    if isinstance(value, dict):
        order = apps.key_order(context)
        keys = [k for k in order if k in value] + [k for k in value if k not in order]
        return {k: _reorder(apps, value[k], apps.member_context(context, key=k, patterns=_matching(nodes, k)))
                for k in keys}
    if isinstance(value, list):
        return [_reorder(apps, v, apps.member_context(context, index=i)) for i, v in enumerate(value)]
    return value
