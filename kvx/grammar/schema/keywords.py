"""Which keywords the compiler enforces, leaves to the check after generation, or refuses; and the
notes (warnings, post-checked pointers) it gathers while walking a schema."""
from __future__ import annotations

from kvx.grammar.errors import UnsupportedSchema
from kvx.grammar.schema.refs import META, Document, escape, foreign_keywords

TYPES = ("null", "boolean", "integer", "number", "string", "array", "object")
# the types each keyword describes (it constrains only values of those types): a schema that names no
# `type` allows any value, yet one with `properties` and `required` describes an object, and a small
# model given the choice writes the shortest value its grammar allows (a bare string, a number)
# instead; extra keys "declared" writes only the types its keywords describe
KEYWORD_TYPES = {
    **dict.fromkeys(("properties", "required", "additionalProperties", "patternProperties", "minProperties",
                     "maxProperties", "propertyNames", "dependentRequired", "dependentSchemas", "dependencies",
                     "unevaluatedProperties"), ("object",)),
    **dict.fromkeys(("items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems", "contains",
                     "minContains", "maxContains", "unevaluatedItems"), ("array",)),
    **dict.fromkeys(("minLength", "maxLength", "pattern"), ("string",)),
    **dict.fromkeys(("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"),
                    ("integer", "number")),
}


def described_types(nodes: list[dict]) -> set[str]:
    """The types the nodes' keywords describe (KEYWORD_TYPES; `nullable: true` adds null); empty when
    none does."""
    out = {t for node in nodes for kw in node for t in KEYWORD_TYPES.get(kw, ())}
    if out and any(node.get("nullable") is True for node in nodes):
        out.add("null")
    return out


APPLICATORS = {"$ref", "allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentRequired",
               "dependentSchemas", "dependencies", "kvx:ref"}
ENFORCED = {"type", "enum", "const", "properties", "required", "additionalProperties", "items",
            "prefixItems", "additionalItems", "minItems", "maxItems", "minLength", "maxLength", "pattern",
            "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "nullable",
            "patternProperties", "minProperties", "maxProperties", "propertyNames", "contains",
            "minContains", "maxContains", "multipleOf", "unevaluatedProperties", "unevaluatedItems"}
UNEVALUATED = ("unevaluatedItems", "unevaluatedProperties")  # read with what the applicators evaluate
# a length or item count above this is left to the check after generation: its exact counter is the
# bound times the automaton of one character or item (a plain `maxLength: 10000` would be 200,000
# states, past the cap), and a record ends within --max-tokens (256 by default) long before it
LONG_COUNT = 1024
# what negations are written with (kvx/grammar/schema/negate.py); never in a user's schema
INTERNAL = {"kvx:ref", "kvx:exclude", "kvx:absent", "kvx:notPattern", "kvx:notFormat", "kvx:fraction",
            "kvx:notMultipleOf", "kvx:someKey"}
UNSUPPORTED = {"$dynamicRef", "$recursiveRef"}
ROUTE_REF = "kvx:routeRef"  # a $ref to a $dynamicAnchor landing by route (dynamic_refs.py): refused
_DYNAMIC_REFUSALS = {
    "$dynamicRef": "where it lands depends on the route the record check takes to it",
    ROUTE_REF: "it names a $dynamicAnchor, which the record check resolves dynamically, and where it lands "
               "depends on the route",
    "$recursiveRef": "more than one resource carries $recursiveAnchor"}


