"""Random schemas mixing every keyword family (applicators, objects, arrays, numbers, strings, enums,
formats, `$ref` recursion), in draft 2020-12 and in draft 7's words, against jsonschema on random
small values. Run long, it found bugs the targeted tests had missed: `not: {type: array}` refused
1.5, a required key outside propertyNames' enum was written, `dependentRequired: {b: [b]}` refused
every object with `b`, an enum member was dropped by an `unevaluatedItems` that its own oneOf branch
evaluated; then a schema inside a `not` lost its own annotations, an excluded object was judged with
its own exclusion, an enum member was held to a nested negation as if it were `{}`, and a `$ref`
cycle the check walks forever was a RecursionError (each with a test in test_keywords.py).

kvx writes declared keys in one order per object, so a value counts as accepted when some key order
of it is (program.run follows every order at once, stack set by stack set). A value the grammar
accepts and jsonschema refuses is excused only where kvx says it leaves a keyword to the record check
(post_checks) and some reading of those keywords allows the value (`excused`). Integral floats (1.0)
are left out: integers are written canonically (docs/grammar_compiler.md)."""
from __future__ import annotations

import copy
import itertools
import json
import random

import jsonschema
import pytest

from kvx.grammar import GrammarOptions, UnsupportedSchema
from kvx.grammar.schema.compiler import compile_program
from kvx.grammar.schema.refs import foreign_keywords

NAMES = ["a", "b", "c", "ab"]
PATTERNS = ["^a", "b$", "^[ab]+$", "c", "^$", "^a.*b$", "^\\d+$", "^[a-z\u00e9]{1,2}$", "^(a|bc)$", "\u00e9", "^\\S*$",
            "\\\\", "^.$", "^[^a]*$"]
LEAVES = [True, False, {}, {"type": "integer"}, {"type": "string"}, {"const": 1}, {"enum": [1, "a", None]},
          {"type": ["null", "boolean"]}, {"minimum": 1}, {"maxLength": 1}, {"type": "array"}, {"type": "object"},
          {"$ref": "#"}, {"$ref": "#/$defs/d"}, {"const": {"a": 1}}, {"enum": [[1], {"b": "a"}, "ab"]},
          {"multipleOf": 3}, {"items": False}, {"type": "number", "exclusiveMinimum": 0.5, "maximum": 2},
          {"pattern": "^(?!a)"}, {"format": "date"},
          {"oneOf": [{"properties": {"a": {"const": 1}}, "required": ["a"]},
                     {"properties": {"a": {"const": 2}, "b": {}}, "required": ["a", "b"]}]},
          {"prefixItems": [{"type": "integer"}], "items": {"type": "string"}},
          {"minContains": 0, "contains": {"const": 1}, "maxContains": 1},
          # formats jsonschema checks without optional packages (date-time, time and uri it would pass unread)
          {"format": "email"}, {"format": "ipv4"}, {"format": "uuid"}, {"minLength": 2, "maxLength": 3},
          {"pattern": "^.$"}, {"type": "number", "multipleOf": 0.5}, {"exclusiveMaximum": 10, "minimum": 2.5},
          {"const": "\u00e9"}, {"enum": ["a\"", "\\", "\U0001F600"]}, {"additionalProperties": False},
          {"minProperties": 2}, {"propertyNames": {"pattern": "^[a-c]+$"}}, {"type": "integer", "maximum": 100, "minimum": -5},
          {"maxLength": 1, "pattern": "^[^a]*$"}]
SCALARS = [None, True, False, 0, 1, 2, -1, 1.5, 3, 6, 0.5, -0.5, "", "a", "b", "ab", "ba", "c", "aab", "2020-02-29",
           "\u00e9", "a\u00e9", "\u00e9\u00e9\u00e9", "a\"", "\\", "\U0001F600", "1", "-", "a b", 100, 2.5, -1.5, 10,
           "2020-13-01", "user@example.com", "127.0.0.1", "123e4567-e89b-12d3-a456-426614174000"]


