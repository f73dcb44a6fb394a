"""Ground truth for an instance: `jsonschema` under the schema's own draft (its `$schema`, 2020-12
when absent or unknown), asserting formats the way kvx's post-check does, never fetching a remote
`$ref` (an instance whose validation needs one gets no label)."""
from __future__ import annotations

import re
import warnings
from functools import lru_cache

import jsonschema
import referencing
import referencing.exceptions
from jsonschema.validators import validator_for

from kvx.grammar.schema.unicode_properties import with_python_patterns


class Unlabelled(Exception):
    """jsonschema could not decide (an unresolvable $ref, a pattern Python cannot compile, ...)."""


def _validator_class(schema):
    with warnings.catch_warnings():  # an unknown $schema: jsonschema warns and uses the default
        warnings.simplefilter("ignore")
        return validator_for(schema, default=jsonschema.Draft202012Validator)


def validator(schema):
    cls = _validator_class(schema)
    # an empty registry: remote refs fail instead of being downloaded; patterns with a Unicode
    # property escape read as kvx's check reads them (Python's re cannot: no label before)
    return cls(with_python_patterns(schema)[0], format_checker=cls.FORMAT_CHECKER, registry=referencing.Registry())


def schema_problem(schema) -> str | None:
    """Why `schema` is not a valid schema under its own draft, or None."""
    if not isinstance(schema, (dict, bool)):
        return "not an object or boolean"
    cls = _validator_class(schema)
    try:  # its patterns read as kvx's check reads them: Python's re reads no Unicode property escape
        cls.check_schema(with_python_patterns(schema)[0])
    except jsonschema.SchemaError as err:
        return f"invalid under {cls.__name__}: {err.message[:120]}"
    except Exception as err:  # e.g. a pattern jsonschema's checker chokes on
        return f"cannot check: {type(err).__name__}"
    return None


def is_valid(checker, instance) -> bool:
    """`checker` from validator(); raises Unlabelled when jsonschema cannot decide."""
    try:
        return checker.is_valid(instance)
    except (referencing.exceptions.Unresolvable, jsonschema.exceptions.UnknownType,
            re.error, RecursionError, ValueError, TypeError, KeyError, AttributeError, IndexError) as err:
        raise Unlabelled(f"{type(err).__name__}: {str(err)[:100]}") from None


@lru_cache(maxsize=1)
def draft_name_table() -> dict:
    return {_norm(cls.META_SCHEMA["$schema"]): name for name, cls in (
        ("draft3", jsonschema.Draft3Validator), ("draft4", jsonschema.Draft4Validator),
        ("draft6", jsonschema.Draft6Validator), ("draft7", jsonschema.Draft7Validator),
        ("2019-09", jsonschema.Draft201909Validator), ("2020-12", jsonschema.Draft202012Validator))}


def draft_of(schema) -> str:
    """The draft jsonschema applies: a short name, or 'default 2020-12' when `$schema` is absent/unknown."""
    uri = schema.get("$schema") if isinstance(schema, dict) else None
    if not isinstance(uri, str):
        return "default 2020-12"
    return draft_name_table().get(_norm(uri), "default 2020-12")


def _norm(uri: str) -> str:
    return uri.rstrip("#").replace("https://", "http://")
