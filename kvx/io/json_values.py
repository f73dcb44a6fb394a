"""Checks on parsed JSON input that Python's json module lets through but later steps cannot take.

A JSON text may spell a lone UTF-16 surrogate (`"\\ud800"`): json.loads accepts it, but no tokenizer
can encode it and no UTF-8 writer can store it. Deep nesting passes json.loads below the recursion
limit and then breaks whatever recurses next. A model's number may overflow a float (a looping
`99999...9.5`, or `1e999`: json.loads gives inf, which no JSON writer can store). All are found
here, iteratively, so the record becomes an error row instead of a crash or a bad line later on.
"""
from __future__ import annotations

import json
import math
import re
from typing import Any

MAX_DEPTH = 200  # nesting levels of objects/arrays kvx accepts in an input record
SHOWN_POINTER = 60  # characters of a JSON pointer a message shows
_SURROGATE = re.compile("[\ud800-\udfff]")


def surrogate_at(text: str) -> int:
    """Index of the first lone surrogate in `text`, or -1."""
    m = _SURROGATE.search(text)
    return -1 if m is None else m.start()


def escape_surrogates(text: str) -> str:
    """Lone surrogates spelled as the JSON escape they came from (`\\ud800`), so the text can be stored."""
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def value_problem(value: Any, max_depth: int = MAX_DEPTH, finite: bool = False) -> str | None:
    """Why a parsed JSON value cannot be used (one line), or None. Walks without recursion.
    `finite`: a number json.loads made infinite is a problem too (a record kvx writes; an input's
    fields are only read, NaN and all)."""
    stack: list[tuple[Any, str, int]] = [(value, "", 0)]
    while stack:
        node, pointer, depth = stack.pop()
        if finite and isinstance(node, float) and not math.isfinite(node):
            return f"the number at {_short(pointer)} is beyond the range of a 64-bit float"
        if isinstance(node, str):
            at = surrogate_at(node)
            if at >= 0:
                return (f"lone surrogate \\u{ord(node[at]):04x} at character {at + 1} of {_short(pointer)} "
                        f"(not valid Unicode; the text was probably cut inside an emoji)")
            continue
        if not isinstance(node, (dict, list)):
            continue
        if depth >= max_depth:
            return f"nested more than {max_depth} levels deep at {_short(pointer)}"
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, child in items:
            name = escape_surrogates(str(key)).replace("~", "~0").replace("/", "~1")
            if isinstance(key, str) and surrogate_at(key) >= 0:
                return f"lone surrogate in the key {_short(pointer + '/' + name)} (not valid Unicode)"
            stack.append((child, f"{pointer}/{name}", depth + 1))
    return None


def _short(pointer: str) -> str:
    if not pointer:
        return "/"
    return pointer if len(pointer) <= SHOWN_POINTER else pointer[:SHOWN_POINTER] + "..."


def decode_problem(error: json.JSONDecodeError) -> str:
    """`not valid JSON (Expecting ',' delimiter at column 12)`; json's own messages end in 'at' for some."""
    msg = error.msg.removesuffix(" at")
    return f"not valid JSON ({msg} at column {error.colno})"