def random_schema(rng: random.Random, depth: int):
    if depth <= 0 or rng.random() < 0.15:
        return copy.deepcopy(rng.choice(LEAVES))
    sub = lambda: random_schema(rng, depth - 1)
    s: dict = {}
    for family in rng.sample(["type", "object", "array", "number", "string", "applicator", "enum"], rng.randrange(1, 4)):
        if family == "type":
            s["type"] = rng.choice(["object", "array", "string", "integer", "number", ["object", "null"],
                                    ["array", "string"], ["integer", "string"]])
        elif family == "object":
            if rng.random() < 0.7:
                s["properties"] = {n: sub() for n in rng.sample(NAMES, rng.randrange(1, 4))}
            if rng.random() < 0.4:
                s["required"] = rng.sample(NAMES, rng.randrange(1, 3))
            if rng.random() < 0.3:
                s["additionalProperties"] = sub()
            if rng.random() < 0.25:
                s["patternProperties"] = {p: sub() for p in rng.sample(PATTERNS, rng.randrange(1, 3))}
            if rng.random() < 0.2:
                s[rng.choice(["minProperties", "maxProperties"])] = rng.randrange(3)
            if rng.random() < 0.15:
                s["dependentRequired"] = {rng.choice(NAMES): rng.sample(NAMES, 1)}
            if rng.random() < 0.1:
                s["dependentSchemas"] = {rng.choice(NAMES): sub()}
            if rng.random() < 0.1:
                s["propertyNames"] = rng.choice([{"maxLength": 1}, {"pattern": rng.choice(PATTERNS)}, {"enum": ["a", "b"]}])
            if rng.random() < 0.1:
                s["unevaluatedProperties"] = rng.choice([False, {"type": "integer"}])
        elif family == "array":
            if rng.random() < 0.5:
                s["items"] = sub()
            if rng.random() < 0.3:
                s["prefixItems"] = [sub() for _ in range(rng.randrange(1, 3))]
            if rng.random() < 0.3:
                s["contains"] = sub()
                if rng.random() < 0.4:
                    s[rng.choice(["minContains", "maxContains"])] = rng.randrange(3)
            if rng.random() < 0.3:
                s[rng.choice(["minItems", "maxItems"])] = rng.randrange(3)
            if rng.random() < 0.1:
                s["uniqueItems"] = True
            if rng.random() < 0.1:
                s["unevaluatedItems"] = rng.choice([False, {"type": "integer"}])
        elif family == "number":
            for kw in rng.sample(["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"], rng.randrange(1, 3)):
                s[kw] = rng.choice([2, 0.5, 1.5]) if kw == "multipleOf" else rng.choice([-1, 0, 1, 1.5, 2])
        elif family == "string":
            for kw in rng.sample(["minLength", "maxLength", "pattern"], rng.randrange(1, 3)):
                s[kw] = rng.choice(PATTERNS) if kw == "pattern" else rng.randrange(3)
        elif family == "enum":
            s["enum"] = rng.sample([1, 2, "a", "ab", None, [], {}, {"a": 1}, [1], 1.5, True], rng.randrange(1, 4))
        else:
            kw = rng.choice(["anyOf", "oneOf", "allOf", "not", "if"])
            if kw == "not":
                s["not"] = sub()
            elif kw == "if":
                s["if"] = sub()
                if rng.random() < 0.8:
                    s["then"] = sub()
                if rng.random() < 0.6:
                    s["else"] = sub()
            else:
                s[kw] = [sub() for _ in range(rng.randrange(1, 4))]
    return s


def random_value(rng: random.Random, depth: int):
    r = rng.random()
    if depth <= 0 or r < 0.4:
        return rng.choice(SCALARS)
    if r < 0.7:
        return [random_value(rng, depth - 1) for _ in range(rng.randrange(4))]
    return {k: random_value(rng, depth - 1) for k in rng.sample(NAMES + ["", "ba", "cb"], rng.randrange(4))}


