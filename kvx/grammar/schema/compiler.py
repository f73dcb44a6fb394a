"""Public entry of the schema compiler: JSON Schema -> trimmed, minimised byte-level DFA."""
from __future__ import annotations

import gc
import time
from dataclasses import dataclass, field

import jsonschema

from kvx.grammar.automata.compose import fast_compile
from kvx.grammar.automata.dfa import DFA
from kvx.grammar.errors import UnsupportedSchema
from kvx.grammar.errors import TooLarge
from kvx.grammar.schema.rules import Options, SchemaToRegex

WHITESPACE_MODES = ("compact", "flexible")


@dataclass
class CompiledSchema:
    dfa: DFA
    warnings: list[str] = field(default_factory=list)  # lenient-mode and ignored-keyword notes
    post_checks: list[str] = field(default_factory=list)  # JSON pointers left to jsonschema after generation
    states: int = 0
    build_seconds: float = 0.0


def _check_valid(schema) -> None:
    if not isinstance(schema, (dict, bool)):
        raise UnsupportedSchema("invalid schema: the schema must be a JSON object or boolean", None, "")
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.exceptions.SchemaError as err:
        ptr = "".join(f"/{p}" for p in err.absolute_path)
        first = str(err.message).splitlines()[0][:200]
        raise UnsupportedSchema(f"invalid schema: {first} at {ptr or '/'}", None, ptr) from None


def compile_dfa(schema: dict, *, whitespace: str = "compact", max_ws: int = 2, max_depth: int = 4,
                lenient: bool = False, max_states: int = 50_000) -> CompiledSchema:
    """Compile `schema` to a DFA over the UTF-8 bytes of the JSON text the grammar allows.

    Raises UnsupportedSchema (one line, naming keyword and JSON pointer) for invalid schemas,
    keywords the automaton cannot enforce (unless `lenient`) and automata over `max_states`."""
    if whitespace not in WHITESPACE_MODES:
        raise UnsupportedSchema(f"whitespace must be one of {', '.join(WHITESPACE_MODES)}, not {whitespace!r}")
    if max_depth < 1 or max_ws < 0:
        raise UnsupportedSchema("max_depth must be >= 1 and max_ws >= 0")
    t0 = time.perf_counter()
    gc_was_enabled = gc.isenabled()
    gc.disable()  # the build allocates many short-lived containers: collections would rescan them all
    try:
        return _compile(schema, whitespace, max_ws, max_depth, lenient, max_states, t0)
    finally:
        if gc_was_enabled:
            gc.enable()


def _compile(schema, whitespace, max_ws, max_depth, lenient, max_states, t0) -> CompiledSchema:
    _check_valid(schema)
    builder = SchemaToRegex(schema, Options(whitespace, max_ws, max_depth, lenient, max_states))
    node = builder.document()
    try:
        dfa = fast_compile(node, max_states)
    except TooLarge:
        raise UnsupportedSchema("schema too large for the automaton at /", None, "") from None
    if dfa is None:
        raise UnsupportedSchema(f"schema admits no JSON value (within max_depth={max_depth}) at /", None, "")
    return CompiledSchema(dfa=dfa, warnings=builder.warnings, post_checks=builder.post_checks,
                          states=dfa.num_states, build_seconds=time.perf_counter() - t0)
