"""`not S` in its common forms: S rewritten as a schema for the complement (what `not`, `if`'s else
branch and `oneOf` need). A schema object is the conjunction of its keywords, so its negation is the
union of the negated keywords; each negated keyword also names the type it constrains (`minimum: 3`
holds for every string, so `not minimum: 3` is a number below 3).

The result uses ordinary keywords plus a few internal ones the compiler alone reads: `kvx:exclude`
(values), `kvx:absent` (keys), `kvx:notPattern`, `kvx:notFormat`, `kvx:fraction` (a number that is
not an integer), `kvx:notMultipleOf` (a number off the multiples of a whole number), `kvx:someKey` (a
member whose key is in a pattern's or additionalProperties' region and whose value fails its schema,
or whose key fails propertyNames) and `kvx:ref` (a pointer, for a schema already in the document).
Forms it cannot write raise UnsupportedSchema naming `not` and the keyword.
"""
from __future__ import annotations

from kvx.grammar.errors import UnsupportedSchema
from kvx.grammar.schema.keywords import INTERNAL, META, ROUTE_REF, TYPES
from kvx.grammar.schema.refs import DanglingRef, Document, escape, foreign_keywords
from kvx.grammar.schema.scalars import count_keyword, draft4_flag, strict_bound

MAX_NESTING = 24  # negations inside negations (through $ref): deeper is refused


