"""Parsing option values the user types (sizes like 2GiB, choices) into typed settings, and the
one translation of an option's field name (kv_dtype) into its flag (--kv-dtype)."""
from __future__ import annotations

import re
from typing import Any, get_args

from kvx.errors import ConfigError, KvxError

UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9,
         "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40, "t": 10**12, "tb": 10**12}
SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def parse_size(text: str | None, option: str) -> int | None:
    """'2GiB' -> 2147483648; '512MB' -> 512000000; a bare number is bytes."""
    if text is None:
        return None
    m = SIZE.match(text)
    unit = m.group(2).lower() if m else None
    if not m or unit not in UNITS:
        raise ConfigError(f"{option} {text!r}: not a size (examples: 2GiB, 512MiB, 1000000000)")
    value = int(float(m.group(1)) * UNITS[unit])
    if value <= 0:
        raise ConfigError(f"{option} {text!r}: must be more than 0 bytes")
    return value


FLAGS = {"speculative_tokens": "--speculate"}  # fields whose flag is not their own name


def flag(field: str) -> str:
    """The command-line flag of an option field: kv_dtype -> --kv-dtype."""
    return FLAGS.get(field, "--" + field.replace("_", "-"))


def user_message(err: KvxError) -> str:
    """The error's one line as the command line shows it: an option named by its flag."""
    return err.naming(flag(err.option)) if err.option else str(err)


def check_choice(value: str, choices: Any, field: str) -> str:
    """`value` if it is one of the Literal alias `choices` (declared where the option is owned)."""
    allowed = get_args(choices)
    if value not in allowed:
        raise ConfigError(f"{flag(field)} {value!r}: choose one of {', '.join(allowed)}")
    return value


def check_seconds(value: float, field: str) -> float:
    if not 0 < value < float("inf"):  # NaN fails too
        raise ConfigError(f"{flag(field)} {value}: must be a number of seconds above 0")
    return value


def check_positive(value: int, field: str, minimum: int = 1) -> int:
    if value < minimum:
        raise ConfigError(f"{flag(field)} {value}: must be at least {minimum}")
    return value
