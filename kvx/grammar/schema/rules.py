"""JSON Schema -> regex AST of the JSON text the grammar lets a model write.

Each schema position is expanded into a disjunction of conjunctions ("alternatives") of plain
subschemas: $ref is inlined (recursion bounded by max_depth per target), allOf multiplies,
anyOf/oneOf add alternatives. An alternative is then built type by type from the keywords of all
its pieces, which is how allOf merges exactly: every piece's constraint applies to the same value
(properties per key, items per index, the tightest bounds, every pattern/format intersected).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Optional

from kvx.grammar.schema import charset as cs
from kvx.grammar.schema import numbers, strings
from kvx.grammar.automata import regex_ast as ra
from kvx.grammar.automata.determinize import compile_node
from kvx.grammar.automata.compose import fast_compile
from kvx.grammar.automata.dfa_ops import product, repeat
from kvx.grammar.errors import UnsupportedSchema
from kvx.grammar.errors import TooLarge
from kvx.grammar.schema.refs import Document, escape

TYPES = ("null", "boolean", "integer", "number", "string", "array", "object")
META = {"$schema", "$id", "$anchor", "$defs", "definitions", "$comment", "title", "description",
        "examples", "default", "deprecated", "readOnly", "writeOnly", "$vocabulary",
        "contentMediaType", "contentEncoding", "contentSchema"}
APPLICATORS = {"$ref", "allOf", "anyOf", "oneOf"}
HANDLED = {"type", "enum", "const", "properties", "required", "additionalProperties", "items",
           "prefixItems", "minItems", "maxItems", "minLength", "maxLength", "pattern", "format",
           "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "nullable"}
UNSUPPORTED = {"uniqueItems", "multipleOf", "not", "if", "then", "else", "dependentRequired",
               "dependentSchemas", "dependencies", "patternProperties", "propertyNames",
               "contains", "minContains", "maxContains", "minProperties", "maxProperties",
               "unevaluatedItems", "unevaluatedProperties", "$dynamicRef", "$dynamicAnchor",
               "$recursiveRef", "$recursiveAnchor", "additionalItems"}
MAX_ALTERNATIVES = 256
KNOWN_DIALECTS = ("https://json-schema.org/draft/", "http://json-schema.org/draft")


@dataclass(frozen=True)
class Options:
    whitespace: str = "compact"
    max_ws: int = 2
    max_depth: int = 4
    lenient: bool = False
    max_states: int = 50_000


def show(pointer: str) -> str:
    return pointer or "/"


def json_equal(a, b) -> bool:
    """JSON value equality as JSON Schema defines it (1 == 1.0, true != 1)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def integral_ints(value):
    """Integral floats as ints: enum/const numbers are written 2, not 2.0."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: integral_ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [integral_ints(v) for v in value]
    return value


def dumps(value) -> str:
    return json.dumps(integral_ints(value), ensure_ascii=False, separators=(",", ":"), allow_nan=False)


class SchemaToRegex:
    def __init__(self, root, options: Options):
        self.doc = Document(root)
        self.opt = options
        self.warnings: list[str] = []
        self.post_checks: list[str] = []
        self._reported: set[str] = set()
        self._memo: dict = {}
        self._validator = None
        flexible = options.whitespace == "flexible"
        self.ws = ra.rep(ra.chars(" \t\n\r"), 0, options.max_ws) if flexible else ra.EMPTY

    # ---- entry ------------------------------------------------------------------------------
    def document(self) -> ra.Node:
        return ra.seq(self.ws, self.value(("",), 0, ()), self.ws)

    def value(self, pointers: tuple, depth: int, refs: tuple) -> ra.Node:
        """Language of one value valid under every schema at `pointers`, `depth` containers
        deep; `refs` counts how often each $ref target is already open on this path."""
        generic = all(self.doc.at(p) is True for p in pointers)
        if generic:
            if depth >= self.opt.max_depth:
                return ra.NOTHING
            pointers, refs = (), ()
        key = (pointers, depth, refs)
        if key in self._memo:
            return self._memo[key]
        where = pointers[0] if pointers else ""
        try:
            alts = self._dnf(pointers, refs)
            node = ra.alt(*(self._alternative(p, r, depth) for p, r in alts))
            if generic:  # reused everywhere: compile once, embed the minimal DFA
                dfa = fast_compile(node, self.opt.max_states)
                node = ra.NOTHING if dfa is None else ra.Embed(dfa)
        except TooLarge:
            raise UnsupportedSchema(f"schema too large for the automaton at {show(where)}",
                                    None, where) from None
        self._memo[key] = node
        return node

    # ---- applicators -> alternatives ----------------------------------------------------------
    def _dnf(self, pointers: tuple, refs: tuple) -> list:
        alts = [((), refs)]
        for ptr in pointers:
            alts = [(pieces + more, r2) for pieces, r in alts for more, r2 in self._dnf_one(ptr, r)]
            self._check_count(alts, ptr)
        return alts

    def _check_count(self, alts: list, ptr: str) -> None:
        if len(alts) > MAX_ALTERNATIVES:
            raise UnsupportedSchema(f"schema too large for the automaton at {show(ptr)} "
                                    f"(more than {MAX_ALTERNATIVES} anyOf/oneOf combinations)", None, ptr)

    def _dnf_one(self, ptr: str, refs: tuple) -> list:
        node = self.doc.at(ptr)
        if node is True:
            return [((), refs)]
        if node is False:
            return []
        if not isinstance(node, dict):
            raise UnsupportedSchema(f"invalid schema: expected an object or boolean at {show(ptr)}", None, ptr)
        alts = [(((ptr, node),), refs)]
        if "$ref" in node:
            target = self.doc.resolve(node["$ref"], ptr)
            counts = dict(refs)
            if counts.get(target, 0) >= self.opt.max_depth:
                return []  # recursion unrolled max_depth times: this branch ends here
            counts[target] = counts.get(target, 0) + 1
            r2 = tuple(sorted(counts.items()))
            alts = [(pieces + more, r3) for pieces, _ in alts for more, r3 in self._dnf_one(target, r2)]
        for i in range(len(node.get("allOf", []))):
            sub = f"{ptr}/allOf/{i}"
            alts = [(pieces + more, r2) for pieces, r in alts for more, r2 in self._dnf_one(sub, r)]
            self._check_count(alts, ptr)
        for kw in ("anyOf", "oneOf"):
            if kw in node:
                if kw == "oneOf":
                    self._note_post_check("oneOf", ptr, "exclusivity of oneOf branches")
                branches = [f"{ptr}/{kw}/{i}" for i in range(len(node[kw]))]
                alts = [(pieces + more, r2) for pieces, r in alts for b in branches
                        for more, r2 in self._dnf_one(b, r)]
                self._check_count(alts, ptr)
        return alts

    # ---- keyword checks -------------------------------------------------------------------------
    def _note_post_check(self, keyword: str, ptr: str, what: str) -> None:
        where = f"{ptr}/{escape(keyword)}"
        if where in self._reported:
            return
        if not self.opt.lenient:
            raise UnsupportedSchema(f"unsupported keyword '{keyword}' at {show(ptr)}", keyword, ptr)
        self._reported.add(where)
        self.warnings.append(f"keyword '{keyword}' at {show(ptr)} is not enforced while generating "
                             f"({what}); checked after generation")
        self.post_checks.append(where)

    def _check_keywords(self, ptr: str, node: dict) -> None:
        dialect = node.get("$schema")
        if isinstance(dialect, str) and not dialect.startswith(KNOWN_DIALECTS):
            self._note_post_check("$schema", ptr, f"custom meta-schema {dialect!r}")
        for kw in node:
            if kw in HANDLED or kw in META or kw in APPLICATORS:
                continue
            if kw in UNSUPPORTED:
                if kw in ("then", "else") and "if" not in node:
                    continue  # no effect without "if"
                self._note_post_check(kw, ptr, "the automaton cannot express it")
            else:
                where = f"{ptr}/{escape(kw)}"
                if where not in self._reported:
                    self._reported.add(where)
                    self.warnings.append(f"unknown keyword '{kw}' at {show(ptr)} ignored")

    # ---- one alternative --------------------------------------------------------------------------
    def _alternative(self, pieces: tuple, refs: tuple, depth: int) -> ra.Node:
        for ptr, node in pieces:
            self._check_keywords(ptr, node)
        types = set(TYPES)
        for ptr, node in pieces:
            if "type" in node:
                types &= self._types(node, ptr)
        values = None
        for ptr, node in pieces:
            for kw in ("enum", "const"):
                if kw not in node:
                    continue
                vals = [node["const"]] if kw == "const" else node["enum"]
                if not isinstance(vals, list):
                    raise UnsupportedSchema(f"invalid schema: 'enum' must be an array at {show(ptr)}", "enum", ptr)
                values = vals if values is None else [v for v in values if any(json_equal(v, w) for w in vals)]
        if values is not None:
            return self._enum(values, pieces)
        parts = []
        if "null" in types:
            parts.append(ra.lit("null"))
        if "boolean" in types:
            parts.append(ra.alt(ra.lit("true"), ra.lit("false")))
        if "integer" in types:
            parts.append(self._number(pieces, integer="number" not in types))
        if "string" in types:
            parts.append(self._string(pieces))
        if "array" in types:
            parts.append(self._array(pieces, refs, depth))
        if "object" in types:
            parts.append(self._object(pieces, refs, depth))
        return ra.alt(*parts)

    def _types(self, node: dict, ptr: str) -> set:
        t = node["type"]
        names = [t] if isinstance(t, str) else t
        if not isinstance(names, list) or not all(isinstance(n, str) and n in TYPES for n in names):
            raise UnsupportedSchema(f"invalid schema: bad 'type' {json.dumps(t)} at {show(ptr)}", "type", ptr)
        out = set(names)
        if "number" in out:
            out.add("integer")
        if node.get("nullable") is True:
            out.add("null")
        return out

    def _enum(self, values: list, pieces: tuple) -> ra.Node:
        kept = []
        for v in values:
            if any(json_equal(v, k) for k in kept):
                continue
            if all(self._valid(v, node) for _, node in pieces):
                kept.append(v)
        return ra.alt(*(ra.lit(dumps(v)) for v in kept))

    def _valid(self, value, node: dict) -> bool:
        """Does `value` satisfy the piece's own keywords (its applicators are other pieces)?"""
        import jsonschema

        if self._validator is None:
            cls = jsonschema.Draft202012Validator
            self._validator = cls(self.doc.root, format_checker=cls.FORMAT_CHECKER)
        own = {k: v for k, v in node.items() if k not in APPLICATORS}
        if own.get("nullable") is True and value is None:
            return True
        try:
            return self._validator.evolve(schema=own).is_valid(value)
        except jsonschema.exceptions.RefResolutionError:
            return False

    # ---- numbers ------------------------------------------------------------------------------------
    def _number(self, pieces: tuple, integer: bool) -> ra.Node:
        lo = hi = None  # (Decimal, strict)
        for ptr, node in pieces:
            for kw in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
                if kw not in node or isinstance(node[kw], bool):
                    continue
                v = node[kw]
                if not isinstance(v, (int, float)):
                    raise UnsupportedSchema(f"invalid schema: '{kw}' must be a number at {show(ptr)}", kw, ptr)
                if isinstance(v, float) and not math.isfinite(v):
                    continue
                d = Decimal(v) if isinstance(v, int) else Decimal(repr(v))
                strict = kw.startswith("exclusive") or node.get("exclusive" + kw[:1].upper() + kw[1:]) is True
                if kw.endswith("inimum"):
                    if lo is None or d > lo[0] or (d == lo[0] and strict):
                        lo = (d, strict)
                elif hi is None or d < hi[0] or (d == hi[0] and strict):
                    hi = (d, strict)
        if integer:
            a = None if lo is None else (math.floor(lo[0]) + 1 if lo[1] or lo[0] != int(lo[0]) else int(lo[0]))
            b = None if hi is None else (math.ceil(hi[0]) - 1 if hi[1] or hi[0] != int(hi[0]) else int(hi[0]))
            if a is not None and b is not None and a > b:
                return ra.NOTHING
            return numbers.int_range(a, b)
        if lo is None and hi is None:
            return numbers.ANY_NUMBER
        langs = []
        if lo is not None:
            langs.append(fast_compile(numbers.decimal_ge(*lo)))
        if hi is not None:
            langs.append(fast_compile(numbers.decimal_le(*hi)))
        return self._intersect(langs)

    def _intersect(self, dfas: list) -> ra.Node:
        if any(d is None for d in dfas):
            return ra.NOTHING
        d = dfas[0]
        for e in dfas[1:]:
            d = product(d, e, max_states=self.opt.max_states)
            if d is None:
                return ra.NOTHING
        return ra.Embed(d)

    # ---- strings ------------------------------------------------------------------------------------
    def _string(self, pieces: tuple) -> ra.Node:
        lo, hi = 0, None
        dfas = []
        for ptr, node in pieces:
            lo = max(lo, self._count(node, "minLength", ptr, 0))
            m = self._count(node, "maxLength", ptr, None)
            if m is not None:
                hi = m if hi is None else min(hi, m)
            if "pattern" in node:
                dfas.append(self._pattern(node["pattern"], ptr))
            if "format" in node:
                d = self._format(node["format"], ptr)
                if d is not False:
                    dfas.append(d)
        if hi is not None and hi < lo:
            return ra.NOTHING
        if not dfas:  # lengths only: the composer builds the counter copies in byte-class form
            if (max(lo, hi or 0) + 1) * (any_char_dfa().num_states - 1) > self.opt.max_states:
                raise TooLarge(f"more than {self.opt.max_states} DFA states")
            return strings.quoted(strings.string_body(lo, hi))
        if lo > 0 or hi is not None:
            dfas.insert(0, repeat(any_char_dfa(), lo, hi, self.opt.max_states))
        return strings.quoted(self._intersect(dfas))

    def _pattern(self, pattern, ptr: str):
        from kvx.grammar.schema.regex_parse import pattern_dfa

        if not isinstance(pattern, str):
            raise UnsupportedSchema(f"invalid schema: 'pattern' must be a string at {show(ptr)}", "pattern", ptr)
        return pattern_dfa(pattern, f"{ptr}/pattern", self.opt.max_states)

    def _format(self, fmt, ptr: str):
        from kvx.grammar.schema.formats import format_dfa

        d = format_dfa(fmt) if isinstance(fmt, str) else False
        if d is False:
            where = f"{ptr}/format"
            if where not in self._reported:
                self._reported.add(where)
                self.warnings.append(f"format {json.dumps(fmt)} at {show(ptr)} is not known; not enforced")
        return d

    # ---- arrays -------------------------------------------------------------------------------------
    def _array(self, pieces: tuple, refs: tuple, depth: int) -> ra.Node:
        mn, mx, k = 0, None, 0
        for ptr, node in pieces:
            mn = max(mn, self._count(node, "minItems", ptr, 0))
            m = self._count(node, "maxItems", ptr, None)
            if m is not None:
                mx = m if mx is None else min(mx, m)
            k = max(k, len(node.get("prefixItems", [])))
        if mx is not None and mx < mn:
            return ra.NOTHING

        def element(i: int) -> ra.Node:
            ptrs = []
            for ptr, node in pieces:
                if i < len(node.get("prefixItems", [])):
                    ptrs.append(f"{ptr}/prefixItems/{i}")
                elif "items" in node:
                    ptrs.append(f"{ptr}/items")
            return self.value(tuple(ptrs), depth + 1, refs)

        sep = ra.seq(ra.lit(","), self.ws)

        def after(i: int) -> ra.Node:  # elements i.. once i >= 1 are written
            if i >= k:
                a = max(0, mn - i)
                b = None if mx is None else mx - i
                return ra.rep(ra.seq(sep, element(k), self.ws), a, b)
            if mx is not None and i >= mx:
                return ra.EMPTY
            node = ra.seq(sep, element(i), self.ws, after(i + 1))
            return node if i < mn else ra.opt(node)

        if mx == 0:
            content = ra.EMPTY
        else:
            first = ra.seq(element(0), self.ws, after(1))
            content = first if mn > 0 else ra.opt(first)
        return ra.seq(ra.lit("["), self.ws, content, ra.lit("]"))

    @staticmethod
    def _count(node: dict, kw: str, ptr: str, default):
        if kw not in node:
            return default
        v = node[kw]
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise UnsupportedSchema(f"invalid schema: '{kw}' must be a non-negative integer at {show(ptr)}", kw, ptr)
        return v

    # ---- objects ------------------------------------------------------------------------------------
    def _object(self, pieces: tuple, refs: tuple, depth: int) -> ra.Node:
        order: list[str] = []
        required: set[str] = set()
        for ptr, node in pieces:
            props = node.get("properties", {})
            if not isinstance(props, dict):
                raise UnsupportedSchema(f"invalid schema: 'properties' must be an object at {show(ptr)}", "properties", ptr)
            order += [k for k in props if k not in order]
        for ptr, node in pieces:
            req = node.get("required", [])
            if not isinstance(req, list) or not all(isinstance(r, str) for r in req):
                raise UnsupportedSchema(f"invalid schema: 'required' must be an array of strings at {show(ptr)}", "required", ptr)
            order += [k for k in req if k not in order]
            required |= set(req)

        def schema_of(key: Optional[str]) -> tuple:
            ptrs = []
            for ptr, node in pieces:
                if key is not None and key in node.get("properties", {}):
                    ptrs.append(f"{ptr}/properties/{escape(key)}")
                elif "additionalProperties" in node:
                    ptrs.append(f"{ptr}/additionalProperties")
            return tuple(ptrs)

        members = []  # (member node, required)
        for key in order:
            val = self.value(schema_of(key), depth + 1, refs)
            if ra.is_nothing(val):
                if key in required:
                    return ra.NOTHING
                continue
            members.append((ra.seq(ra.lit(dumps(key)), self.ws, ra.lit(":"), self.ws, val, self.ws),
                            key in required))
        extra = None
        if all(node.get("additionalProperties", True) is not False for _, node in pieces):
            val = self.value(schema_of(None), depth + 1, refs)
            if not ra.is_nothing(val):
                extra = ra.seq(extra_key(tuple(order)), self.ws, ra.lit(":"), self.ws, val, self.ws)
        return ra.seq(ra.lit("{"), self.ws, self._members(members, extra), ra.lit("}"))

    def _members(self, members: list, extra) -> ra.Node:
        """Members in order, optional ones skippable, commas only between written members.
        States: A_i = nothing written before member i, B_i = something written; X_i joins the
        two entries of member i so its automaton appears once."""
        n = len(members)
        a = lambda i: 3 * i
        b = lambda i: 3 * i + 1
        x = lambda i: 3 * i + 2
        sep = ra.seq(ra.lit(","), self.ws)
        edges = []
        for i, (member, req) in enumerate(members):
            edges += [(a(i), x(i), None), (b(i), x(i), sep), (x(i), b(i + 1), member)]
            if not req:
                edges += [(a(i), a(i + 1), None), (b(i), b(i + 1), None)]
        if extra is not None:
            edges += [(a(n), x(n), None), (b(n), x(n), sep), (x(n), b(n), extra)]
        return ra.Graph(3 * n + 3, tuple(edges), (a(n), b(n)))


_EXTRA_KEYS: dict = {}


def any_char_dfa():
    return strings.ANY_CHAR.dfa


def extra_key(declared: tuple) -> ra.Node:
    """A quoted key whose decoded value is none of `declared`, in any spelling."""
    if declared not in _EXTRA_KEYS:
        body = fast_compile(strings.string_body())
        if declared:
            spelled = ra.alt(*(ra.seq(*(strings.json_char(cs.of(c)) for c in key)) for key in declared))
            body = product(body, fast_compile(spelled), mode="minus")
        _EXTRA_KEYS[declared] = strings.quoted(ra.Embed(body))
    return _EXTRA_KEYS[declared]
