"""Seeded candidate instances for a JSON Schema: a random walk over its keywords.

The walk is a heuristic (allOf merged shallowly, if/then/else and not ignored): it proposes
values, and jsonschema (labels.py) decides what they are. "minimal" walks write required keys
and short arrays only; "rich" ones add optional keys and longer arrays."""
from __future__ import annotations

import json
import math
import random
import re
import string
import time

import referencing
import referencing.exceptions
import referencing.jsonschema

from benchmarks.grammar_bench.regex_sample import NoSample, sample

MAX_DEPTH = 10
NODE_BUDGET = 200  # past this many values a walk writes only what is required (rich walks explode)
NODE_LIMIT = 2000
WALK_SECONDS = 2.0
MAX_ITEMS_EXTRA = 3
FORMAT_SAMPLES = {
    "date-time": ["2024-03-01T12:30:00Z", "2019-11-05T08:00:00+02:00"],
    "date": ["2024-03-01", "1999-12-31"],
    "time": ["12:30:00Z", "08:15:30+01:00"],
    "email": ["ann.lee@example.com"], "idn-email": ["ann@example.com"],
    "hostname": ["example.com"], "idn-hostname": ["example.org"],
    "ipv4": ["192.168.0.1"], "ipv6": ["2001:db8::1"],
    "uri": ["https://example.com/a/b?c=1"], "iri": ["https://example.com/a"],
    "uri-reference": ["/a/b", "https://example.com/x"], "iri-reference": ["/a"],
    "uri-template": ["/users/{id}"], "url": ["https://example.com/"],
    "uuid": ["123e4567-e89b-12d3-a456-426614174000"],
    "regex": ["^[a-z]+$"], "json-pointer": ["/a/0"], "relative-json-pointer": ["0/a"],
    "duration": ["P1DT2H"], "byte": ["aGVsbG8="], "int32": ["7"], "int64": ["7"],
}
WORDS = ["alpha", "beta", "gamma", "delta", "note", "main", "x1", "a b", "Zed", "ok"]


class NoValue(Exception):
    """The walk found nothing to write here (false schema, unresolvable $ref, depth)."""


def root_resolver(schema):
    spec = referencing.jsonschema.specification_with(
        schema.get("$schema", "") if isinstance(schema, dict) else "",
        default=referencing.jsonschema.DRAFT202012)
    resource = spec.create_resource(schema)
    uri = resource.id() or ""
    return referencing.Registry().with_resource(uri, resource).resolver(base_uri=uri)