def _text(x) -> bytes:
    """Compact, UTF-8 as kvx writes it (an enum member has one spelling: `"\u00e9"` is not written)."""
    return json.dumps(x, separators=(",", ":"), ensure_ascii=False).encode()


def _after(program, value, stacks: set) -> set:
    """The program's stacks after writing `value` from `stacks`, in any key order (the union)."""
    if not stacks:
        return stacks
    if isinstance(value, dict):
        out: set = set()

        def members(left: frozenset, cur: set, first: bool) -> None:
            if not cur:
                return
            if not left:
                out.update(program.run(b"}", cur))
                return
            for k in left:
                at = program.run(_text(k) + b":", cur if first else program.run(b",", cur))
                members(left - {k}, _after(program, value[k], at), False)

        members(frozenset(value), program.run(b"{", stacks), True)
        return out
    if isinstance(value, list):
        cur = program.run(b"[", stacks)
        for i, item in enumerate(value):
            cur = _after(program, item, program.run(b",", cur) if i else cur)
        return program.run(b"]", cur)
    return program.run(_text(value), stacks)


def accepts_in_some_key_order(program, value) -> bool:
    return any(len(st) == 1 and program.final[st[0]] for st in _after(program, value, {(program.start,)}))


def _holder(schema: dict, ptr: str) -> tuple[dict, str]:
    """(the schema object holding the keyword at `ptr`, that keyword)."""
    parts = [p.replace("~1", "/").replace("~0", "~") for p in ptr.split("/")[1:]]
    node = schema
    for p in parts[:-1]:
        node = node[int(p)] if isinstance(node, list) else node[p]
    return node, parts[-1]


def without(schema: dict, pointers: list[str]) -> dict:
    """The schema without the keywords at `pointers` (those kvx leaves to the record check)."""
    out = copy.deepcopy(schema)
    for ptr in sorted(pointers, key=lambda p: -p.count("/")):  # inner ones first: an outer one holds them
        node, kw = _holder(out, ptr)
        node.pop(kw, None)
    return out


def one_of_read_as_any_of(schema: dict, pointers: list[str]) -> dict:
    """The schema with the oneOf at each of `pointers` read as the anyOf kvx generates it as."""
    out = copy.deepcopy(schema)
    for ptr in pointers:
        node, kw = _holder(out, ptr)
        if kw == "oneOf" and "oneOf" in node:
            node.setdefault("allOf", []).append({"anyOf": node.pop("oneOf")})
    return out


def excused(cls, schema: dict, post_checks: list[str], value) -> bool:
    """An invalid value the grammar accepts is excused where kvx says it leaves keywords to the record
    check and some reading of those keywords allows it: taken out, or (under a negation, where taking
    a oneOf out is no looser) a subset of the oneOfs read as anyOf."""
    if not post_checks:
        return False
    if cls(without(schema, post_checks), format_checker=cls.FORMAT_CHECKER).is_valid(value):
        return True
    ones = [p for p in post_checks if p.endswith("/oneOf")]
    return any(cls(one_of_read_as_any_of(schema, list(chosen)), format_checker=cls.FORMAT_CHECKER).is_valid(value)
               for k in range(1, len(ones) + 1) for chosen in itertools.combinations(ones, k))


