"""Invalid-instance candidates: small edits of a valid instance at a random place (jsonschema
decides afterwards which ones are really invalid)."""
from __future__ import annotations

import copy
import random

# a value of another JSON type, per type of the value it replaces
OTHER_TYPE = {dict: ["x", 1, None, []], list: [{}, "x", 0], str: [7, None, True, ["x"]],
              bool: ["true", 0, None], int: ["1", 1.5, None, True], float: ["1.5", 7, None], type(None): [0, "", False]}
BAD_STRINGS = ["", "not-a-date", "x" * 300, "UPPER case", "1.2.3", "http//bad uri", "-"]
KINDS = ("retype", "drop_key", "add_key", "bad_string", "bad_number", "grow_array", "shrink_array", "other_enum")


def places(value, path=()):
    """Every (path, value) in the document, the root included."""
    yield path, value
    if isinstance(value, dict):
        for k, v in value.items():
            yield from places(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from places(v, path + (i,))


def _set(doc, path, new):
    if not path:
        return new
    parent = doc
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = new
    return doc


def mutate(value, kind: str, rng: random.Random):
    """A copy of `value` with one `kind` edit, or None when the kind has no place to apply."""
    doc = copy.deepcopy(value)
    spots = list(places(doc))
    rng.shuffle(spots)
    spots.sort(key=lambda spot: -len(spot[0]) + 1.5 * rng.random())  # deep places first, mostly
    for path, here in spots:
        new = _edit(here, kind, rng)
        if new is not _NONE:
            return _set(doc, path, new)
    return None


_NONE = object()


def _edit(here, kind, rng):
    if kind == "retype":
        return rng.choice(OTHER_TYPE[type(here)])
    if kind == "drop_key" and isinstance(here, dict) and here:
        out = dict(here)
        del out[rng.choice(list(out))]
        return out
    if kind == "add_key" and isinstance(here, dict):
        return {**here, "zz_unexpected": 1}
    if kind == "bad_string" and isinstance(here, str):
        return rng.choice(BAD_STRINGS)
    if kind == "bad_number" and isinstance(here, (int, float)) and not isinstance(here, bool):
        return rng.choice([here + 10**6, here - 10**6, here + 0.5, -1, 0])
    if kind == "grow_array" and isinstance(here, list):
        return here + (here[-1:] * 40 if here else [None])
    if kind == "shrink_array" and isinstance(here, list) and here:
        return here[:-1]
    if kind == "other_enum" and isinstance(here, str):
        return here + "_other"
    return _NONE
