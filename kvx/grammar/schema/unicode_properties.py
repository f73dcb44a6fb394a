r"""Unicode property escapes (`\p{Letter}`, `\P{Lu}`, `\p{Script=Greek}`) in schema patterns.

ECMA-262 reads them (JSON Schema's patterns are its regexes, in Unicode mode); Python's `re`, which
the record check runs, does not: jsonschema refused such a schema as "not a 'regex'". Both sides
now read a property through the `regex` package's Unicode tables, as code point ranges: the grammar
parses them into its classes (regex_parse), and the check gets every such pattern spelt as a
Python class of those ranges (python_pattern), so the two agree on every character. Property
names are what `regex` knows: ECMA-262's general categories, scripts and binary properties, and a
few more of its own.
"""
from __future__ import annotations

import json
import re
from functools import lru_cache

import numpy as np

from kvx.grammar.schema import charset as cs
from kvx.grammar.schema.refs import with_children

NAME = re.compile(r"[A-Za-z0-9_ =.&-]+")  # the letters a property name or `name=value` is spelt with
ESCAPE = re.compile(r"\\(?:([pP])\{([^}]*)\}|.)", re.S)  # `\p{..}`, `\P{..}` or any other escape


class UnknownProperty(ValueError):
    pass


@lru_cache(maxsize=1)
def _scalars() -> str:
    """Every Unicode scalar value once, in order (no surrogates: no JSON text holds one alone)."""
    points = np.concatenate([np.arange(lo, hi + 1, dtype=np.uint32) for lo, hi in cs.ANY])
    return points.tobytes().decode("utf-32-le")


def _code_point(index: int) -> int:
    return index if index < 0xD800 else index + 0x800  # the string skips the surrogates


@lru_cache(maxsize=256)
def property_ranges(name: str) -> tuple:
    """The code points `\\p{name}` matches, as sorted (lo, hi) ranges; UnknownProperty if `regex`
    does not know the name."""
    import regex  # only for schemas that spell a property: ~10 ms to import

    if not NAME.fullmatch(name):
        raise UnknownProperty(f"Unicode property {name!r}")
    try:
        found = regex.compile(r"\p{%s}+" % name)
    except regex.error:
        raise UnknownProperty(f"Unicode property {name!r}") from None
    return cs.normalise((_code_point(m.start()), _code_point(m.end() - 1)) for m in found.finditer(_scalars()))


def escape_ranges(letter: str, name: str) -> tuple:
    """`\\p{name}` (letter p) or `\\P{name}` (its complement) as code point ranges."""
    ranges = property_ranges(name)
    return cs.complement(ranges) if letter == "P" else ranges


def _python_class_body(ranges: tuple) -> str:
    return "".join(f"\\U{lo:08x}" if lo == hi else f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi in ranges)


def python_pattern(pattern: str) -> str:
    """`pattern` with each Unicode property escape spelt as the class of its code points that
    Python's `re` reads (inside a class, its ranges join the class); unchanged without one, or
    where a name is unknown (the check then refuses the pattern as jsonschema always did)."""
    if "\\p{" not in pattern and "\\P{" not in pattern:
        return pattern
    out, at, depth = [], 0, 0  # depth: inside a character class
    for i, c in enumerate(pattern):
        if i < at:
            continue
        if c == "\\":
            m = ESCAPE.match(pattern, i)
            if m is None:
                return pattern  # a trailing backslash: the pattern is refused as it is
            if m.group(1):
                try:
                    body = _python_class_body(escape_ranges(m.group(1), m.group(2)))
                except UnknownProperty:
                    return pattern
                out.append(body if depth else f"[{body}]")
            else:
                out.append(m.group(0))
            at = m.end()
            continue
        if c == "[" and not depth:
            depth = 1
            if pattern.startswith("[]", i) or pattern.startswith("[^]", i):  # `]` first is a member
                at = i + (2 if pattern[i + 1] == "]" else 3)
                out.append(pattern[i:at])
                continue
        elif c == "]" and depth:
            depth = 0
        out.append(c)
    return "".join(out)


def with_python_patterns(schema) -> tuple[object, dict[str, str]]:
    """(`schema` with every `pattern` and `patternProperties` name that holds a Unicode property
    escape spelt by python_pattern: what jsonschema is given, the same object when none does;
    each respelt pattern -> the pattern as the schema wrote it, to name it so in messages)."""
    text = json.dumps(schema)
    if "\\\\p{" not in text and "\\\\P{" not in text:
        return schema, {}
    spelt: dict[str, str] = {}

    def respelt(p: str) -> str:
        out = python_pattern(p)
        if out != p:
            spelt[out] = p
        return out

    def walk(node, pointer: str):
        if not isinstance(node, dict):
            return node
        out = with_children(node, pointer, walk)
        if isinstance(out.get("pattern"), str):
            out["pattern"] = respelt(out["pattern"])
        if isinstance(out.get("patternProperties"), dict):
            out["patternProperties"] = {respelt(k): v for k, v in out["patternProperties"].items()}
        return out

    return walk(schema, ""), spelt


def as_written(message: str, spelt: dict[str, str]) -> str:
    """A jsonschema message (which quotes a pattern by its repr) naming each respelt pattern as the
    schema wrote it, not as thousands of code point ranges."""
    for readable, written in spelt.items():
        message = message.replace(repr(readable), repr(written))
    return message
