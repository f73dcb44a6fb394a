"""Numbers, strings and enum members of one alternative (the pieces' keywords all apply at once:
bounds are the tightest, patterns and formats intersected, negations subtracted)."""
from __future__ import annotations

import json
import math
import re
from contextvars import ContextVar
from dataclasses import dataclass, replace
from decimal import Decimal
from functools import lru_cache
from typing import TYPE_CHECKING, Literal

import jsonschema

from kvx.grammar.automata import deadline
from kvx.grammar.automata import regex_ast as ra
from kvx.grammar.automata.compose import fast_compile
from kvx.grammar.automata.dfa import DFA
from kvx.grammar.automata.dfa_ops import product, repeat
from kvx.grammar.automata.process_cache import ProcessCache
from kvx.grammar.errors import TooLarge, UnsupportedSchema
from kvx.grammar.options import Numbers
from kvx.grammar.schema import charset as cs
from kvx.grammar.schema import numbers, strings
from kvx.grammar.schema.keywords import APPLICATORS, INTERNAL, LONG_COUNT, TYPES, UNEVALUATED, Notes
from kvx.grammar.schema.refs import escape, validator_of
from kvx.grammar.schema.unicode_properties import python_pattern
from kvx.grammar.schema.values import dumps, json_equal

if TYPE_CHECKING:  # regex_parse itself loads with the first pattern
    from kvx.grammar.schema.regex_parse import Relax

PLAIN_NUMBER = ra.seq(ra.opt(ra.lit("-")), numbers.UNSIGNED)  # no exponent
# a length bound above this, on a string that also has a pattern or format, is left to the check
# after generation: the exact automaton is the pattern's states times the count (CloudFormation's
# `maxLength: 2048` with a pattern ran past the state cap), and a record rarely writes that much
LONG_WITH_PATTERN = 256
LENGTHS = ("minLength", "maxLength")  # a string's bound keywords (Notes.long_bounds)
_BODIES: ProcessCache[ra.Node | TooLarge] = ProcessCache(4096)  # (StringSpec, max_states) -> string_body or its cap's error
_JUDGING: ContextVar["Scalars"] = ContextVar("kvx_judging")  # whose internal keywords a running check reads


def _internal_keyword(name: str):
    """jsonschema's reading of one internal keyword: as the grammar reads it, by the Scalars judging."""
    def check(validator, spec, instance, schema):
        scalars = _JUDGING.get()
        if name == "kvx:ref":
            reader = scalars.reader(spec)
            if type(validator) is type(reader):
                yield from validator.descend(instance, scalars.doc.at(spec))
            else:  # between a synthesised schema and the document's: each read in its own dialect
                yield from reader.evolve(schema=scalars.doc.at(spec)).iter_errors(instance)
        elif not scalars.holds(name, spec, instance):
            import jsonschema

            yield jsonschema.ValidationError(f"{name} fails")
    return check


@lru_cache(maxsize=None)
def reading_internal(cls):
    """The validator class `cls` with the internal keywords of negate.py, so that one nested in a
    piece's own keywords counts (a negated `properties: {a: {const: 1}}` is `properties: {a:
    {kvx:ref: <not const 1>}}`, which plain jsonschema reads as `{}`)."""
    from jsonschema.validators import extend

    return extend(cls, {kw: _internal_keyword(kw) for kw in INTERNAL})


def _format_dfa(fmt):
    """kvx's automaton of format `fmt` (formats.py), False for one it has none for."""
    from kvx.grammar.schema.formats import format_dfa

    return format_dfa(fmt) if isinstance(fmt, str) else False


def _written(text: str) -> bytes:
    """A string's body (between the quotes) as kvx writes it: what patterns and formats read."""
    return dumps(text)[1:-1].encode("utf-8")


@dataclass(frozen=True)
class StringSpec:
    """The constraints on one string value, without their places: the key of a shared string rule."""

    lo: int
    hi: int | None
    patterns: tuple
    formats: tuple
    not_patterns: tuple
    not_formats: tuple
    excluded: tuple  # string values (negated enum/const)
FRACTIONAL = ra.seq(ra.opt(ra.lit("-")), numbers.UINT, ra.lit("."), ra.star(numbers.DIGIT), numbers.NONZERO,
                    ra.star(numbers.DIGIT))
