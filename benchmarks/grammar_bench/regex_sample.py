"""A random string matching a regex (Python's parse of an ECMA-262 `pattern`), for instances.

Anchors and look-arounds are ignored: the instance is labelled by jsonschema afterwards, so a
sample that misses only costs a candidate."""
from __future__ import annotations

import random
import re
from re import _constants as C  # noqa: N812 (the parser's opcodes)
from re import _parser

PRINTABLE = [chr(c) for c in range(0x20, 0x7F)]
CATEGORY_CHARS = {
    C.CATEGORY_DIGIT: "0123456789",
    C.CATEGORY_NOT_DIGIT: "abcXYZ_-. ",
    C.CATEGORY_SPACE: " \t",
    C.CATEGORY_NOT_SPACE: "abcXYZ019_-.",
    C.CATEGORY_WORD: "abcxyzABCXYZ0189_",
    C.CATEGORY_NOT_WORD: " -.:/@",
}
MAX_EXTRA_REPEATS = 3
MAX_DEPTH = 50


class NoSample(Exception):
    pass


def sample(pattern: str, rng: random.Random) -> str:
    """A string that matches `pattern` (search semantics); raises NoSample if it cannot parse it."""
    try:
        parsed = _parser.parse(pattern)
    except (re.error, RecursionError, OverflowError) as err:
        raise NoSample(str(err)) from None
    groups: dict[int, str] = {}
    return _seq(parsed, rng, groups, 0)


def _seq(items, rng, groups, depth) -> str:
    if depth > MAX_DEPTH:
        raise NoSample("pattern nested too deep")
    return "".join(_item(op, arg, rng, groups, depth + 1) for op, arg in items)


def _item(op, arg, rng, groups, depth) -> str:
    if op is C.LITERAL:
        return chr(arg)
    if op is C.NOT_LITERAL:
        return rng.choice([c for c in "aZ0_ -" if ord(c) != arg])
    if op is C.ANY:
        return rng.choice("abcXYZ019 _-")
    if op is C.IN:
        return _char_class(arg, rng)
    if op is C.BRANCH:
        return _seq(rng.choice(arg[1]), rng, groups, depth)
    if op is C.SUBPATTERN:
        gid, _, _, body = arg
        text = _seq(body, rng, groups, depth)
        if gid is not None:
            groups[gid] = text
        return text
    if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
        lo, hi, body = arg
        hi = lo + MAX_EXTRA_REPEATS if hi is C.MAXREPEAT else hi
        return "".join(_seq(body, rng, groups, depth) for _ in range(rng.randint(lo, max(lo, min(hi, lo + MAX_EXTRA_REPEATS)))))
    if op is C.GROUPREF:
        return groups.get(arg, "")
    if op is C.ATOMIC_GROUP:
        return _seq(arg, rng, groups, depth)
    if op is C.GROUPREF_EXISTS:
        _, yes, no = arg
        return _seq(yes, rng, groups, depth) if rng.random() < 0.5 or no is None else _seq(no, rng, groups, depth)
    if op in (C.AT, C.ASSERT, C.ASSERT_NOT):
        return ""
    if op is C.CATEGORY:
        return rng.choice(CATEGORY_CHARS.get(arg, "a"))
    raise NoSample(f"unhandled regex op {op}")


def _char_class(items, rng) -> str:
    negate = bool(items) and items[0][0] is C.NEGATE
    chars: list[str] = []
    for op, arg in items[1:] if negate else items:
        if op is C.LITERAL:
            chars.append(chr(arg))
        elif op is C.RANGE:
            lo, hi = arg
            chars += [chr(rng.randint(lo, hi)) for _ in range(3)] + [chr(lo), chr(hi)]
        elif op is C.CATEGORY:
            chars += list(CATEGORY_CHARS.get(arg, "a"))
    if not negate:
        if not chars:
            raise NoSample("empty character class")
        return rng.choice(chars)
    excluded = set(chars)
    pool = [c for c in PRINTABLE if c not in excluded and re.match(_class_regex(items), c)]
    if not pool:
        raise NoSample("negated class excludes every printable character")
    return rng.choice(pool)


def _class_regex(items):
    return re.compile(_parser_to_pattern(items))


def _parser_to_pattern(items) -> str:
    """The class back as a pattern, so negated categories are checked by `re` itself."""
    out = []
    for op, arg in items:
        if op is C.NEGATE:
            out.append("^")
        elif op is C.LITERAL:
            out.append(re.escape(chr(arg)))
        elif op is C.RANGE:
            out.append(f"{re.escape(chr(arg[0]))}-{re.escape(chr(arg[1]))}")
        elif op is C.CATEGORY:
            out.append({C.CATEGORY_DIGIT: r"\d", C.CATEGORY_NOT_DIGIT: r"\D", C.CATEGORY_SPACE: r"\s",
                        C.CATEGORY_NOT_SPACE: r"\S", C.CATEGORY_WORD: r"\w", C.CATEGORY_NOT_WORD: r"\W"}.get(arg, ""))
    return "[" + "".join(out) + "]"
