"""Entry of the schema compiler: JSON Schema -> pushdown automaton (rules of byte DFAs), or a
one-line UnsupportedSchema naming the keyword and JSON pointer, within the compile deadline."""
from __future__ import annotations

import gc
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import get_args

import jsonschema
from jsonschema.validators import validator_for

from kvx.grammar.automata import deadline as deadlines
from kvx.grammar.automata.pda import Program
from kvx.grammar.automata.small_pages import small_pages
from kvx.grammar.errors import TooLarge, UnsupportedSchema, too_large
from kvx.grammar.options import ExtraKeys, GrammarOptions, Whitespace
from kvx.grammar.schema.dynamic_refs import with_static_refs
from kvx.grammar.schema.meta_schemas import with_meta_schemas
from kvx.grammar.schema.refs import dialect_of, names_a_draft
from kvx.grammar.schema.rules import RuleBuilder

WHITESPACE_MODES: tuple[Whitespace, ...] = get_args(Whitespace)
EXTRA_KEYS_MODES: tuple[ExtraKeys, ...] = get_args(ExtraKeys)


@dataclass
class CompiledSchema:
    program: Program
    warnings: list[str] = field(default_factory=list)  # lenient-mode and ignored-keyword notes
    post_checks: list[str] = field(default_factory=list)  # JSON pointers left to jsonschema after generation
    states: int = 0
    build_seconds: float = 0.0


def _check_root(schema) -> str | None:
    """Refuses what cannot be a schema and draft 3; returns a note for a $schema jsonschema does not
    know, a draft's meta-schema spelt another way (`http://` for 2019-09) or a custom one: read as
    2020-12, as the record check reads it (a custom meta-schema's own vocabulary, which may add
    keywords or switch some off, is not read: the grammar then holds records to 2020-12's keywords,
    as the check does)."""
    if not isinstance(schema, (dict, bool)):
        raise UnsupportedSchema("invalid schema: the schema must be a JSON object or boolean", None, "")
    uri = schema.get("$schema") if isinstance(schema, dict) else None
    if not isinstance(uri, str):
        return None
    cls = validator_for(schema, default=None)
    if cls is jsonschema.Draft3Validator:
        raise UnsupportedSchema("unsupported keyword '$schema' at / (draft 3)", "$schema", "")
    if cls is None:
        if not names_a_draft(uri):
            return (f"$schema {uri!r} is a custom meta-schema: read as draft 2020-12, as the record check "
                    f"(jsonschema) reads it; keywords of its own, or of an older draft (dependencies), are not enforced")
        return (f"$schema {uri!r} is a draft's meta-schema spelt in a way jsonschema does not know: read as "
                f"draft 2020-12, as the record check reads it")
    return None


def compile_program(schema, options: GrammarOptions = GrammarOptions(), *,
                    deadline: deadlines.Deadline | None = None) -> CompiledSchema:
    """Compile `schema` to rules over the UTF-8 bytes of the JSON text the grammar allows.

    Raises UnsupportedSchema (one line, naming keyword and JSON pointer) for invalid schemas,
    keywords the automaton cannot enforce (unless `options.lenient`), automata over
    `options.max_states` states per rule, and compiles that run past `deadline` (default: the
    caller's active one, else options.compile_deadline seconds from now)."""
    _check_mode("whitespace", options.whitespace, WHITESPACE_MODES)
    _check_mode("extra_keys", options.extra_keys, EXTRA_KEYS_MODES)
    if options.max_ws < 0:
        raise UnsupportedSchema("max_ws must be >= 0")
    if not options.compile_deadline > 0:
        raise UnsupportedSchema("compile_deadline must be > 0 seconds")
    t0 = time.perf_counter()
    with compile_scope(options, deadline):
        return _compile(schema, options, t0)


def _check_mode(name: str, value: str, modes: tuple[str, ...]) -> None:
    if value not in modes:
        raise UnsupportedSchema(f"{name} must be one of {', '.join(modes)}, not {value!r}")


@contextmanager
def compile_scope(options: GrammarOptions, deadline: deadlines.Deadline | None = None):
    """What a compile runs under: the collector paused, ordinary memory pages, and its deadline
    (`deadline`, else the caller's active one, else options.compile_deadline seconds from now)."""
    with paused_gc(), small_pages(), deadlines.within(deadline or deadlines.active()
                                                      or deadlines.Deadline(options.compile_deadline)):
        yield


@contextmanager
def paused_gc():
    """The build allocates many short-lived containers: collections would rescan them all. A
    refusal leaves with its traceback dropped, so the build it held is freed while the collector is
    still off (else the first collection after it scans all of it)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    except UnsupportedSchema as err:
        raise err.with_traceback(None) from None
    finally:
        if was_enabled:
            gc.enable()


def _compile(schema, options: GrammarOptions, t0: float) -> CompiledSchema:
    note = _check_root(schema)
    dialect = dialect_of(schema)
    try:  # the passes before the walk read the whole document too (2 MB: 0.4 s), under the deadline
        builder = RuleBuilder(with_static_refs(with_meta_schemas(schema, dialect), dialect), options)
        if note is not None:
            builder.notes.warn_once("/$schema", note)
        program = builder.program()
    except TooLarge as err:
        raise too_large("/", err, pointer="") from None
    if program is None:
        raise UnsupportedSchema("schema admits no JSON value at /", None, "")
    builder.notes.warnings += builder.notes.declared_notes()  # read once the whole walk is done
    return CompiledSchema(program=program, warnings=builder.notes.warnings, post_checks=builder.notes.post_checks,
                          states=program.num_states, build_seconds=time.perf_counter() - t0)
