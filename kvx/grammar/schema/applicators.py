"""In-place applicators -> alternatives: the schemas that apply to one value, as a union (anyOf,
oneOf, if/else, dependencies) of conjunctions (allOf, $ref, not, the pieces themselves).

An alternative is a tuple of `Piece`s: every schema object whose own keywords must all hold. A piece
keeps the path of pieces it was reached through, so unevaluatedProperties/Items can tell which
keywords are in its scope. Where the schema uses unevaluated*, anyOf expands to every non-empty
subset of its branches (a value valid under two branches is evaluated by both), so the scopes are
exact; elsewhere a branch each.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from itertools import combinations

from kvx.grammar.automata import deadline
from kvx.grammar.errors import UnsupportedSchema, too_large
from kvx.grammar.schema.discriminators import Discriminators
from kvx.grammar.schema.keywords import Notes
from kvx.grammar.schema.negate import Negator
from kvx.grammar.schema.refs import DanglingRef, Document, escape, foreign_keywords

MAX_ALTERNATIVES = 256
MAX_SUBSET_BRANCHES = 6  # anyOf subsets (unevaluated* only): 2^n - 1 alternatives
MAX_CONTEXT = 64  # schemas in a value's context (applicable)
# what a context's schemas say of member order and members' contexts (key_order, member_context)
ORDERING = frozenset({"properties", "required", "patternProperties", "additionalProperties", "prefixItems", "items"})


@dataclass(frozen=True)
class Piece:
    ptr: str
    path: tuple  # pointers of the pieces this one was reached through, outermost first
    # the pieces its annotations reach, besides itself: those from path[seen_from] down. Under a `not`
    # (or if's negation) that is the negated schema and what it reaches, never the pieces above it
    seen_from: int = 0


Alternative = tuple  # of Piece


def uses_unevaluated(node) -> bool:
    """Whether any object in the document names unevaluatedProperties or unevaluatedItems (a walk
    over all of it: 44 ms on a 2 MB schema, so it looks at the deadline as it goes)."""
    stack, seen = [node], 0
    while stack:
        node = stack.pop()
        seen += 1
        if seen % 4096 == 0:
            deadline.check()
        if isinstance(node, dict):
            if "unevaluatedProperties" in node or "unevaluatedItems" in node:
                return True
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


class Applicators:
    def __init__(self, doc: Document, notes: Notes):
        self.doc = doc
        self.notes = notes
        self.negator = Negator(doc)
        self.checked_negator = Negator(doc, as_the_check_reads=True)  # for `not` and the dialect's `if`
        self.discriminators = Discriminators(doc)
        self.subsets = uses_unevaluated(doc.root)
        self._synthesised: dict[tuple, tuple] = {}  # one pointer per made-up schema, so rules are shared
        # without unevaluated* a piece's path and annotations are never read (scopes are for those
        # keywords alone): pieces are then their pointer, so a schema reached by many routes is one
        # rule, and its alternatives are worked out once (renovate's 300 properties: 17,406 walks)
        self._walked: dict[str, list[Alternative]] = {}
        # contexts by their pointers, members' contexts by (context, key, index, patterns): a big
        # schema asks for the same ones thousands of times (cityjson: 5,490 asks, 0.6 s of walking)
        self._contexts: dict[tuple, tuple] = {}
        self._member_contexts: dict[tuple, tuple] = {}
        self._key_orders: dict[tuple, tuple] = {}
        self._orderings: dict[tuple, tuple] = {}

    def alternatives(self, pointers: tuple) -> list[Alternative]:
        """The union of conjunctions of pieces that apply to a value under all of `pointers`."""
        alts: list[Alternative] = [()]
        for ptr in pointers:
            alts = self._product(alts, self._one(ptr, (), frozenset(), 0), ptr)
        return _dedupe(alts)

    def _product(self, a: list, b: list, ptr: str) -> list:
        if len(a) > 1 and len(b) > 1:  # conjunctions that multiply: drop those no value satisfies
            out = self.discriminators.product(a, b)
        else:
            out = [x + y for x in a for y in b]
        if len(out) > MAX_ALTERNATIVES:
            where = self.doc.where(ptr)
            raise too_large(where, f"more than {MAX_ALTERNATIVES} anyOf/oneOf/if combinations")
        return out

    def _union(self, parts: list[list], ptr: str) -> list:
        out = [alt for part in parts for alt in part]
        if len(out) > MAX_ALTERNATIVES:
            return self._product(out, [()], ptr)  # raises
        return out

    def _one(self, ptr: str, path: tuple, active: frozenset, seen_from: int) -> list[Alternative]:
        """`seen_from`: the pieces' annotations (unevaluated* scopes) reach path[seen_from:] (Piece)."""
        node = self.doc.at(ptr)
        if node is True:
            return [()]
        if node is False:
            return []
        if not isinstance(node, dict):
            where = self.doc.where(ptr)
            raise UnsupportedSchema(f"invalid schema: expected an object or boolean at {where}", None, where)
        if ptr in active:
            where = self.doc.where(ptr)
            raise UnsupportedSchema(f"unsupported keyword '$ref' at {where} (a schema that applies to itself "
                                    "without a nested value)", "$ref", where)
        if not self.subsets:
            hit = self._walked.get(ptr)
            if hit is not None:
                return hit
            path, seen_from = (), 0
        self._check_shape(ptr, node)
        active = active | {ptr}
        inner = path + (ptr,) if self.subsets else ()
        alts = self._expand(ptr, node, path, inner, active, seen_from)
        if not self.subsets:
            self._walked[ptr] = alts
        return alts

    def _expand(self, ptr: str, node: dict, path: tuple, inner: tuple, active: frozenset,
                seen_from: int) -> list[Alternative]:
        if "$ref" in node and self.doc.ref_replaces_siblings(ptr):  # draft <= 7: $ref replaces its siblings
            target = self._target(node["$ref"], ptr)
            return [] if target is None else self._one(target, path, active, seen_from)
        alts: list[Alternative] = [(Piece(ptr, path, seen_from),)]
        for kw in ("$ref", "kvx:ref"):
            if kw in node:
                target = self._target(node[kw], ptr) if kw == "$ref" else node[kw]
                alts = [] if target is None else self._product(alts, self._one(target, inner, active, seen_from), ptr)
        for i in range(len(node.get("allOf", []))):
            alts = self._product(alts, self._one(f"{ptr}/allOf/{i}", inner, active, seen_from), ptr)
        if "anyOf" in node:
            alts = self._product(alts, self._any_of(ptr, inner, active, seen_from), ptr)
        if "oneOf" in node:
            n = len(node["oneOf"])
            if n > 1:
                self.notes.post_check("oneOf", ptr, "generated as anyOf: that exactly one branch holds")
            branches = [self._one(f"{ptr}/oneOf/{i}", inner, active, seen_from) for i in range(n)]
            alts = self._product(alts, self._union(branches, ptr), ptr)
        if "not" in node:
            negated = self._negation(f"{ptr}/not", ptr, "not")
            if negated is not None:
                alts = self._product(alts, self._one(negated, inner, active, len(inner)), ptr)
        if "if" in node:
            alts = self._product(alts, self._if(ptr, node, inner, active, seen_from), ptr)
        for kw in ("dependentRequired", "dependentSchemas", "dependencies"):
            for choice in self._dependencies(ptr, kw, node.get(kw) or {}, inner, active, seen_from):
                alts = self._product(alts, choice, ptr)
        return alts

    def _dependencies(self, ptr: str, kw: str, deps: dict, inner: tuple, active: frozenset, seen_from: int):
        """One union of alternatives per dependency. Keys that require the same names are one choice,
        none of them or those names ((not a or L) and (not b or L) = (not a and not b) or L):
        snapcraft's 16 keys that each need `daemon` are 2 alternatives, not 2^16."""
        sharing: dict[tuple, list] = {}
        for key, dep in deps.items():
            if isinstance(dep, list):
                sharing.setdefault(tuple(dep), []).append(key)
        for key, dep in deps.items():
            if not isinstance(dep, list) or len(sharing[tuple(dep)]) == 1:
                yield self._dependency(ptr, kw, key, dep, inner, active, seen_from)
        for names, keys in sharing.items():
            if len(keys) > 1 and names:
                yield self._absent_or(ptr, (kw, tuple(keys)), keys, {"required": list(names)}, inner, active, seen_from)

    def applicable(self, pointers: tuple) -> tuple:
        """Every schema that may apply in place to a value at `pointers` (the schemas, their $ref
        targets, allOf/anyOf/oneOf branches, then/else; breadth first): the value's *context*, which
        fixes the order its object members are written in, whichever branch it takes."""
        hit = self._contexts.get(pointers)
        if hit is not None:
            return hit
        out, seen, todo = [], set(), deque(pointers)
        while todo and len(out) < MAX_CONTEXT:
            ptr = todo.popleft()
            if ptr in seen:
                continue
            node = self.doc.at(ptr)
            if not isinstance(node, dict):
                continue
            seen.add(ptr)
            out.append(ptr)
            if isinstance(node.get("$ref"), str):
                try:
                    todo.append(self.doc.resolve(node["$ref"], ptr))
                except UnsupportedSchema:
                    pass
            for kw in ("allOf", "anyOf", "oneOf"):
                if isinstance(node.get(kw), list):
                    todo.extend(f"{ptr}/{kw}/{i}" for i in range(len(node[kw])))
            todo.extend(f"{ptr}/{kw}" for kw in ("then", "else") if kw in node)
        hit = self._contexts[pointers] = tuple(out)
        return hit

    def ordering(self, context: tuple) -> tuple:
        """The schemas of `context` that key_order and member_context read (a `$ref` alone, an
        anyOf's holder, a description: none): two contexts with the same such schemas write every
        member alike, so a value reached by two routes is one rule, not one per route."""
        hit = self._orderings.get(context)
        if hit is None:
            hit = self._orderings[context] = tuple(p for p in context if not ORDERING.isdisjoint(self.doc.at(p)))
        return hit

    def key_order(self, context: tuple) -> tuple:
        """Property names in the order the context's schemas list them: `properties`, then the
        names only `required` lists."""
        hit = self._key_orders.get(context)
        if hit is not None:
            return hit
        order: dict[str, None] = {}
        for kw in ("properties", "required"):
            for ptr in context:
                names = self.doc.at(ptr).get(kw)
                order.update(dict.fromkeys(names if isinstance(names, (dict, list)) else ()))
        hit = self._key_orders[context] = tuple(k for k in order if isinstance(k, str))
        return hit

    def member_context(self, context: tuple, key: str | None = None, index: int | None = None,
                       patterns: frozenset[str] = frozenset()) -> tuple:
        """The context of a member (object key) or item (array index) of a value with `context`.
        A member: its `properties` entry; a name no schema of the context declares, the
        `patternProperties` entries among `patterns` (those its name matches), else
        `additionalProperties`."""
        hit = self._member_contexts.get((context, key, index, patterns))
        if hit is not None:
            return hit
        out = []
        for ptr in context:
            node = self.doc.at(ptr)
            if key is not None:
                pats = node.get("patternProperties")
                matched = [f"{ptr}/patternProperties/{escape(p)}" for p in (pats if isinstance(pats, dict) else ())
                           if p in patterns]
                if isinstance(node.get("properties"), dict) and key in node["properties"]:
                    out.append(f"{ptr}/properties/{escape(key)}")
                elif matched:
                    out += matched
                elif "additionalProperties" in node:
                    out.append(f"{ptr}/additionalProperties")
            else:
                prefix = node.get("prefixItems", node.get("items"))
                if isinstance(prefix, list):
                    if index < len(prefix):
                        out.append(f"{ptr}/{'prefixItems' if 'prefixItems' in node else 'items'}/{index}")
                elif "items" in node:
                    out.append(f"{ptr}/items")
        hit = self._member_contexts[(context, key, index, patterns)] = self.applicable(tuple(out))
        return hit

    def _check_shape(self, ptr: str, node: dict) -> None:
        """The applicators this walk reads have the shape the spec requires (the meta-schema check
        is the CLI's, when it loads the schema)."""
        for kw in ("allOf", "anyOf", "oneOf"):
            if kw in node and (not isinstance(node[kw], list) or not node[kw]):
                self._invalid(ptr, kw, "a non-empty array")
        for kw in ("$ref", "kvx:ref"):
            if kw in node and not isinstance(node[kw], str):
                self._invalid(ptr, kw, "a string")
        for kw in ("dependentRequired", "dependentSchemas", "dependencies"):
            deps = node.get(kw, {})
            if not isinstance(deps, dict) or not all(
                    isinstance(d, (dict, bool)) or (isinstance(d, list) and all(isinstance(x, str) for x in d))
                    for d in deps.values()):
                self._invalid(ptr, kw, "an object of schemas or name arrays")

    def _invalid(self, ptr: str, keyword: str, what: str):
        where = self.doc.where(ptr)
        raise UnsupportedSchema(f"invalid schema: '{keyword}' must be {what} at {where}", keyword, where)

    def _target(self, ref: str, ptr: str) -> str | None:
        """Pointer a $ref names; None (no value allowed there, with a warning) if it names nothing."""
        try:
            return self.doc.resolve(ref, ptr)
        except DanglingRef as err:
            self.notes.warn_once(f"{err.pointer}", f"{err}: no value is generated there")
            return None

    def _negation(self, target: str, ptr: str, keyword: str) -> str | None:
        """Pointer of the negation of `target`; None where lenient lets an unwritable one go
        (over-approximated, checked after generation)."""
        # an `if` the dialect lacks (drafts 4 and 6) is enforced as written, its condition's negation too
        foreign = keyword == "if" and "if" in foreign_keywords(self.doc.dialect_at(ptr))
        negator = self.negator if foreign else self.checked_negator
        try:
            return negator.negate(target)
        except UnsupportedSchema as err:
            if not self.notes.lenient:
                raise
            self.notes.post_check(keyword, ptr, f"not enforced while generating ({err})")
            return None

    def _any_of(self, ptr: str, inner: tuple, active: frozenset, seen_from: int) -> list:
        n = len(self.doc.at(ptr)["anyOf"])
        branches = [self._one(f"{ptr}/anyOf/{i}", inner, active, seen_from) for i in range(n)]
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

    def _if(self, ptr: str, node: dict, inner: tuple, active: frozenset, seen_from: int) -> list:
        cond = self._one(f"{ptr}/if", inner, active, seen_from)
        if "then" in node:
            cond = self._product(cond, self._one(f"{ptr}/then", inner, active, seen_from), ptr)
        negated = self._negation(f"{ptr}/if", ptr, "if")
        other = [()] if negated is None else self._one(negated, inner, active, len(inner))
        if "else" in node:
            other = self._product(other, self._one(f"{ptr}/else", inner, active, seen_from), ptr)
        return self._union([cond, other], ptr)

    def _dependency(self, ptr: str, kw: str, key: str, dep, inner: tuple, active: frozenset,
                    seen_from: int) -> list:
        """key absent, or present with its dependency (names that must be there too, or a schema)."""
        present = {"required": [key] + dep} if isinstance(dep, list) else \
            {"required": [key], "kvx:ref": f"{ptr}/{kw}/{escape(key)}"}
        return self._absent_or(ptr, (kw, key), [key], present, inner, active, seen_from)

    def _absent_or(self, ptr: str, key: tuple, absent: list, present: dict, inner: tuple, active: frozenset,
                   seen_from: int) -> list:
        """The union of `absent` keys missing and the `present` schema (synthesised once per key)."""
        if (ptr, *key) not in self._synthesised:
            self._synthesised[(ptr, *key)] = (self.doc.synthesise({"kvx:absent": absent}, ptr),
                                              self.doc.synthesise(present, ptr))
        none, some = self._synthesised[(ptr, *key)]
        return self._union([self._one(none, inner, active, seen_from), self._one(some, inner, active, seen_from)], ptr)


def _dedupe(alts: list) -> list:
    seen, out = set(), []
    for alt in alts:
        unique = tuple(dict.fromkeys(alt))
        if unique not in seen:
            seen.add(unique)
            out.append(unique)
    return out