class Walker:
    def __init__(self, schema, rng: random.Random, rich: bool):
        self.schema, self.rng, self.rich = schema, rng, rich
        self.resolver = root_resolver(schema)
        self.nodes = 0
        self.deadline = time.perf_counter() + WALK_SECONDS

    def value(self):
        return self.gen(self.schema, 0)

    # -- schema plumbing -------------------------------------------------------------
    def deref(self, node, seen=0):
        """`node` with its $ref replaced by the target's keywords (siblings kept)."""
        while isinstance(node, dict) and isinstance(node.get("$ref"), str):
            if seen > 20:
                raise NoValue("$ref chain too long")
            try:
                target = self.resolver.lookup(node["$ref"]).contents
            except (referencing.exceptions.Unresolvable, ValueError, TypeError, KeyError):
                raise NoValue(f"unresolvable $ref {node['$ref']}") from None
            rest = {k: v for k, v in node.items() if k != "$ref"}
            node = merge(target, rest) if isinstance(target, dict) else target
            seen += 1
        return node

    def flatten(self, node):
        """allOf members merged in, one anyOf/oneOf branch chosen (recursively)."""
        node = self.deref(node)
        if not isinstance(node, dict):
            return node
        for _ in range(8):
            if "allOf" in node and isinstance(node["allOf"], list):
                parts = [self.flatten(p) for p in node["allOf"]]
                if any(p is False for p in parts):
                    raise NoValue("allOf with a false schema")
                node = merge({k: v for k, v in node.items() if k != "allOf"},
                             *[p for p in parts if isinstance(p, dict)])
                continue
            for kw in ("anyOf", "oneOf"):
                if kw in node and isinstance(node[kw], list) and node[kw]:
                    branch = self.flatten(self.rng.choice(node[kw]))
                    rest = {k: v for k, v in node.items() if k != kw}
                    node = merge(rest, branch) if isinstance(branch, dict) else branch
                    break
            else:
                if "then" in node and self.rng.random() < 0.5:
                    node = merge({k: v for k, v in node.items() if k not in ("if", "then", "else")},
                                 self.flatten(node["then"]) if isinstance(node["then"], dict) else {})
                return node
            if not isinstance(node, dict):
                return node
        return node

    # -- values ------------------------------------------------------------------------
    @property
    def generous(self) -> bool:
        return self.rich and self.nodes < NODE_BUDGET

    def gen(self, node, depth):
        if depth > MAX_DEPTH:
            raise NoValue("too deep")
        self.nodes += 1
        if self.nodes > NODE_LIMIT or time.perf_counter() > self.deadline:
            raise NoValue("instance too large")
        node = self.flatten(node)
        if node is False:
            raise NoValue("false schema")
        if node is True or not isinstance(node, dict):
            node = {}
        if "const" in node:
            return node["const"]
        if isinstance(node.get("enum"), list) and node["enum"]:
            return self.rng.choice(node["enum"])
        kind = self.pick_type(node, depth)
        return getattr(self, f"gen_{kind}")(node, depth)

    def pick_type(self, node, depth):
        types = node.get("type")
        if isinstance(types, str):
            types = [types]
        if not types:
            types = infer_types(node) or (["string", "integer", "boolean"] if depth else ["object", "string"])
        types = [t for t in types if t in ("object", "array", "string", "integer", "number", "boolean", "null")]
        if not types:
            raise NoValue("no known type")
        non_null = [t for t in types if t != "null"]
        if non_null and (self.rng.random() < 0.9 or len(types) == len(non_null)):
            types = non_null
        if depth >= MAX_DEPTH - 2:  # near the cap prefer leaves, so recursive schemas end
            leaves = [t for t in types if t not in ("object", "array")]
            types = leaves or types
        return self.rng.choice(types)

    def gen_null(self, node, depth):
        return None

    def gen_boolean(self, node, depth):
        return self.rng.random() < 0.5

    def gen_integer(self, node, depth):
        lo, hi = bounds(node, integer=True)
        step = node.get("multipleOf")
        value = self.rng.randint(lo, hi)
        if isinstance(step, int) and step > 0:
            value = (value // step) * step
            if value < lo:
                value += step
        return value

    def gen_number(self, node, depth):
        if self.rng.random() < 0.5 or "multipleOf" in node:
            return self.gen_integer(node, depth)
        lo, hi = bounds(node, integer=False)
        return round(self.rng.uniform(lo, hi), 2)

    def gen_string(self, node, depth):
        fmt = node.get("format")
        if isinstance(node.get("pattern"), str):
            try:
                text = sample(node["pattern"], self.rng)
            except NoSample:
                text = self.rng.choice(WORDS)
        elif isinstance(fmt, str) and fmt in FORMAT_SAMPLES:
            text = self.rng.choice(FORMAT_SAMPLES[fmt])
        else:
            text = self.rng.choice(WORDS) if self.rng.random() < 0.7 else "".join(
                self.rng.choice(string.ascii_letters) for _ in range(self.rng.randint(1, 12)))
        lo, hi = node.get("minLength", 0), node.get("maxLength")
        if isinstance(lo, int) and len(text) < lo:
            text += "a" * (lo - len(text))
        if isinstance(hi, int) and len(text) > hi:
            text = text[:hi]
        return text

    def gen_object(self, node, depth):
        props = node.get("properties") if isinstance(node.get("properties"), dict) else {}
        required = [k for k in node.get("required", []) if isinstance(k, str)] if isinstance(node.get("required"), list) else []
        keys = list(dict.fromkeys(required))
        optional = [k for k in props if k not in keys]
        if self.generous:
            keys += [k for k in optional if self.rng.random() < 0.5]
        min_props = node.get("minProperties", 0) if isinstance(node.get("minProperties"), int) else 0
        extra = iter(optional + [f"extra{i}" for i in range(min_props)])
        while len(keys) < min_props:
            k = next(extra)
            if k not in keys:
                keys.append(k)
        keys += self.dependents(node, keys)
        out = {}
        for key in keys:
            try:
                out[key] = self.gen(self.property_schema(node, props, key), depth + 1)
            except NoValue:
                if key in required:
                    raise
        return out

    def dependents(self, node, keys):
        more = []
        for kw in ("dependentRequired", "dependencies"):
            deps = node.get(kw)
            if isinstance(deps, dict):
                for k, needed in deps.items():
                    if k in keys and isinstance(needed, list):
                        more += [d for d in needed if isinstance(d, str) and d not in keys and d not in more]
        return more

    def property_schema(self, node, props, key):
        if key in props:
            return props[key]
        pattern_props = node.get("patternProperties")
        if isinstance(pattern_props, dict):
            for pattern, sub in pattern_props.items():
                try:
                    if re.search(pattern, key):
                        return sub
                except re.error:
                    continue
        extra = node.get("additionalProperties", True)
        return extra if isinstance(extra, (dict, bool)) else True

    def gen_array(self, node, depth):
        prefix = node.get("prefixItems") if isinstance(node.get("prefixItems"), list) else None
        items = node.get("items", True)
        if isinstance(items, list):  # draft 4-7 tuple form
            prefix, items = items, node.get("additionalItems", True)
        prefix = prefix or []
        lo = node.get("minItems", 0) if isinstance(node.get("minItems"), int) else 0
        hi = node.get("maxItems") if isinstance(node.get("maxItems"), int) else None
        want = max(lo, len(prefix) if self.generous else min(len(prefix), 1))
        want = self.rng.randint(want, want + (MAX_ITEMS_EXTRA if self.generous else 1))
        if hi is not None:
            want = min(want, hi)
        out = []
        for i in range(want):
            sub = prefix[i] if i < len(prefix) else items
            if sub is False:
                break
            try:
                value = self.gen(sub, depth + 1)
            except NoValue:
                if i < max(lo, len(prefix) if i < len(prefix) else 0):
                    raise
                break
            if node.get("uniqueItems") is True and any(json_equal(value, v) for v in out):
                continue
            out.append(value)
        if "contains" in node and (hi is None or len(out) < hi):
            try:
                out.insert(0, self.gen(node["contains"], depth + 1))
            except NoValue:
                pass
        return out


def infer_types(node) -> list[str]:
    if any(k in node for k in ("properties", "required", "additionalProperties", "patternProperties", "minProperties")):
        return ["object"]
    if any(k in node for k in ("items", "prefixItems", "minItems", "maxItems", "contains", "uniqueItems")):
        return ["array"]
    if any(k in node for k in ("pattern", "minLength", "maxLength", "format")):
        return ["string"]
    if any(k in node for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")):
        return ["number"]
    return []


def bounds(node, integer: bool):
    lo, hi = node.get("minimum"), node.get("maximum")
    xlo, xhi = node.get("exclusiveMinimum"), node.get("exclusiveMaximum")
    lo = lo if isinstance(lo, (int, float)) and not isinstance(lo, bool) else None
    hi = hi if isinstance(hi, (int, float)) and not isinstance(hi, bool) else None
    gap = 1 if integer else 0.01
    if xlo is True and lo is not None:  # draft 4 booleans
        lo += gap
    elif isinstance(xlo, (int, float)) and not isinstance(xlo, bool):
        lo = xlo + gap if lo is None else max(lo, xlo + gap)
    if xhi is True and hi is not None:
        hi -= gap
    elif isinstance(xhi, (int, float)) and not isinstance(xhi, bool):
        hi = xhi - gap if hi is None else min(hi, xhi - gap)
    if lo is None and hi is None:
        lo, hi = 0, 100
    elif lo is None:
        lo = hi - 100
    elif hi is None:
        hi = lo + 100
    if integer:
        lo, hi = math.ceil(lo), math.floor(hi)
        if hi < lo:
            raise NoValue("empty integer range")
    return lo, hi


def merge(*nodes):
    """Shallow union of schema objects: properties merged per key, required united, the rest first-wins."""
    out: dict = {}
    for node in nodes:
        if not isinstance(node, dict):
            continue
        for key, value in node.items():
            if key not in out:
                out[key] = value
            elif key == "properties" and isinstance(value, dict) and isinstance(out[key], dict):
                props = dict(out[key])
                for k, sub in value.items():
                    props[k] = {"allOf": [props[k], sub]} if k in props else sub
                out[key] = props
            elif key == "required" and isinstance(value, list) and isinstance(out[key], list):
                out[key] = list(dict.fromkeys(out[key] + value))
            elif key == "type":
                a = out[key] if isinstance(out[key], list) else [out[key]]
                b = value if isinstance(value, list) else [value]
                both = [t for t in a if t in b or (t == "number" and "integer" in b)]
                out[key] = both or a
    return out


def json_equal(a, b) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
