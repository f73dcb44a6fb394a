"""Conjunctions no value satisfies because of a discriminating key, found before they multiply.

SchemaStore's configs pick a shape by one key: `allOf` of many `if: {properties: {type: {const:
X}}}, then: ...` (Cloudify's 125 node types, Minecraft's recipes). Each if/then/else is a union of
two alternatives, so n of them make 2^n conjunctions, and the compiler refused past 256; but where
the key is required, at most one `if` holds: a conjunction asking `type` to be both X and Y (or X
and not X) is empty. `Discriminators.product` drops them, saying so from the pieces' own `required`,
`properties.K.const/enum`, `type` and the exclusions and absences a negated `if` is written with
(negate.py); a key's values count only for conjunctions restricted to objects (for any other value
`required` and `properties` hold vacuously). Dropping an empty conjunction changes no language.
The facts of each conjunction are kept with it, so a product step merges two summaries instead of
rereading every piece.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from kvx.grammar.automata import deadline
from kvx.grammar.errors import UnsupportedSchema
from kvx.grammar.schema.refs import DanglingRef, Document, escape
from kvx.grammar.schema.values import canonical

MAX_HOPS = 8  # $ref / kvx:ref / one-branch anyOf links followed to find a key's values


@dataclass(frozen=True)
class KeyFacts:
    """What a conjunction of schema objects says of a value: the JSON types it may have (None: any),
    the keys it requires or forbids of an object, and per key the values it allows and excludes."""

    types: frozenset | None = None  # "number" is split in "integer" and "fraction"
    required: frozenset = frozenset()
    absent: frozenset = frozenset()  # keys a negated `required` forbids (kvx:absent)
    allowed: dict = field(default_factory=dict)  # key -> frozenset of value texts (absent: any)
    excluded: dict = field(default_factory=dict)  # key -> frozenset of value texts

    def __and__(self, other: "KeyFacts") -> "KeyFacts":
        allowed = dict(self.allowed)
        for k, v in other.allowed.items():
            allowed[k] = allowed[k] & v if k in allowed else v
        excluded = dict(self.excluded)
        for k, v in other.excluded.items():
            excluded[k] = excluded[k] | v if k in excluded else v
        types = other.types if self.types is None else self.types if other.types is None else self.types & other.types
        return KeyFacts(types, self.required | other.required, self.absent | other.absent, allowed, excluded)

    @property
    def empty(self) -> bool:
        if self.types is not None and not self.types:
            return True  # no type is left
        if self.types is None or not self.types <= {"object"}:
            return False  # a value of another type holds `required` and `properties` vacuously
        return any(k in self.absent or (k in self.allowed and not self.allowed[k] - self.excluded.get(k, frozenset()))
                   for k in self.required)


NONE = KeyFacts()


class Discriminators:
    def __init__(self, doc: Document):
        self.doc = doc
        self._facts: dict[str, KeyFacts] = {}
        self._of_alt: dict[int, tuple] = {}  # id(alternative) -> (it, its facts): products build on them

    def product(self, a: list, b: list) -> list:
        """Every conjunction x + y (x in a, y in b) but those no value satisfies."""
        fa, fb = [self._of_alternative(x) for x in a], [self._of_alternative(y) for y in b]
        out = []
        for x, f in zip(a, fa):
            deadline.check()
            for y, g in zip(b, fb):
                joined = f & g
                if not joined.empty:
                    alt = x + y
                    self._of_alt[id(alt)] = (alt, joined)
                    out.append(alt)
        return out

    def _of_alternative(self, alt: tuple) -> KeyFacts:
        hit = self._of_alt.get(id(alt))
        if hit is not None and hit[0] is alt:
            return hit[1]
        facts = NONE
        for p in alt:
            facts = facts & self._of(p.ptr)
        self._of_alt[id(alt)] = (alt, facts)
        return facts

    def _of(self, ptr: str) -> KeyFacts:
        hit = self._facts.get(ptr)
        if hit is None:
            hit = self._facts[ptr] = _facts(self.doc, ptr)
        return hit


def _facts(doc: Document, ptr: str) -> KeyFacts:
    node = doc.at(ptr)
    if not isinstance(node, dict):
        return NONE
    allowed, excluded = {}, {}
    props = node.get("properties")
    for key in (props if isinstance(props, dict) else ()):
        a, x = _values(doc, f"{ptr}/properties/{escape(key)}", MAX_HOPS)
        if a is not None:
            allowed[key] = a
        if x:
            excluded[key] = x
    return KeyFacts(_types(node), _names(node, "required"), _names(node, "kvx:absent"), allowed, excluded)


def _names(node: dict, kw: str) -> frozenset:
    """The key names a `required`-like keyword lists."""
    names = node.get(kw)
    return frozenset(k for k in names if isinstance(k, str)) if isinstance(names, list) else frozenset()


def _types(node: dict) -> frozenset | None:
    t = node.get("type")
    names = [t] if isinstance(t, str) else t if isinstance(t, list) else None
    if names is None or not all(isinstance(n, str) for n in names):
        return None
    out = set()
    for name in names:
        out |= {"integer", "fraction"} if name == "number" else {name}
    if node.get("nullable") is True:  # OpenAPI
        out.add("null")
    return frozenset(out)


def _values(doc: Document, ptr: str, hops: int) -> tuple[frozenset | None, frozenset]:
    """(values the member schema at `ptr` allows or None for any, values it excludes), read from
    const, enum, kvx:exclude and what its references and a one-branch anyOf add (all hold at once)."""
    sub = doc.at(ptr)
    if not isinstance(sub, dict) or hops == 0:
        return None, frozenset()
    allowed, excluded = None, frozenset()
    found = []
    if "const" in sub:
        found.append(frozenset([_text(sub["const"])]))
    if isinstance(sub.get("enum"), list):
        found.append(frozenset(_text(v) for v in sub["enum"]))
    if isinstance(sub.get("kvx:exclude"), list):
        excluded = frozenset(_text(v) for v in sub["kvx:exclude"])
    linked = [sub["kvx:ref"]] if isinstance(sub.get("kvx:ref"), str) else []
    if isinstance(sub.get("$ref"), str):
        try:
            linked.append(doc.resolve(sub["$ref"], ptr))
        except (DanglingRef, UnsupportedSchema):  # the walk reports it; here it just says nothing
            pass
    if isinstance(sub.get("anyOf"), list) and len(sub["anyOf"]) == 1:
        linked.append(f"{ptr}/anyOf/0")
    for target in linked:
        a, x = _values(doc, target, hops - 1)
        if a is not None:
            found.append(a)
        excluded |= x
    for values in found:
        allowed = values if allowed is None else allowed & values
    return allowed, excluded


def _text(value) -> str:
    try:
        return canonical(value)
    except ValueError:  # NaN and the like: never equal to a JSON value
        return repr(value)