def _integral(value) -> bool:
    """A whole multipleOf: its multiples are exact in jsonschema's arithmetic too (a fractional one is
    post-checked, so its negation cannot be written)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 and float(value).is_integer()


class Negator:
    def __init__(self, doc: Document, as_the_check_reads: bool = False):
        """`as_the_check_reads`: for the negations the schema itself makes (`not`, a dialect's `if`),
        another draft's keyword (refs.foreign_keywords) is read as the record check reads it, holding
        everywhere, so its negation is nowhere: negated as written, it would let through values the
        check refuses. Elsewhere (what the compiler builds from complements: a foreign `if`, key
        regions, contains counts) it is negated as written, so both halves read it alike."""
        self.doc = doc
        self.memo: dict[str, str] = {}
        self.as_the_check_reads = as_the_check_reads

    def negate(self, ptr: str, depth: int = 0) -> str:
        """Pointer of a schema that holds exactly where the schema at `ptr` does not."""
        hit = self.memo.get(ptr)
        if hit is None:
            if depth > MAX_NESTING:
                self._refuse(ptr, "$ref", "recursive schema")
            hit = self.memo[ptr] = self.doc.synthesise(self._negation(ptr, depth), ptr)
        return hit

    def _target(self, ref: str, ptr: str) -> str | None:
        try:
            return self.doc.resolve(ref, ptr)
        except DanglingRef:  # a $ref to nothing allows nothing (applicators.py): its negation, anything
            return None

    def _refuse(self, ptr: str, keyword: str, what: str = ""):
        where = self.doc.where(ptr)
        raise UnsupportedSchema(f"unsupported keyword 'not' at {where} (negating '{keyword}'"
                                + (f": {what}" if what else "") + ")", "not", where)

    def _negation(self, ptr: str, depth: int):
        node = self.doc.at(ptr)
        if node is True:
            return False
        if node is False:
            return True
        if not isinstance(node, dict):
            self._refuse(ptr, "schema", "not a schema")
        if "$ref" in node and self.doc.ref_replaces_siblings(ptr):
            target = self._target(node["$ref"], ptr)
            return True if target is None else {"kvx:ref": self.negate(target, depth + 1)}
        dialect = self.doc.dialect_at(ptr)
        foreign = foreign_keywords(dialect) if self.as_the_check_reads else frozenset()
        branches: list = []
        for kw, value in node.items():
            if isinstance(value, bool) and draft4_flag(kw, value, dialect, self.doc.where(ptr)):
                continue  # negated with minimum/maximum
            if kw in META or kw in ("then", "else") or kw in foreign:  # then/else: negated with `if`
                continue
            branches += self._keyword(ptr, node, kw, value, depth)
        return {"anyOf": branches} if branches else False

    def _keyword(self, ptr: str, node: dict, kw: str, value, depth: int) -> list:
        sub = f"{ptr}/{escape(kw)}"
        if kw == "$ref":
            target = self._target(value, ptr)
            return [{}] if target is None else [{"kvx:ref": self.negate(target, depth + 1)}]
        if kw == "kvx:ref":
            return [{"kvx:ref": self.negate(value, depth + 1)}]
        if kw == "type":
            names = {value} if isinstance(value, str) else set(value)
            if node.get("nullable") is True:
                names.add("null")
            if "number" in names:
                names.add("integer")
            # "number" holds the integers too: it stays among the others unless integers are named
            others = [t for t in TYPES if t not in names and not (t == "number" and "integer" in names)]
            out = [{"type": others}] if others else []
            if "integer" in names and "number" not in names:
                out.append({"type": "number", "kvx:fraction": True})
            return out
        if kw == "nullable":  # part of `type`
            return []
        if kw in ("enum", "const"):
            return [{"kvx:exclude": value if kw == "enum" else [value]}]
        if kw == "required":
            return [{"type": "object", "kvx:absent": [r]} for r in value]
        if kw == "properties":  # the key is there, its value failing
            return [{"type": "object", "required": [k],
                     "properties": {k: {"kvx:ref": self.negate(f"{sub}/{escape(k)}", depth + 1)}}}
                    for k in value]
        if kw == "patternProperties" and isinstance(value, dict):  # a key matching it, its value failing
            return [self._some_key({"pattern": pat}, f"{sub}/{escape(pat)}", depth)
                    for pat, schema in value.items() if schema is not True and schema != {}]
        if kw == "propertyNames":  # a key failing it, whatever its value
            return [] if value is True or value == {} else [{"type": "object", "kvx:someKey": {"notNames": sub}}]
        if kw == "additionalProperties":  # a key neither declared nor matching a pattern, its value failing
            if value is True or value == {}:
                return []
            return [self._some_key({"except": list(node.get("properties", {})),
                                    "exceptPatterns": list(node.get("patternProperties", {}))}, sub, depth)]
        if kw in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            return [self._bound(node, kw, value)]
        if kw in ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"):
            return self._count(kw, value)
        if kw == "pattern":
            return [{"type": "string", "kvx:notPattern": [value]}]
        if kw == "format":
            return [{"type": "string", "kvx:notFormat": value}]
        if kw == "allOf":
            return [{"kvx:ref": self.negate(f"{sub}/{i}", depth + 1)} for i in range(len(value))]
        if kw == "anyOf":
            return [{"allOf": [{"kvx:ref": self.negate(f"{sub}/{i}", depth + 1)} for i in range(len(value))]}]
        if kw == "oneOf":  # none holds, or two do
            none = {"allOf": [{"kvx:ref": self.negate(f"{sub}/{i}", depth + 1)} for i in range(len(value))]}
            pairs = [{"allOf": [{"kvx:ref": f"{sub}/{i}"}, {"kvx:ref": f"{sub}/{j}"}]}
                     for i in range(len(value)) for j in range(i + 1, len(value))]
            return [none] + pairs
        if kw == "not":
            return [{"kvx:ref": sub}]
        if kw == "if":
            then = [{"kvx:ref": sub}, {"kvx:ref": self.negate(f"{ptr}/then", depth + 1)}] if "then" in node else None
            other = ([{"kvx:ref": self.negate(sub, depth + 1)}, {"kvx:ref": self.negate(f"{ptr}/else", depth + 1)}]
                     if "else" in node else None)
            return [{"allOf": b} for b in (then, other) if b is not None]
        if kw in INTERNAL:
            self._refuse(ptr, kw)
        if kw in ("uniqueItems",) and value is False:
            return []
        if kw == "contains":
            return self._contains(ptr, node, depth)
        if kw in ("minContains", "maxContains"):  # negated with `contains` (nothing without it)
            return []
        if kw == "items" and isinstance(value, (dict, bool)) and "prefixItems" not in node:
            return [{"type": "array", "contains": {"kvx:ref": self.negate(sub, depth + 1)}}]  # an item fails it
        if kw in ("prefixItems", "items") and isinstance(value, list):  # `items` as an array: drafts 4-2019-09
            return [{"type": "array", "minItems": i + 1,
                     "prefixItems": [True] * i + [{"kvx:ref": self.negate(f"{sub}/{i}", depth + 1)}]}
                    for i in range(len(value))]  # item i is there and fails its schema
        if kw == "additionalItems" and (not isinstance(node.get("items"), list) or value is True or value == {}):
            return []  # no constraint: it applies after an items array only, and allows every item here
        if kw == "additionalItems" and value is False:  # an item past the items array
            return [{"type": "array", "minItems": len(node["items"]) + 1}]
        if kw == "multipleOf" and _integral(value):  # a fraction, or an integer off the multiples
            return [{"type": "number", "kvx:notMultipleOf": [value]}]
        if kw in ("dependencies", "dependentRequired", "dependentSchemas") and isinstance(value, dict):
            return self._dependencies(sub, value, depth)
        if kw in ("items", "prefixItems", "uniqueItems", "additionalItems", "multipleOf", "dependentRequired",
                  "dependentSchemas", "dependencies", "unevaluatedItems", "unevaluatedProperties", "$dynamicRef",
                  "$recursiveRef", ROUTE_REF):
            self._refuse(ptr, kw)
        return []  # an annotation or unknown keyword: holds everywhere, its negation nowhere

    def _some_key(self, keys: dict, sub: str, depth: int) -> dict:
        """An object with a key of `keys` (a pattern, or all but some names and patterns) whose value
        fails the schema at `sub` (objects.py writes that member at least once)."""
        return {"type": "object", "kvx:someKey": {**keys, "fails": sub, "value": self.negate(sub, depth + 1)}}

    def _dependencies(self, sub: str, deps: dict, depth: int) -> list:
        """Some key is there without what it needs: one of its names missing, or its schema failing."""
        out: list = []
        for key, dep in deps.items():
            if isinstance(dep, list):
                out += [{"type": "object", "required": [key], "kvx:absent": [name]} for name in dep if name != key]
            else:
                out.append({"type": "object", "required": [key],
                            "kvx:ref": self.negate(f"{sub}/{escape(key)}", depth + 1)})
        return out

    def _contains(self, ptr: str, node: dict, depth: int) -> list:
        """An array whose count of items matching `contains` is below minContains (default 1) or
        above maxContains: none matching is every item failing it."""
        where = self.doc.where(ptr)
        lo, hi = count_keyword(node, "minContains", where, 1), count_keyword(node, "maxContains", where, None)
        sub = f"{ptr}/contains"
        out = []
        if lo == 1:
            out.append({"type": "array", "items": {"kvx:ref": self.negate(sub, depth + 1)}})
        elif lo > 1:
            out.append({"type": "array", "contains": {"kvx:ref": sub}, "minContains": 0, "maxContains": lo - 1})
        if hi is not None:
            out.append({"type": "array", "contains": {"kvx:ref": sub}, "minContains": hi + 1})
        return out

    @staticmethod
    def _bound(node: dict, kw: str, value) -> dict:
        strict = strict_bound(node, kw)
        lower = kw.endswith("inimum")
        flipped = ("maximum" if strict else "exclusiveMaximum") if lower else ("minimum" if strict else "exclusiveMinimum")
        return {"type": "number", flipped: value}

    @staticmethod
    def _count(kw: str, value) -> list:
        kind = {"Length": "string", "Items": "array", "Properties": "object"}[kw[3:]]
        if kw.startswith("min"):
            return [{"type": kind, "max" + kw[3:]: value - 1}] if value > 0 else []
        return [{"type": kind, "min" + kw[3:]: value + 1}]