# json.loads reads a number with a fraction as a float, and the check compares that float: written
# with 30 digits, 5.999...9 is 6.0, past `exclusiveMaximum: 6`, equal to an excluded 6, a multiple
# of 3, an integer. A decimal of at most 15 significant digits (DBL_DIG) reads back as itself, so
# it stays apart from every other such decimal and from every integer: where the check would tell
# them apart by a strict comparison, a number with a fraction keeps to 15 digits from its first
# non-zero one (an integer stays exact: json.loads reads it as a Python int).
SIGNIFICANT = 15
_D = numbers.DIGIT
ROUND_TRIP = ra.seq(ra.opt(ra.lit("-")), ra.alt(
    numbers.UINT,
    *(ra.seq(numbers.NONZERO, ra.rep(_D, k, k), ra.lit("."), ra.rep(_D, 1, SIGNIFICANT - 1 - k))
      for k in range(SIGNIFICANT - 1)),
    # a zero's fraction: at least a digit (`0.` alone is no JSON number: a token walk under a negated
    # const wrote `[0.]`)
    ra.seq(ra.lit("0."), ra.alt(ra.plus(ra.lit("0")),
                                ra.seq(ra.star(ra.lit("0")), numbers.NONZERO, ra.rep(_D, 0, SIGNIFICANT - 1)))),
))


@lru_cache(maxsize=4)
def _round_trip(max_states: int) -> DFA:
    return fast_compile(ROUND_TRIP, max_states)


def count_keyword(node: dict, kw: str, where: str, default):
    """A non-negative integer keyword (minLength, maxItems, ...), or `default` when absent."""
    if kw not in node:
        return default
    v = node[kw]
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise UnsupportedSchema(f"invalid schema: '{kw}' must be a non-negative integer at {where}", kw, where)
    return v


def draft4_flag(kw: str, value: bool, dialect: str, where: str) -> bool:
    """Whether boolean `value` of `kw` is draft 4's exclusiveMinimum/Maximum flag (read with
    minimum/maximum). A boolean there in a later draft is an invalid schema: the check would read
    true as the number 1, which no draft means."""
    if not kw.startswith("exclusiveM"):
        return False
    if dialect != "draft4":
        raise UnsupportedSchema(f"invalid schema: '{kw}' must be a number in {dialect} (a boolean is draft 4's) "
                                f"at {where}", kw, where)
    return True


def strict_bound(node: dict, kw: str) -> bool:
    """Whether bound `kw` (minimum, exclusiveMaximum, ...) leaves its own value out: an exclusive
    keyword, or draft 4's minimum/maximum beside its `exclusive...: true` flag."""
    return kw.startswith("exclusive") or node.get("exclusive" + kw[:1].upper() + kw[1:]) is True


def number_spellings(v) -> ra.Node:
    """Every plain spelling of the number v (trailing fraction zeros; -0 for 0)."""
    d = Decimal(v) if isinstance(v, int) else Decimal(repr(v))
    ip, _, fp = format(abs(d), "f").partition(".")
    fp = fp.rstrip("0")
    sign = ra.opt(ra.lit("-")) if d == 0 else (ra.lit("-") if d < 0 else ra.EMPTY)
    body = ra.seq(ra.lit(f"{ip}.{fp}"), ra.star(ra.lit("0"))) if fp else ra.seq(ra.lit(ip), ra.opt(
        ra.seq(ra.lit("."), ra.plus(ra.lit("0")))))
    return ra.seq(sign, body)


@dataclass(frozen=True)
class _TypeOnly:
    """A check of `type` beside keywords the validator does not act on (title, description,
    default): the draft's own type checker, without a validator run per value (an enum's members are
    judged one call each: 40 members were 0.4 ms)."""

    reader: jsonschema.protocols.Validator
    types: tuple[str, ...]

    @classmethod
    def of(cls, reader, schema: dict) -> _TypeOnly | None:
        t = schema.get("type")
        types = (t,) if isinstance(t, str) else tuple(t) if isinstance(t, list) else ()
        if not types or not set(types) <= set(TYPES) or any(k in reader.VALIDATORS for k in schema if k != "type"):
            return None
        return cls(reader, types)

    def is_valid(self, value) -> bool:
        return any(self.reader.is_type(value, t) for t in self.types)


