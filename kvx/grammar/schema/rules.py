"""JSON Schema -> rules of a pushdown automaton (kvx/grammar/automata/pda.py).

A value slot (the document, a property, an array position) is the union of its alternatives
(applicators.py): scalar alternatives are written inline as byte automata; all its object
alternatives become one object rule, all its array alternatives one array rule, and the slot
calls them. A rule is keyed by its alternatives, so a shape used in many places (or recursively,
through $ref) is built once, and nesting costs a frame at run time instead of a copy of the
automaton. Each rule body is composed into a byte DFA (calls spelled as call symbols) and `link`
joins them.
"""
from __future__ import annotations

import json

from kvx.grammar.automata import deadline
from kvx.grammar.automata import regex_ast as ra
from kvx.grammar.automata.cdfa import CDFA, literal_set
from kvx.grammar.automata.compose import Composer
from kvx.grammar.automata.pda import Program, call_symbol, link
from kvx.grammar.automata.process_cache import ProcessCache
from kvx.grammar.errors import TooLarge, UnsupportedSchema, too_large
from kvx.grammar.schema.applicators import Alternative, Applicators
from kvx.grammar.schema.arrays import ArrayBody
from kvx.grammar.schema.keywords import TYPES, Notes, described_types
from kvx.grammar.schema.objects import ObjectBody
from kvx.grammar.schema.refs import Document
from kvx.grammar.schema import strings
from kvx.grammar.schema.scalars import Scalars, StringSpec
from kvx.grammar.schema.values import dumps, json_equal
from kvx.grammar.options import GrammarOptions


_STRING_RULES: ProcessCache[CDFA | None] = ProcessCache(4096)  # (string specs, max_states) -> composed body
# the rules of "any value" (`{}`, `true`, unconstrained items and extras) have fixed ids, so their
# bodies (which call each other) are composed once per process and options
ANY_STRING = StringSpec(0, None, (), (), (), (), ())
GENERIC_RULES = {("string", (ANY_STRING,)): 1, ("object", ((),), ()): 2, ("array", ((),), ()): 3}
_GENERIC_BODIES: dict[tuple, object] = {}
# a slot with this many object shapes calls each as its own rule (the run time follows every frame
# that fits, as a set of stacks) instead of one rule for their union: open objects' "any other key"
# languages differ by shape, and determinising their union multiplies them (comet's 8 shapes: past
# the deadline; each alone: milliseconds)
SPLIT_OBJECTS_FROM = 4
# a schema of these keywords alone is a plain scalar slot (RuleBuilder._plain_slot): its type, annotations
PLAIN_KEYWORDS = frozenset({"type", "title", "description", "examples", "example", "default", "deprecated",
                            "readOnly", "writeOnly", "$comment"})


