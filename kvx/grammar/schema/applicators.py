"""In-place applicators -> alternatives: the schemas that apply to one value, as a union (anyOf,
oneOf, if/else, dependencies) of conjunctions (allOf, $ref, not, the pieces themselves).

An alternative is a tuple of `Piece`s: every schema object whose own keywords must all hold. A piece
keeps the path of pieces it was reached through, so unevaluatedProperties/Items can tell which
keywords are in its scope. Where the schema uses unevaluated*, anyOf expands to every non-empty
subset of its branches (a value valid under two branches is evaluated by both), so the scopes are
exact; elsewhere a branch each.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

from kvx.grammar.errors import UnsupportedSchema
from kvx.grammar.schema.keywords import Notes
from kvx.grammar.schema.negate import Negator
from kvx.grammar.schema.refs import LEGACY, Document, escape

MAX_ALTERNATIVES = 256
MAX_SUBSET_BRANCHES = 6  # anyOf subsets (unevaluated* only): 2^n - 1 alternatives


@dataclass(frozen=True)
class Piece:
    ptr: str
    path: tuple  # pointers of the pieces this one was reached through, outermost first
    annotates: bool = True  # False under `not` (and if's negation): its keywords evaluate nothing


Alternative = tuple  # of Piece


def uses_unevaluated(node) -> bool:
    if isinstance(node, dict):
        if "unevaluatedProperties" in node or "unevaluatedItems" in node:
            return True
        return any(uses_unevaluated(v) for v in node.values())
    if isinstance(node, list):
        return any(uses_unevaluated(v) for v in node)
    return False


class Applicators:
    def __init__(self, doc: Document, notes: Notes):
        self.doc = doc
        self.notes = notes
        self.negator = Negator(doc)
        self.subsets = uses_unevaluated(doc.root)
        self._synthesised: dict[tuple, tuple] = {}  # one pointer per made-up schema, so rules are shared

    def alternatives(self, pointers: tuple) -> list[Alternative]:
        """The union of conjunctions of pieces that apply to a value under all of `pointers`."""
        alts: list[Alternative] = [()]
        for ptr in pointers:
            alts = self._product(alts, self._one(ptr, (), frozenset(), True), ptr)
        return _dedupe(alts)

    def _product(self, a: list, b: list, ptr: str) -> list:
        out = [x + y for x in a for y in b]
        if len(out) > MAX_ALTERNATIVES:
            where = self.doc.display(ptr) or "/"
            raise UnsupportedSchema(f"schema too large for the automaton at {where} (more than "
                                    f"{MAX_ALTERNATIVES} anyOf/oneOf/if combinations)", None, where)
        return out

    def _union(self, parts: list[list], ptr: str) -> list:
        out = [alt for part in parts for alt in part]
        if len(out) > MAX_ALTERNATIVES:
            return self._product(out, [()], ptr)  # raises
        return out

    def _one(self, ptr: str, path: tuple, active: frozenset, notes: bool) -> list[Alternative]:
        """`notes`: the pieces produce annotations (unevaluated* scopes); not under a negation."""
        node = self.doc.at(ptr)
        if node is True:
            return [()]
        if node is False:
            return []
        if not isinstance(node, dict):
            where = self.doc.display(ptr) or "/"
            raise UnsupportedSchema(f"invalid schema: expected an object or boolean at {where}", None, where)
        if ptr in active:
            where = self.doc.display(ptr) or "/"
            raise UnsupportedSchema(f"unsupported keyword '$ref' at {where} (a schema that applies to itself "
                                    "without a nested value)", "$ref", where)
        active = active | {ptr}
        inner = path + (ptr,)
        if "$ref" in node and self.doc.dialect in LEGACY:  # draft <= 7: $ref replaces its siblings
            return self._one(self.doc.resolve(node["$ref"], ptr), path, active, notes)
        alts: list[Alternative] = [(Piece(ptr, path, notes),)]
        for kw in ("$ref", "kvx:ref"):
            if kw in node:
                target = self.doc.resolve(node[kw], ptr) if kw == "$ref" else node[kw]
                alts = self._product(alts, self._one(target, inner, active, notes), ptr)
        for i in range(len(node.get("allOf", []))):
            alts = self._product(alts, self._one(f"{ptr}/allOf/{i}", inner, active, notes), ptr)
        if "anyOf" in node:
            alts = self._product(alts, self._any_of(ptr, inner, active, notes), ptr)
        if "oneOf" in node:
            n = len(node["oneOf"])
            if n > 1:
                self.notes.post_check("oneOf", ptr, "generated as anyOf: that exactly one branch holds")
            branches = [self._one(f"{ptr}/oneOf/{i}", inner, active, notes) for i in range(n)]
            alts = self._product(alts, self._union(branches, ptr), ptr)
        if "not" in node:
            negated = self._negation(f"{ptr}/not", ptr, "not")
            if negated is not None:
                alts = self._product(alts, self._one(negated, inner, active, False), ptr)
        if "if" in node:
            alts = self._product(alts, self._if(ptr, node, inner, active, notes), ptr)
        for kw in ("dependentRequired", "dependentSchemas", "dependencies"):
            for key, dep in (node.get(kw) or {}).items():
                alts = self._product(alts, self._dependency(ptr, kw, key, dep, inner, active, notes), ptr)
        return alts

    def _negation(self, target: str, ptr: str, keyword: str) -> str | None:
        """Pointer of the negation of `target`; None where lenient lets an unwritable one go
        (over-approximated, checked after generation)."""
        try:
            return self.negator.negate(target)
        except UnsupportedSchema as err:
            if not self.notes.lenient:
                raise
            self.notes.post_check(keyword, ptr, f"not enforced while generating ({err})")
            return None

    def _any_of(self, ptr: str, inner: tuple, active: frozenset, notes: bool) -> list:
        n = len(self.doc.at(ptr)["anyOf"])
        branches = [self._one(f"{ptr}/anyOf/{i}", inner, active, notes) for i in range(n)]
        if not self.subsets or n == 1 or n > MAX_SUBSET_BRANCHES:
            return self._union(branches, ptr)
        out = []
        for size in range(1, n + 1):
            for chosen in combinations(branches, size):
                part: list = [()]
                for b in chosen:
                    part = self._product(part, b, ptr)
                out = self._union([out, part], ptr)
        return out

    def _if(self, ptr: str, node: dict, inner: tuple, active: frozenset, notes: bool) -> list:
        cond = self._one(f"{ptr}/if", inner, active, notes)
        if "then" in node:
            cond = self._product(cond, self._one(f"{ptr}/then", inner, active, notes), ptr)
        negated = self._negation(f"{ptr}/if", ptr, "if")
        other = [()] if negated is None else self._one(negated, inner, active, False)
        if "else" in node:
            other = self._product(other, self._one(f"{ptr}/else", inner, active, notes), ptr)
        return self._union([cond, other], ptr)

    def _dependency(self, ptr: str, kw: str, key: str, dep, inner: tuple, active: frozenset,
                    notes: bool) -> list:
        """key absent, or present with its dependency (names that must be there too, or a schema)."""
        if (ptr, kw, key) not in self._synthesised:
            absent = self.doc.synthesise({"kvx:absent": [key]}, ptr)
            if isinstance(dep, list):
                present = self.doc.synthesise({"required": [key] + dep}, ptr)
            else:
                present = self.doc.synthesise({"required": [key], "kvx:ref": f"{ptr}/{kw}/{escape(key)}"}, ptr)
            self._synthesised[(ptr, kw, key)] = (absent, present)
        absent, present = self._synthesised[(ptr, kw, key)]
        return self._union([self._one(absent, inner, active, notes), self._one(present, inner, active, notes)], ptr)


def _dedupe(alts: list) -> list:
    seen, out = set(), []
    for alt in alts:
        unique = tuple(dict.fromkeys(alt))
        if unique not in seen:
            seen.add(unique)
            out.append(unique)
    return out