class Notes:
    """Warnings and post-checked pointers of one compile; refuses what the automaton cannot do
    (unless lenient: then the keyword is over-approximated and checked after generation)."""

    def __init__(self, doc: Document, lenient: bool):
        self.doc = doc
        self.lenient = lenient
        self.warnings: list[str] = []
        self.post_checks: list[str] = []
        self.closed: list[str] = []  # objects kept to their declared keys (GrammarOptions.extra_keys)
        self.typed: list[str] = []  # untyped schemas kept to the types their keywords describe (likewise)
        self._seen: set[str] = set()

    def where(self, ptr: str) -> str:
        return self.doc.where(ptr)

    def post_check(self, keyword: str, ptr: str, what: str) -> None:
        """`keyword` at `ptr` is only checked after generation (jsonschema), and said so."""
        where = f"{self.doc.display(ptr)}/{escape(keyword)}"
        if where not in self._seen:
            self._seen.add(where)
            self.warnings.append(f"keyword '{keyword}' at {self.where(ptr)}: {what}; checked after generation")
            self.post_checks.append(where)

    def long_bounds(self, pieces: list, lo: int, hi: int | None, limit: int, keywords: tuple[str, str],
                    what: str) -> tuple[int, int | None]:
        """(lo, hi) without a bound over `limit` (`keywords`: the minimum's and the maximum's names),
        each such keyword said post-checked (`what`)."""
        for keyword, value in zip(keywords, (lo, hi)):
            if value is not None and value > limit:
                for ptr, node in pieces:
                    bound = node.get(keyword)
                    if isinstance(bound, (int, float)) and not isinstance(bound, bool) and bound > limit:
                        self.post_check(keyword, ptr, what)
        return (0 if lo > limit else lo), (None if hi is not None and hi > limit else hi)

    def unsupported(self, keyword: str, ptr: str, what: str) -> None:
        """Refuse (one line, keyword and pointer), or with lenient over-approximate and post-check."""
        if not self.lenient:
            display = self.doc.display(ptr)
            raise UnsupportedSchema(f"unsupported keyword '{keyword}' at {display or '/'}"
                                    + (f" ({what})" if what else ""), keyword, display)
        self.post_check(keyword, ptr, what or "not enforced while generating")

    def closed_object(self, ptr: str) -> None:
        where = self.where(ptr)
        if where not in self.closed:
            self.closed.append(where)

    def typed_by_keywords(self, ptr: str) -> None:
        where = self.where(ptr)
        if where not in self.typed:
            self.typed.append(where)

    def declared_notes(self) -> list[str]:
        """One line each for the objects kept to their declared keys and the untyped schemas written
        as the types their keywords describe (extra keys "declared")."""
        return [f"{what} (extra keys 'schema' writes {other}): {_listed(places)}" for what, other, places in (
            ("objects written with their declared keys only; the schema allows others", "them", self.closed),
            ("values written as the type their keywords describe; the schema names no 'type', so allows any",
             "any", self.typed)) if places]

    def warn_once(self, key: str, message: str) -> None:
        if key not in self._seen:
            self._seen.add(key)
            self.warnings.append(message)

    def check_keywords(self, ptr: str, node: dict) -> None:
        """Unknown keywords are annotations (a warning); refused ones raise. Another draft's keyword is
        enforced as its author meant it (only narrowing what is written: a negation reads it as the
        record check does, negate.py), and said so."""
        dialect = self.doc.dialect_at(ptr)
        if dialect == "draft3":  # a subschema's own $schema (the root's is refused by compiler.py)
            where = self.where(ptr)
            raise UnsupportedSchema(f"unsupported keyword '$schema' at {where} (draft 3)", "$schema", where)
        foreign = foreign_keywords(dialect)
        for kw in node:
            if kw in foreign:
                self.warn_once(f"{self.doc.display(ptr)}/{escape(kw)}",
                               f"keyword '{kw}' at {self.where(ptr)} is not one of the schema's dialect "
                               f"({dialect}): enforced while generating, not by the record check (a "
                               f"$schema naming a draft that has it makes the check read it too)")
            if kw in ENFORCED or kw in META or kw in APPLICATORS or kw in INTERNAL:
                continue
            if kw == "uniqueItems":
                continue  # exact or post-checked where an array is written (arrays.py)
            if kw in UNSUPPORTED or kw == ROUTE_REF:  # dynamic_refs.py wrote the others as references
                self.unsupported("$ref" if kw == ROUTE_REF else kw, ptr, _DYNAMIC_REFUSALS[kw])  # to where they land
            elif not kw.startswith("x-"):  # x-...: vendor annotations, by convention
                self.warn_once(f"{self.doc.display(ptr)}/{escape(kw)}",
                               f"unknown keyword '{kw}' at {self.where(ptr)} ignored")


def _listed(places: list[str]) -> str:
    more = f" and {len(places) - 5} more" if len(places) > 5 else ""
    return f"{', '.join(places[:5])}{more}"