class RuleBuilder:
    def __init__(self, root, options: GrammarOptions):
        self.doc = Document(root)
        self.opt = options
        self.notes = Notes(self.doc, options.lenient)
        self.scalars = Scalars(self.notes, options.max_states, options.numbers)
        self.apps = Applicators(self.doc, self.notes)
        flexible = options.whitespace == "flexible"
        self.ws = ra.rep(ra.chars(" \t\n\r"), 0, options.max_ws) if flexible else ra.EMPTY
        self._values: dict[tuple, ra.Node] = {}
        self._rules: dict[tuple, int] = dict(GENERIC_RULES)
        self._scheduled: set[int] = set()
        self._todo: list[tuple[int, str, tuple, tuple]] = []
        self._where: list[str] = [""] * (1 + len(GENERIC_RULES))  # rule id -> a pointer naming it in messages
        self._composer = Composer(options.max_states)  # one for all rules: a slot used twice is built once
        self._strings: dict[int, tuple] = {}  # string rules to build: rule id -> their StringSpecs
        self._members: dict[tuple, tuple] = {}  # (piece pointer, enum members) -> those the piece allows
        self._plain: dict[str, ra.Node | None] = {}  # pointer -> its plain scalar slot (None: not one)

    # ---- entry ------------------------------------------------------------------------------
    def program(self) -> Program | None:
        bodies = [self._compile(ra.seq(self.ws, self.value(("",), self.apps.applicable(("",))), self.ws), "")]
        while self._todo or self._strings:
            if not self._todo:
                rid, specs = self._strings.popitem()
                bodies += [None] * (rid + 1 - len(bodies))
                bodies[rid] = self._string_rule(specs)
                continue
            rid, kind, alts, context = self._todo.pop()
            bodies += [None] * (rid + 1 - len(bodies))
            generic = (rid, self.opt) if rid in GENERIC_RULES.values() else None
            bodies[rid] = _GENERIC_BODIES.get(generic)
            if bodies[rid] is None:
                try:  # a cap met on the shape's own automata (its key languages) names the shape
                    body = ra.alt(*((ObjectBody if kind == "object" else ArrayBody)(self, alt, context).build()
                                    for alt in alts))
                except TooLarge as err:
                    raise too_large(self.doc.where(self._where[rid]), err) from None
                bodies[rid] = self._compile(body, self._where[rid])
                if generic:
                    _GENERIC_BODIES[generic] = bodies[rid]
        return link(bodies)

    def _compile(self, node: ra.Node, where: str):
        try:
            return self._composer.build_shared(node)
        except TooLarge as err:
            raise too_large(self.doc.where(where), err) from None

    def alternatives(self, pointers: tuple) -> list[Alternative]:
        return self.apps.alternatives(pointers)

    def negation(self, ptr: str) -> str:
        return self.apps.negator.negate(ptr)

    def member_context(self, context: tuple, key: str | None = None, index: int | None = None,
                       patterns: frozenset[str] = frozenset()) -> tuple:
        return self.apps.member_context(context, key, index, patterns)

    def key_order(self, context: tuple) -> tuple:
        return self.apps.key_order(context)

    # ---- value slots ------------------------------------------------------------------------
    def value(self, pointers: tuple, context: tuple) -> ra.Node:
        """Language of one value valid under every schema at `pointers`; containers are calls.
        `context` (applicators.applicable) fixes the order of object members at any depth."""
        pointers = self._present(pointers)
        plain = self._plain_of(pointers)
        if plain is not None:
            return plain
        context = self.apps.ordering(context)
        hit = self._values.get((pointers, context))
        if hit is None:
            where = pointers[0] if pointers else ""
            try:
                deadline.check()
                hit = self._slot(pointers, context)
            except TooLarge as err:
                raise too_large(self.doc.where(where), err) from None
            self._values[(pointers, context)] = hit
        return hit

    def plain(self, pointers: tuple) -> ra.Node | None:
        """value() where the one schema at `pointers` is a plain scalar (_plain_slot), whatever the
        context (an object member's need not be worked out); None for any other slot."""
        return self._plain_of(self._present(pointers))

    def _present(self, pointers: tuple) -> tuple:
        """The pointers once each, without those of `true` schemas (they allow anything)."""
        return tuple(p for p in dict.fromkeys(pointers) if self.doc.at(p) is not True)

    def _plain_of(self, present: tuple) -> ra.Node | None:
        if len(present) != 1:
            return None
        ptr = present[0]
        if ptr not in self._plain:
            try:
                self._plain[ptr] = self._plain_slot(ptr)
            except TooLarge as err:
                raise too_large(self.doc.where(ptr), err) from None
        return self._plain[ptr]

    def _slot(self, pointers: tuple, context: tuple) -> ra.Node:
        scalars, texts, objects, arrays = [], [], [], []
        for alt in self.alternatives(pointers):
            deadline.check()  # up to MAX_ALTERNATIVES of them, each its pieces' keywords read
            node, types, text = self._alternative(alt)
            scalars.append(node)
            if text is not None:
                texts.append(text)
            if "object" in types:
                objects.append(alt)
            if "array" in types:
                arrays.append(alt)
        parts = scalars
        if texts:
            parts.append(self._string_call(tuple(dict.fromkeys(texts))))
        if len(objects) >= SPLIT_OBJECTS_FROM:  # each shape its own rule, called from here
            parts += [self._call("object", (alt,), context) for alt in objects]
        elif objects:
            parts.append(self._call("object", tuple(objects), context))
        if arrays:
            parts.append(self._call("array", tuple(arrays), context))
        return ra.alt(*parts)

    def _plain_slot(self, ptr: str) -> ra.Node | None:
        """The language of a plain scalar schema (`{"type": "string", "description": ...}`, about 20 of
        a median schema's 60 slots), as _alternative writes it, without the walk over applicators,
        pieces and keywords; None for any other schema."""
        node = self.doc.at(ptr)
        if self.apps.subsets or not isinstance(node, dict) or "type" not in node or not node.keys() <= PLAIN_KEYWORDS:
            return None
        self.notes.check_keywords(ptr, node)
        types = self._types(node, ptr)
        if "object" in types or "array" in types:
            return None
        scalars = ra.alt(*self._scalar_parts(types, [(ptr, node)], ()))
        return ra.alt(scalars, self._string_call((ANY_STRING,))) if "string" in types else scalars

    def _string_call(self, specs: tuple) -> ra.Node:
        """Strings are frames too: one rule per set of string constraints, its body compiled once
        per process (a `format: uri` string is thousands of states, the same in every schema)."""
        key = ("string", specs)
        rid = self._rules.get(key)
        if rid is None:
            rid = self._rules[key] = len(self._where)
            self._where.append("")
        if rid not in self._scheduled:
            self._scheduled.add(rid)
            self._strings[rid] = specs
        return call_symbol(rid)

    def _string_rule(self, specs: tuple):
        key = (specs, self.opt.max_states)
        hit = _STRING_RULES.get(key)
        if hit is None:
            body = ra.alt(*(strings.quoted(self.scalars.string_body(spec)) for spec in specs))
            hit = _STRING_RULES.keep(key, self._compile(body, ""))
        return hit

    def _call(self, kind: str, alts: tuple, context: tuple) -> ra.Node:
        key = (kind, alts, context)
        rid = self._rules.get(key)
        if rid is None:
            rid = self._rules[key] = len(self._where)
            self._where.append(alts[0][0].ptr if alts[0] else "")
        if rid not in self._scheduled:
            self._scheduled.add(rid)
            self._todo.append((rid, kind, alts, context))
        return call_symbol(rid)

    # ---- one alternative --------------------------------------------------------------------
    def _alternative(self, alt: Alternative) -> tuple[ra.Node, set, StringSpec | None]:
        """(inline language of null, booleans, numbers and enum members, container types the
        alternative allows, its string constraints if it allows strings)."""
        pieces = self.pieces(alt)
        types = set(TYPES)
        for ptr, node in pieces:
            if "type" in node:
                types &= self._types(node, ptr)
        if self.opt.extra_keys == "declared" and not any("type" in node for _, node in pieces):
            described = described_types([node for _, node in pieces])
            if described and not types <= described:
                types &= described
                self.notes.typed_by_keywords(next(p for p, node in pieces if described_types([node])))
        values = self.listed(pieces)
        if values is not None:
            return self._enum(values, pieces), set(), None
        self._check_exclusions(pieces, types)
        excluded = [v for _, node in pieces for v in node.get("kvx:exclude", [])]
        text = self.scalars.string_spec(pieces) if "string" in types else None
        return ra.alt(*self._scalar_parts(types, pieces, excluded)), types & {"object", "array"}, text

    def _scalar_parts(self, types: set, pieces: list, excluded) -> list:
        """null, the booleans and the numbers `types` allows, but the `excluded` values (a `not`'s)."""
        parts = [ra.lit("null")] if "null" in types and not any(v is None for v in excluded) else []
        if "boolean" in types:
            parts += [ra.lit(dumps(b)) for b in (True, False) if not any(json_equal(b, v) for v in excluded)]
        if "integer" in types:
            parts.append(self.scalars.number(pieces, integer="number" not in types))
        return parts

    def _types(self, node: dict, ptr: str) -> set:
        t = node["type"]
        names = [t] if isinstance(t, str) else t
        if not isinstance(names, list) or not all(isinstance(n, str) and n in TYPES for n in names):
            where = self.notes.where(ptr)
            raise UnsupportedSchema(f"invalid schema: bad 'type' {json.dumps(t)} at {where}", "type", where)
        out = set(names)
        if "number" in out:
            out.add("integer")
        if node.get("nullable") is True:
            out.add("null")
        return out

    def pieces(self, alt: Alternative) -> list[tuple[str, dict]]:
        """(pointer, schema object) of each piece, its keywords checked (refused or warned once)."""
        pieces = [(p.ptr, self.doc.at(p.ptr)) for p in alt]
        for ptr, node in pieces:
            self.notes.check_keywords(ptr, node)
        return pieces

    def listed(self, pieces: list) -> list | None:
        """The values every enum/const of the pieces lists (None: no piece lists any)."""
        values = None
        for ptr, node in pieces:
            for kw in ("enum", "const"):
                if kw in node:
                    vals = [node["const"]] if kw == "const" else node["enum"]
                    if not isinstance(vals, list):
                        where = self.notes.where(ptr)
                        raise UnsupportedSchema(f"invalid schema: 'enum' must be an array at {where}", "enum", where)
                    values = vals if values is None else [v for v in values if any(json_equal(v, w) for w in vals)]
        return values

    def _kept(self, values: list, pieces: list) -> tuple[str, ...]:
        """Spellings of the listed values every piece allows, one per JSON value."""
        kept = tuple(dict.fromkeys(dumps(v) for v in values))
        for ptr, node in pieces:  # the members each piece allows, kept per piece and member list
            key = (ptr, kept)
            hit = self._members.get(key)
            if hit is None:
                hit = self._members[key] = tuple(t for i, t in enumerate(kept) if self._valid_member(i, t, ptr, node))
            kept = hit
        return kept

    def _valid_member(self, index: int, text: str, ptr: str, node: dict) -> bool:
        if index % 8 == 0:  # each member is a jsonschema call: cloudify's 204 node types against its
            deadline.check()  # many negated pieces ran 0.4 s between looks
        return self.scalars.valid(json.loads(text), ptr, node)

    def finite_scalars(self, pointers: tuple) -> tuple[str, ...] | None:
        """Spellings of every value allowed under all of `pointers` when they are a list of scalars
        (each alternative an enum/const of strings, numbers, booleans or null), else None."""
        out: dict[str, None] = {}
        for alt in self.alternatives(pointers):
            pieces = self.pieces(alt)
            values = self.listed(pieces)
            if values is None or any(isinstance(v, (dict, list)) for v in values):
                return None
            out.update(dict.fromkeys(self._kept(values, pieces)))
        return tuple(out)

    def _enum(self, values: list, pieces: list) -> ra.Node:
        kept = self._kept(values, pieces)
        if len(kept) <= 2:
            return ra.alt(*(ra.lit(t) for t in kept))
        return ra.Embed(literal_set([t.encode("utf-8") for t in kept]))

    def _check_exclusions(self, pieces: list, types: set) -> None:
        """`not` of an object or array value: refused unless that value is impossible here anyway."""
        for ptr, node in pieces:
            for v in node.get("kvx:exclude", []):
                if isinstance(v, (dict, list)) and ("object" if isinstance(v, dict) else "array") in types \
                        and all(self.scalars.built_in(v, p, n) for p, n in pieces):
                    where = self.notes.where(ptr)
                    raise UnsupportedSchema(f"unsupported keyword 'not' at {where} (excluding an object or array "
                                            "value)", "not", where)
