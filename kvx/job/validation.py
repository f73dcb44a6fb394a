"""Loading the user's schema and checking every generated record against it with `jsonschema`."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

import jsonschema
import referencing.exceptions
from jsonschema import Draft202012Validator
from jsonschema.validators import validator_for

from kvx.errors import ConfigError, one_line
from kvx.grammar.schema.refs import dialect_of, own_dialect, with_children
from kvx.grammar.schema.unicode_properties import as_written, with_python_patterns
from kvx.job.schema_files import bundle_files
from kvx.io.json_values import decode_problem, value_problem

SNIPPET = 120  # characters of a bad output quoted in its row's error message
MAX_SCHEMA_DEPTH = 128  # JSON nesting levels; jsonschema and the grammar recurse per level
RECURSES = "schema: the check recurses without end on this value (a $ref cycle that applies to the same value)"


def load_schema(path: str, schema_dirs: Sequence[str] = ()) -> dict:
    """The schema at `path`, its local $refs (and, from `schema_dirs`, its http(s) ones) bundled in;
    ConfigError (one line) for anything unusable."""
    p = Path(path)
    try:
        schema = json.loads(p.read_text("utf-8-sig"))  # -sig: a byte order mark is not part of the JSON
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such schema file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot read the schema ({e})") from None
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}: not valid JSON ({e.msg.removesuffix(' at')} at line {e.lineno} column {e.colno})") from None
    except (RecursionError, ValueError) as e:
        raise ConfigError(f"{path}: not a usable schema ({'nested too deeply' if isinstance(e, RecursionError) else e})") from None
    if not isinstance(schema, dict):
        raise ConfigError(f"{path}: a JSON Schema must be an object")
    schema = bundle_files(schema, p, tuple(Path(d) for d in schema_dirs))  # $refs to other files: embedded
    problem = value_problem(schema, MAX_SCHEMA_DEPTH)
    if problem:
        raise ConfigError(f"{path}: not a usable schema ({problem})")
    readable, spelt = with_python_patterns(schema)
    for where, part in _parts_by_draft(readable):
        try:
            validator_for(part, default=Draft202012Validator).check_schema(part)
        except jsonschema.SchemaError as e:
            raise ConfigError(f"{path}: not a valid JSON Schema ({as_written(e.message, spelt)} at "
                              f"{where}{_pointer(e.absolute_path)})") from None
    if _recurses_forever(schema):
        raise ConfigError(f"{path}: not a usable schema (the record check recurses without end on it: "
                          "a $ref cycle that applies to the same value)")
    return schema


def _parts_by_draft(schema: dict) -> list[tuple[str, dict]]:
    """(pointer, part) to check against each part's own draft's meta-schema: a subschema naming a
    $schema of another draft than the schema around it (a bundled file in another draft) is read in
    that draft by the record check, but check_schema reads the whole document by the root's; each
    part has the parts inside it cut out (as `{}`)."""
    if json.dumps(schema).count('"$schema"') < 2:
        return [("", schema)]  # one draft throughout
    parts: list[tuple[str, dict]] = []

    def cut(node: dict, pointer: str, dialect: str) -> dict:
        def child(sub, ptr: str):
            if not isinstance(sub, dict):
                return sub
            own = own_dialect(sub, dialect)
            if own == dialect:
                return cut(sub, ptr, dialect)
            parts.append((ptr, cut(sub, ptr, own)))
            return {}
        return with_children(node, pointer, child)

    parts.insert(0, ("", cut(schema, "", dialect_of(schema))))
    return parts


def _recurses_forever(schema: dict) -> bool:
    """A cycle the check walks on every value (`not: {if: {not: {$ref: "#"}}}`, which the grammar may
    well compile: an `if` alone changes nothing) would fail every row: stop before any work instead."""
    checker = RecordChecker(schema)
    return any(checker.problem(probe) == RECURSES for probe in (None, {}, [], "", 0))


def _pointer(path) -> str:
    return "/" + "/".join(str(p) for p in path)


class RecordChecker:
    def __init__(self, schema: dict):
        cls = validator_for(schema, default=Draft202012Validator)  # the dialect its $schema names
        # patterns with a Unicode property escape, which Python's re cannot read, as classes it can
        readable, self._spelt = with_python_patterns(schema)
        self.validator = cls(readable, format_checker=cls.FORMAT_CHECKER)

    def problem(self, value: Any) -> str | None:
        """None if `value` matches the schema, else a one-line reason naming the JSON pointer."""
        try:
            error = jsonschema.exceptions.best_match(self.validator.iter_errors(value))
        except referencing.exceptions.Unresolvable as e:  # a value reached a $ref the schema cannot resolve
            return f"schema: cannot resolve the $ref {e.ref!r}"
        except RecursionError:  # a $ref cycle this value walks without end (`then: {$ref: "#"}` under an if it meets)
            return RECURSES
        except OverflowError as e:  # jsonschema's float arithmetic: a 400-digit integer against `multipleOf: 0.5`
            return f"schema: a number the check cannot compute with ({e})"
        if error is None:
            return None
        return f"schema: {as_written(error.message, self._spelt)} at {_pointer(error.absolute_path)}"

    def check(self, text: str, finish_reason: str) -> tuple[Any, str | None]:
        """(record, None) for a valid output, else (None, reason)."""
        try:
            value = json.loads(text)
        except json.JSONDecodeError as e:
            if finish_reason == "length":
                return None, f"output hit --max-tokens before the JSON was complete; output: {_snippet(text)}"
            return None, f"{decode_problem(e)}; output: {_snippet(text)}"
        except RecursionError:
            return None, f"not usable JSON (nested too deeply); output: {_snippet(text)}"
        except ValueError as e:  # an integer of more than 4,300 digits (a model repeating a digit)
            return None, f"not usable JSON ({one_line(e, 120)}); output: {_snippet(text)}"
        problem = value_problem(value, finite=True)  # "\ud83d" alone: no UTF-8 output holds it; 1e999: no JSON
        problem = f"not usable JSON: {problem}" if problem else self.problem(value)
        if problem:
            return None, f"{problem}; output: {_snippet(text)}"
        return value, None


def _snippet(text: str) -> str:
    cut = text if len(text) <= SNIPPET else text[:SNIPPET] + "..."
    return json.dumps(cut, ensure_ascii=False)  # quoted and escaped: stays on one line
