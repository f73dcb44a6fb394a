"""The grammar's options, declared once: the compiler, the job and the CLI read them from here.

A light module (no torch, no numpy): the CLI takes its defaults from it without loading the grammar.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

Whitespace = Literal["compact", "flexible"]  # JSON layout the grammar allows (the CLI's --whitespace)
# Keys of an object that declares its own (properties / patternProperties) and says nothing of others
# (no additionalProperties / unevaluatedProperties): "declared" generates only the declared ones (a
# record needs no others, and a small model fills the room with invented keys); "schema" follows
# JSON Schema's default, any other key with any value (what the coverage benchmark measures).
# Likewise for a schema that names no `type`: "declared" writes the types its keywords describe
# (schema/keywords.py KEYWORD_TYPES), "schema" any value.
ExtraKeys = Literal["declared", "schema"]
# Numbers the grammar writes: "json" every one the schema allows; "parquet" only those a Parquet
# column holds exactly, within the schema's own bounds: integers in int64, and a `number` written as
# an integer within +-2^53 (float64; with a fraction or exponent it reads back as a float anyway).
# kvx extract's choice for a .parquet output, where a record past that could only be retried. Where
# no value of a slot is left that way, the schema's language stands (and the writer names the value).
Numbers = Literal["json", "parquet"]


@dataclass(frozen=True)
class GrammarOptions:
    whitespace: Whitespace = "compact"
    max_ws: int = 2  # "flexible": whitespace bytes at most between two tokens of the JSON text
    lenient: bool = False  # keywords the automaton cannot enforce are left to jsonschema (not refused)
    max_states: int = 50_000  # per rule
    extra_keys: ExtraKeys = "declared"
    numbers: Numbers = "json"
    # CPU seconds of compile work before a schema is refused as too large: 0.55 s ends every compile
    # within 1 s, the freeing of an abandoned build included (--compile-deadline raises it for a
    # schema that needs longer; the compiled grammar is the same whatever the deadline)
    compile_deadline: float = 0.55

    def program_key(self) -> dict:
        """The options the compiled program depends on (the grammar cache's key): all but the deadline,
        which only decides whether it gets built."""
        key = dataclasses.asdict(self)
        del key["compile_deadline"]
        return key