def draft7(schema):
    """The same schema in draft 7's words: prefixItems/items -> an items array/additionalItems,
    dependentRequired/dependentSchemas -> dependencies, $defs -> definitions; unevaluated* and
    min/maxContains (not in draft 7) dropped, and `format: uuid` (draft 7's check leaves it unread; kvx
    asserts it in every draft). A $ref keeps its siblings, which draft 7 ignores."""
    if isinstance(schema, list):
        return [draft7(x) for x in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict = {}
    for k, v in schema.items():
        if k in ("unevaluatedItems", "unevaluatedProperties", "minContains", "maxContains") or (k, v) == ("format", "uuid"):
            continue
        if k in ("properties", "patternProperties", "$defs", "dependentSchemas"):
            v = {name: draft7(x) for name, x in v.items()}
        elif k != "dependentRequired":
            v = draft7(v)
        if k in ("dependentRequired", "dependentSchemas"):
            out.setdefault("dependencies", {}).update(v)
        elif k == "$ref":
            out[k] = v.replace("#/$defs/", "#/definitions/")
        else:
            out["definitions" if k == "$defs" else k] = v
    if "prefixItems" in out:
        if "items" in out:
            out["additionalItems"] = out.pop("items")
        out["items"] = out.pop("prefixItems")
    return out


def draft4(schema):
    """The draft-7 words in draft 4's: boolean exclusiveMinimum/Maximum beside minimum/maximum (the
    stricter bound kept), `{}` and `{"not": {}}` for true and false (booleans are schemas from draft
    6 on), no `format: date` (draft 4's check leaves it unread). Keywords draft 4 does not have
    (const, contains, propertyNames, if) stay: kvx enforces them as written outside negations."""
    if schema is True or schema is False:
        return {} if schema else {"not": {}}
    if isinstance(schema, list):
        return [draft4(x) for x in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict = {}
    for k, v in schema.items():
        if (k, v) == ("format", "date") or k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            continue
        if k in ("enum", "const", "required"):
            out[k] = v
        elif k in ("properties", "patternProperties", "definitions", "dependencies"):
            out[k] = {name: x if isinstance(x, list) else draft4(x) for name, x in v.items()}
        else:
            out[k] = draft4(v)
    for plain, strict, stricter in (("minimum", "exclusiveMinimum", max), ("maximum", "exclusiveMaximum", min)):
        if plain in schema or strict in schema:
            # the stricter bound; at equal values the exclusive one
            bound = stricter(schema.get(plain, schema.get(strict)), schema.get(strict, schema.get(plain)))
            out[plain] = bound
            if schema.get(strict) == bound:
                out[strict] = True
    return out


def foreign_to(schema, dialect: str) -> bool:
    """Whether `schema` uses a keyword its dialect does not have (kvx enforces those as written)."""
    if isinstance(schema, list):
        return any(foreign_to(x, dialect) for x in schema)
    if not isinstance(schema, dict):
        return False
    return any(k in foreign_keywords(dialect) or (k not in ("enum", "const", "required") and foreign_to(v, dialect))
               for k, v in schema.items())


DRAFT_URIS = {"2020-12": "https://json-schema.org/draft/2020-12/schema", "draft7": "http://json-schema.org/draft-07/schema#",
              "draft4": "http://json-schema.org/draft-04/schema#"}


def in_words_of(schema, dialect: str):
    return {"2020-12": lambda s: s, "draft7": draft7, "draft4": lambda s: draft4(draft7(s))}[dialect](schema)


def negated_schema(rng: random.Random):
    """A random schema under `not`, `if`/`then`/`else` or beside a `not` (the negations of negate.py)."""
    a, b, c = (random_schema(rng, 2) for _ in range(3))
    return rng.choice([{"not": a}, {"if": a, "then": b, "else": c}, {"anyOf": [{"not": a}, b]},
                       {"allOf": [b, {"not": a}]}, {"not": {"not": a}}])


@pytest.mark.parametrize("dialect", ["2020-12", "draft-07", "draft-04"])
@pytest.mark.parametrize("negated", [False, True], ids=["plain", "negated"])
@pytest.mark.parametrize("extra_keys", ["schema", "declared"])
@pytest.mark.parametrize("seed", range(2))
def test_random_schemas_agree_with_jsonschema(seed, extra_keys, negated, dialect):
    """"schema" (JSON Schema's open objects): accepted iff valid. "declared" (what `kvx extract`
    compiles: no undeclared keys) is stricter on purpose, so only: accepted => valid or post-checked.
    Negated schemas compile less often (forms negate.py refuses). Draft 7 (most SchemaStore schemas)
    reads the same schemas in its own words: tuple items, dependencies, a $ref hiding its siblings;
    draft 4 (a third of them) its boolean exclusive bounds, and kvx enforces the keywords it lacks
    (const, contains, if) as written, so a valid value may be refused there, never an invalid one
    let through (that reading found enum members judged against negations in the wrong words)."""
    cls = {"2020-12": jsonschema.Draft202012Validator, "draft-07": jsonschema.Draft7Validator,
           "draft-04": jsonschema.Draft4Validator}[dialect]
    compiled = 0
    for i in range(40):
        rng = random.Random(seed * 1_000_003 + i + {"2020-12": 0, "draft-07": 77, "draft-04": 4444}[dialect])
        schema = negated_schema(rng) if negated else random_schema(rng, 3)
        schema = {"allOf": [schema]} if not isinstance(schema, dict) else schema
        schema["$defs"] = {"d": random_schema(rng, 2)}
        if dialect != "2020-12":  # in that draft's words, naming it
            words = dialect.replace("-0", "")
            schema = {"$schema": DRAFT_URIS[words], **in_words_of(schema, words)}
        narrowed = dialect == "draft-04" and foreign_to(schema, "draft4")
        try:
            result = compile_program(schema, GrammarOptions(extra_keys=extra_keys))
        except UnsupportedSchema:
            continue
        compiled += 1
        check = cls(schema, format_checker=cls.FORMAT_CHECKER)
        for _ in range(25):
            value = random_value(rng, 3)
            accepted, valid = accepts_in_some_key_order(result.program, value), check.is_valid(value)
            if accepted and not valid:
                assert result.post_checks, ("invalid accepted", schema, value)
                assert excused(cls, schema, result.post_checks, value), ("invalid accepted beyond the post-checks", schema, value)
            if extra_keys == "schema" and not narrowed:
                assert accepted or not valid, ("valid rejected", schema, value)
    assert compiled >= (15 if negated else 25)


@pytest.mark.parametrize("seed", range(2))
def test_random_documents_mixing_drafts_let_no_invalid_value_through(seed):
    """A root in one draft, a subschema naming another's $schema, and a definition both reach (by
    `#/$defs/d` and `#/definitions/d`): jsonschema reads each schema in the draft of the validator
    that reaches it, and the grammar must not accept what it refuses (post-checks aside). Valid
    values may be refused where a keyword of another draft is enforced as written. 1,500 documents
    when written: 914 compiled, none let an invalid value through (nor did they before the drafts
    were read by route; then valid values were refused more often: 47 to 42 in 300)."""
    compiled = 0
    for i in range(40):
        rng = random.Random(seed * 7919 + i)
        outer, inner_draft = rng.sample(list(DRAFT_URIS), 2)
        x, y, d = (random_schema(rng, 2) for _ in range(3))
        inner = {"$schema": DRAFT_URIS[inner_draft], **in_words_of(y if isinstance(y, dict) else {"allOf": [y]}, inner_draft)}
        root = {"$schema": DRAFT_URIS[outer], "allOf": [in_words_of(x, outer), inner],
                "$defs": {"d": in_words_of(d, outer)}, "definitions": {"d": in_words_of(d, outer)}}
        try:
            result = compile_program(root, GrammarOptions(extra_keys="schema"))
        except UnsupportedSchema:
            continue
        compiled += 1
        cls = jsonschema.validators.validator_for(root)
        check = cls(root, format_checker=cls.FORMAT_CHECKER)
        for _ in range(25):
            value = random_value(rng, 3)
            if accepts_in_some_key_order(result.program, value) and not check.is_valid(value):
                assert excused(cls, root, result.post_checks, value), ("invalid accepted", root, value)
    assert compiled >= 15
