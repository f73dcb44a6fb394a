"""JSON values as the grammar writes them: equality as JSON Schema defines it, compact text."""
from __future__ import annotations

import json


def json_equal(a, b) -> bool:
    """JSON value equality as JSON Schema defines it (1 == 1.0, true != 1)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def integral_ints(value):
    """Integral floats as ints: enum/const numbers are written 2, not 2.0."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: integral_ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [integral_ints(v) for v in value]
    return value


def dumps(value, sort_keys: bool = False) -> str:
    return json.dumps(integral_ints(value), ensure_ascii=False, separators=(",", ":"), allow_nan=False,
                      sort_keys=sort_keys)


def canonical(value) -> str:
    """One text per JSON value as json_equal compares them (1 and 1.0 alike, key order aside)."""
    return dumps(value, sort_keys=True)