class Scalars:
    def __init__(self, notes: Notes, max_states: int, numbers: Numbers = "json"):
        self.notes = notes
        self.doc = notes.doc
        self.max_states = max_states
        self.numbers = numbers
        self._readers: dict[str, object] = {}  # dialect -> jsonschema validator reading internal keywords
        self._validators: dict[tuple, tuple] = {}  # (id(node), reading) -> (node, its validator)
        # the record check's format checker: the root's draft's (jsonschema keeps it in a subschema
        # naming another $schema), asserting the formats whose packages are installed
        self.format_checker: jsonschema.FormatChecker = validator_of(self.doc.dialect).FORMAT_CHECKER

    def where(self, ptr: str) -> str:
        return self.notes.where(ptr)

    # ---- enum members -----------------------------------------------------------------------
    def satisfies(self, value, schema, ptr: str) -> bool:
        """Does `value` satisfy the whole of `schema` (at `ptr`; enum, applicators and refs included),
        as the record check judges it? For a declared key against propertyNames."""
        return self._checks(value, schema, "whole", ptr, schema)

    def valid(self, value, ptr: str, node: dict) -> bool:
        """Does `value` satisfy the piece's own keywords (its applicators are other pieces; enum
        and const members are intersected by the caller)? A piece with unevaluated* is judged whole:
        what its own keywords leave unevaluated depends on what its applicators evaluate (an enum
        member `[1]` under `unevaluatedItems: false` beside a oneOf branch's prefixItems)."""
        if not self._internal_ok(value, node):
            return False
        if node.get("nullable") is True and value is None:
            return True
        whole = any(k in node for k in UNEVALUATED)
        return self._checks(value, node, "own", ptr, lambda: {k: v for k, v in node.items() if k not in INTERNAL
                                                         and k not in ("enum", "const") and (whole or k not in APPLICATORS)})

    def built_in(self, value, ptr: str, node: dict) -> bool:
        """Can the container `value` come out of the piece's own rule at all? Its own keywords but
        neither its applicators nor unevaluated*: never a stricter verdict than the grammar's (a whole
        reading would count the very `not` that asks whether the value must be excluded)."""
        if not self._internal_ok(value, node, but="kvx:exclude"):
            return False
        return self._checks(value, node, "built", ptr, lambda: {k: v for k, v in node.items() if k not in INTERNAL
                                                           and k not in APPLICATORS and k not in UNEVALUATED})

    def reader(self, ptr: str):
        """The validator that judges the schema at `ptr`: the dialect it is read in for the document's
        own schemas (the root's, or a subschema's own $schema), draft 2020-12 for those the compiler
        synthesised (negate.py writes 2020-12's keywords: a number `exclusiveMinimum`, `prefixItems`,
        `maxContains`, which draft 4's or 7's validator would misread or skip). All read the internal
        keywords."""
        dialect = self.doc.dialect_at(ptr)
        if dialect not in self._readers:
            cls = validator_of(dialect)
            self._readers[dialect] = reading_internal(cls)(self.doc.root, format_checker=self.format_checker)
        return self._readers[dialect]

    def _checks(self, value, node, reading: Literal["whole", "own", "built"], ptr: str, schema) -> bool:
        """jsonschema's verdict on `value` under `schema` (or what the callable makes of `node`, at
        `ptr`), its validator built once per node and reading ("whole", "own", "built"); an empty
        schema (a piece of applicators alone, `{"$ref": ...}` above a large enum) holds every value.
        A schema the check cannot judge without recursing forever is refused."""
        import referencing.exceptions

        checker = self._validators.get((id(node), reading))
        if checker is None:
            schema = schema() if callable(schema) else schema
            reader = self.reader(ptr)
            checker = self._validators[(id(node), reading)] = (
                node, None if schema == {} else _TypeOnly.of(reader, schema) or reader.evolve(schema=schema))
        if checker[1] is None:
            return True
        judging = _JUDGING.set(self)
        try:
            return checker[1].is_valid(value)
        except RecursionError:
            where = self.where(ptr)
            raise UnsupportedSchema(f"unsupported keyword '$ref' at {where} (the record check recurses without end: "
                                    "a schema that applies to itself without a nested value)", "$ref", where) from None
        except referencing.exceptions.Unresolvable:  # what jsonschema raises for a $ref to nothing
            return False
        except (TypeError, AttributeError, KeyError, ValueError) as err:  # a schema its draft does not allow
            raise self._unreadable(ptr, err) from None
        finally:
            _JUDGING.reset(judging)

    def _unreadable(self, ptr: str, err: Exception) -> UnsupportedSchema:
        """The check fell over reading the schema (draft 4's `items: false`: booleans are schemas from
        draft 6 on): the first place the draft's meta-schema refuses, as the CLI says it when it loads
        a schema (the compiler alone reads only the keywords it uses)."""
        import jsonschema

        cls = validator_of(self.doc.dialect)
        error = jsonschema.exceptions.best_match(cls(cls.META_SCHEMA).iter_errors(self.doc.root))
        if error is None:
            where = self.where(ptr)
            return UnsupportedSchema(f"invalid schema: the record check cannot read it at {where} "
                                     f"({type(err).__name__}: {err})", None, where)
        where = "/" + "/".join(escape(str(p)) for p in error.absolute_path)
        return UnsupportedSchema(f"invalid schema: {error.message} at {where}", None, where)

    def _has_failing_member(self, value: dict, spec: dict) -> bool:
        """A member of `value` in the key region of `spec` (kvx:someKey) whose value fails its schema,
        or whose key fails propertyNames."""
        if "notNames" in spec:
            names = self.doc.at(spec["notNames"])
            return any(not self.satisfies(k, names, spec["notNames"]) for k in value)

        def in_region(key: str) -> bool:
            if "pattern" in spec:
                return self.matches(spec["pattern"], key)
            return key not in spec["except"] and not any(self.matches(p, key) for p in spec["exceptPatterns"])

        failing = self.doc.at(spec["fails"])
        return any(in_region(k) and not self.satisfies(v, failing, spec["fails"]) for k, v in value.items())

    def matches(self, pattern: str, text: str, ptr: str = "") -> bool:
        """Does the decoded string `text` hold a match of `pattern`, as the record check reads it?
        Yes where the narrow reading takes it (both ECMA-262 and Python's re match), no where the
        wide one does not (neither does), and Python's re.search decides in between (a text with a
        non-ASCII digit or letter, a \\r, a final newline): a pattern that backtracks without end
        on a long key is run only where it must be."""
        written = _written(text)
        narrow = self._pattern(pattern, ptr)
        if narrow is not None and narrow.accepts(written):
            return True
        wide = self._pattern(pattern, ptr, wide=True)
        if wide is None or not wide.accepts(written):
            return False
        try:
            return re.search(python_pattern(pattern), text) is not None
        except re.error:  # a pattern Python cannot read (the check refuses the schema): the narrow verdict
            return False

    def _internal_ok(self, value, node: dict, but: str = "kvx:ref") -> bool:
        """`value` meets the piece's internal keywords, all but `but` (kvx:ref is a schema, a piece
        of its own)."""
        return all(self.holds(kw, node[kw], value) for kw in INTERNAL if kw in node and kw not in (but, "kvx:ref"))

    def holds(self, keyword: str, spec, value) -> bool:
        """Does `value` meet the internal keyword (negate.py) `keyword: spec`? (kvx:ref is a schema.)"""
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if keyword == "kvx:exclude":
            return not any(json_equal(value, x) for x in spec)
        if keyword == "kvx:absent":
            return not isinstance(value, dict) or not any(k in value for k in spec)
        if keyword == "kvx:someKey":
            return not isinstance(value, dict) or self._has_failing_member(value, spec)
        if keyword == "kvx:notMultipleOf":
            return not number or not any(float(value).is_integer() and int(value) % int(m) == 0 for m in spec)
        if keyword == "kvx:fraction":
            return not number or not spec or not float(value).is_integer()
        if keyword == "kvx:notPattern":
            return not isinstance(value, str) or not any(self.matches(p, value) for p in spec)
        if keyword == "kvx:notFormat":
            if not isinstance(value, str):
                return True
            kind, arg = self.negated_format(spec)
            if kind == "pattern":
                return not self.matches(arg, value)
            return kind == "unknown" or kind == "format" and not _format_dfa(arg).accepts(_written(value))
        raise ValueError(f"not an internal keyword: {keyword}")

    # ---- numbers ----------------------------------------------------------------------------
    def number(self, pieces: list, integer: bool) -> ra.Node:
        lo = hi = None  # (Decimal, strict)
        multiples, excluded, fraction, off_multiples = [], [], False, []  # whole multipleOf values to miss
        for ptr, node in pieces:
            for kw in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
                bound = self._bound(node, kw, ptr)
                if bound is None:
                    continue
                if kw.endswith("inimum"):
                    if lo is None or bound[0] > lo[0] or (bound[0] == lo[0] and bound[1]):
                        lo = bound
                elif hi is None or bound[0] < hi[0] or (bound[0] == hi[0] and bound[1]):
                    hi = bound
            if "multipleOf" in node:
                multiple = self._multiple(node["multipleOf"], ptr, integer)
                if multiple is not None:
                    multiples.append(multiple)
            excluded += [v for v in node.get("kvx:exclude", []) if isinstance(v, (int, float))
                         and not isinstance(v, bool)]
            fraction |= bool(node.get("kvx:fraction"))
            off_multiples += [int(m) for m in node.get("kvx:notMultipleOf", [])]
        if integer:
            if fraction:
                return ra.NOTHING
            a = None if lo is None else (math.floor(lo[0]) + 1 if lo[1] or lo[0] != int(lo[0]) else int(lo[0]))
            b = None if hi is None else (math.ceil(hi[0]) - 1 if hi[1] or hi[0] != int(hi[0]) else int(hi[0]))
            if a is not None and b is not None and a > b:
                return ra.NOTHING
            if self.numbers == "parquet":
                a, b = numbers.within_int64(a, b)
            base = numbers.int_range(a, b)
            if not multiples and not excluded and not off_multiples:
                return base
            langs = [fast_compile(base, self.max_states)] + multiples
        else:
            if lo is None and hi is None and not multiples and not excluded and not fraction and not off_multiples:
                if self.numbers == "json":
                    return numbers.ANY_NUMBER
                return ra.Embed(numbers.float64_exact())  # no bound to fall back on: never empty
            langs = multiples
            if lo is not None:
                langs.append(fast_compile(numbers.decimal_ge(*lo), self.max_states))
            if hi is not None:
                langs.append(fast_compile(numbers.decimal_le(*hi), self.max_states))
            if fraction:
                langs.append(fast_compile(FRACTIONAL, self.max_states))
            if fraction or excluded or off_multiples or (lo is not None and lo[1]) or (hi is not None and hi[1]):
                langs.append(_round_trip(self.max_states))
            if not langs:
                langs.append(fast_compile(PLAIN_NUMBER, self.max_states))
        minus = [fast_compile(ra.alt(*(number_spellings(v) for v in excluded)))] if excluded else []
        minus += [self._whole_multiples(m, integer) for m in dict.fromkeys(off_multiples)]
        if self.numbers == "parquet" and not integer:
            exact = self.combine(langs + [numbers.float64_exact()], minus)
            if not ra.is_nothing(exact):
                return exact
        return self.combine(langs, minus)

    def _bound(self, node: dict, kw: str, ptr: str):
        if kw not in node:
            return None
        v = node[kw]
        if isinstance(v, bool):
            draft4_flag(kw, v, self.doc.dialect_at(ptr), self.where(ptr))  # read with minimum/maximum
            return None
        if not isinstance(v, (int, float)):
            raise UnsupportedSchema(f"invalid schema: '{kw}' must be a number at {self.where(ptr)}", kw, self.where(ptr))
        if isinstance(v, float) and not math.isfinite(v):
            return None
        d = Decimal(v) if isinstance(v, int) else Decimal(repr(v))
        return d, strict_bound(node, kw)

    def _multiple(self, m, ptr: str, integer: bool) -> DFA | None:
        """DFA of the multiples of m; None when it is past the state cap (`multipleOf: 0.123456789`
        among integers keeps 123,456,789 remainders): the keyword is then left to the check, as the
        issue has fractions checked, and the grammar writes the numbers the other keywords allow."""
        d = Decimal(m) if isinstance(m, int) else Decimal(repr(m))
        if isinstance(m, bool) or not d > 0:
            raise UnsupportedSchema(f"invalid schema: 'multipleOf' must be > 0 at {self.where(ptr)}",
                                    "multipleOf", self.where(ptr))
        try:
            dfa = numbers.multiple_of(d, integer, self.max_states)
        except TooLarge:
            deadline.check()  # a passed deadline is said as such (it is the one limit the user may raise)
            self.notes.post_check("multipleOf", ptr, f"its automaton is past the state cap (multipleOf {m}): "
                                  "written as any number the other keywords allow")
            return None
        if d != d.to_integral_value():
            self.notes.post_check("multipleOf", ptr, "a fractional multipleOf is exact in decimal while "
                                  "generating; jsonschema divides in floating point")
        return dfa

    def _whole_multiples(self, m: int, integer: bool):
        """Every spelling of the multiples of a whole m: canonical integers and, among numbers, the
        same with a zero fraction (6.0 is a multiple of 3 to jsonschema; -0.0 too)."""
        ints = numbers.multiple_of(Decimal(m), True, self.max_states)
        if integer:
            return ints
        zeros = ra.opt(ra.seq(ra.lit("."), ra.plus(ra.lit("0"))))
        return fast_compile(ra.seq(ra.alt(ra.Embed(ints), ra.lit("-0")), zeros), self.max_states)

    def combine(self, dfas: list, minus: list = ()) -> ra.Node:
        """The intersection of `dfas` without the words of `minus`, as an embedded DFA."""
        if not dfas or any(d is None for d in dfas):
            return ra.NOTHING
        d = dfas[0]
        for e in dfas[1:]:
            d = product(d, e, max_states=self.max_states)
            if d is None:
                return ra.NOTHING
        for e in minus:
            if e is not None:
                d = product(d, e, mode="minus", max_states=self.max_states)
                if d is None:
                    return ra.NOTHING
        return ra.Embed(d)

    # ---- strings ----------------------------------------------------------------------------
    def string_spec(self, pieces: list) -> StringSpec | None:
        """Every piece's lengths, patterns and formats at once (None: no string fits). Patterns are
        parsed here, so a bad one is refused naming its place."""
        lo, hi = 0, None
        patterns, formats, not_patterns, not_formats, excluded = [], [], [], [], []
        for ptr, node in pieces:
            where = self.where(ptr)
            lo = max(lo, count_keyword(node, "minLength", where, 0))
            m = count_keyword(node, "maxLength", where, None)
            if m is not None:
                hi = m if hi is None else min(hi, m)
            if "pattern" in node:
                self._pattern(node["pattern"], ptr, relax="past-cap")
                patterns.append(node["pattern"])
            if "format" in node and self._format(node["format"], ptr) is not False:
                formats.append(node["format"])
            for p in node.get("kvx:notPattern", []):
                self._pattern(p, ptr)
                not_patterns.append(p)
            if "kvx:notFormat" in node:
                kind, arg = self.negated_format(node["kvx:notFormat"])
                if kind == "nothing":
                    return None
                if kind == "pattern":
                    not_patterns.append(arg)
                elif kind == "format":
                    not_formats.append(arg)
                else:
                    self.notes.post_check("format", ptr, "under a negation: a format the grammar does not know")
            excluded += [v for v in node.get("kvx:exclude", []) if isinstance(v, str)]
        if hi is not None and hi < lo:
            return None
        if patterns or formats:
            lo, hi = self.notes.long_bounds(pieces, lo, hi, LONG_WITH_PATTERN, LENGTHS,
                                            f"over {LONG_WITH_PATTERN} with a pattern or format")
        else:
            lo, hi = self.notes.long_bounds(pieces, lo, hi, LONG_COUNT, LENGTHS, f"over {LONG_COUNT}")
        order = lambda xs: tuple(sorted(set(xs)))
        spec = StringSpec(lo, hi, order(patterns), order(formats), order(not_patterns), order(not_formats),
                          order(excluded))
        if (patterns or formats) and (lo or hi is not None):
            try:
                self.string_body(spec)
            except TooLarge:  # the pattern times the length counter is past the state cap: the pattern alone
                deadline.check()  # (unless the deadline passed: that refuses the compile)
                self.notes.long_bounds(pieces, lo, hi, 0, LENGTHS, "its count times the pattern or format is "
                                       "past the state cap")
                spec = replace(spec, lo=0, hi=None)
        return spec

    def string_body(self, spec: StringSpec) -> ra.Node:
        """What may stand between the quotes under `spec` (in any JSON spelling of each character).
        Kept per process, as the string rules are, and so is a cap's TooLarge (string_spec tries
        each spec with a length beside a pattern once)."""
        key = (spec, self.max_states)
        hit = _BODIES.get(key)
        if hit is None:
            try:
                hit = self._string_body(spec)
            except TooLarge as err:
                deadline.check()  # a passed deadline is this compile's, not the spec's: not kept
                hit = err
            _BODIES.keep(key, hit)
        if isinstance(hit, TooLarge):
            raise TooLarge(str(hit))
        return hit

    def _string_body(self, spec: StringSpec) -> ra.Node:
        from kvx.grammar.schema.formats import format_dfa
        from kvx.grammar.schema.regex_parse import pattern_dfa

        lo, hi, excluded = spec.lo, spec.hi, list(spec.excluded)
        dfas = [pattern_dfa(p, "pattern", self.max_states, relax="past-cap") for p in spec.patterns]
        dfas += [format_dfa(f) for f in spec.formats]
        minus = [pattern_dfa(p, "pattern", self.max_states, wide=True) for p in spec.not_patterns]
        minus += [format_dfa(f) for f in spec.not_formats]
        if excluded:
            spelled = ra.alt(*(ra.seq(*(strings.json_char(cs.of(c)) for c in v)) for v in excluded))
            minus.append(fast_compile(spelled, self.max_states))
        if not dfas and not minus:  # lengths only: the composer builds the counter copies in byte-class form
            if (max(lo, hi or 0) + 1) * (strings.ANY_CHAR.dfa.num_states - 1) > self.max_states:
                raise TooLarge(f"more than {self.max_states} DFA states")
            return strings.string_body(lo, hi)
        if lo > 0 or hi is not None or not dfas:
            dfas.insert(0, repeat(strings.ANY_CHAR.dfa, lo, hi, self.max_states))
        return self.combine(dfas, minus)

    def _pattern(self, pattern, ptr: str, relax: Relax = "no", wide: bool = False) -> DFA | None:
        """The pattern's DFA; `relax` (regex_parse.Relax): "past-cap" (a string value's own pattern)
        is said post-checked here where it is relaxed, "always" by its caller; `wide`: read for
        subtracting (regex_parse.pattern_dfa)."""
        from kvx.grammar.schema.regex_parse import RELAX_OVER, is_relaxed, pattern_dfa

        if not isinstance(pattern, str):
            where = self.where(ptr)
            raise UnsupportedSchema(f"invalid schema: 'pattern' must be a string at {where}", "pattern", where)
        dfa = pattern_dfa(pattern, f"{self.where(ptr)}/pattern", self.max_states, relax=relax, wide=wide)
        if relax == "past-cap" and is_relaxed(pattern, self.max_states):
            self.notes.post_check("pattern", ptr, f"past the state cap: its repeats over {RELAX_OVER} written "
                                  "unbounded")
        return dfa

    def negated_format(self, fmt) -> tuple[Literal["nothing", "format", "pattern", "unknown"], str]:
        """What `not: {format: fmt}` leaves of the strings, as the record check reads it:
        ("nothing", ""): the check does not assert fmt (draft 7's uuid, a date-time without its
        package), so every string has it; ("pattern", "@"): email, whose check is any text with an
        "@" (kvx's own automaton, a strict address, would leave "a@@b"); ("format", fmt): the strings
        outside kvx's automaton, read alike by the check; ("unknown", ""): kvx has no automaton for a
        format the check asserts (any string, left to the check)."""
        if not isinstance(fmt, str) or fmt not in self.format_checker.checkers:
            return "nothing", ""
        if fmt == "email":
            return "pattern", "@"
        return ("unknown", "") if _format_dfa(fmt) is False else ("format", fmt)

    def _format(self, fmt, ptr: str):
        """kvx's automaton of format `fmt`, False where it has none: said where it stands, as
        post-checked if the record check asserts that format (`regex`, `idn-email`), else as not
        enforced (nothing checks it)."""
        d = _format_dfa(fmt)
        if d is False and isinstance(fmt, str) and fmt in self.format_checker.checkers:
            self.notes.post_check("format", ptr, f"format {json.dumps(fmt)} has no automaton")
        elif d is False:
            self.notes.warn_once(f"{self.where(ptr)}/format",
                                 f"format {json.dumps(fmt)} at {self.where(ptr)} is not known; not enforced")
        return d
