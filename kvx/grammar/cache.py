"""The grammar disk cache: a compiled program and its byte distances per schema and tokenizer.

$KVX_CACHE/grammar/<schema + options + compiler source hash + the check's reading>-<tokenizer hash>.npz.
Entries are kvx/npz_cache.py files (atomic writes; an unreadable or foreign one is deleted and rebuilt).
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import json
from functools import lru_cache
from pathlib import Path

import numpy as np

from kvx.grammar.automata.pda import Program
from kvx.grammar.schema.refs import DIALECTS
from kvx.grammar.tokens.vocab import TokenVocab
from kvx.npz_cache import read_entry, write_entry
from kvx.paths import cache_root

CACHE_FORMAT = 3  # 2: pushdown programs (rules and call edges) instead of one DFA; 3: tables over byte classes
_ARRAYS = ("table", "final", "rule_of", "rule_start", "call_ptr", "call_rule", "call_ret", "classes")


def cache_dir() -> Path:
    return cache_root() / "grammar"


@lru_cache(maxsize=1)
def _compiler_hash() -> str:
    """Hash of the grammar package sources, so a compiler change never serves a stale program."""
    root = Path(__file__).parent
    h = hashlib.sha256(str(CACHE_FORMAT).encode())
    for src in sorted(root.rglob("*.py")):
        h.update(str(src.relative_to(root)).encode() + src.read_bytes())
    return h.hexdigest()[:16]


@lru_cache(maxsize=1)
def _check_reading() -> dict:
    """What the program also follows of the record check: jsonschema's version and the formats each
    draft's checker asserts (those whose packages are installed: a negated format the check leaves
    unread admits no string, schema/scalars.py), so installing rfc3339-validator rebuilds it; and
    the `regex` package's version, whose Unicode tables give `\\p{..}` its code points."""
    return {"jsonschema": importlib.metadata.version("jsonschema"), "regex": importlib.metadata.version("regex"),
            "formats": {cls.__name__: sorted(cls.FORMAT_CHECKER.checkers) for cls in DIALECTS}}


def cache_path(schema, options: dict, vocab: TokenVocab) -> Path:
    key = json.dumps({"schema": schema, "options": options, "compiler": _compiler_hash(), "check": _check_reading()},
                     sort_keys=True)
    schema_hash = hashlib.sha256(key.encode()).hexdigest()[:24]
    return cache_dir() / f"{schema_hash}-{vocab.hash[:16]}.npz"


def load(path: Path):
    """(program, byte distances, warnings, post_checks), or None (absent, or dropped as unreadable)."""
    return read_entry(path, _entry)


def _entry(data) -> tuple:
    arrays = {k: data[k] for k in _ARRAYS}
    dist = data["dist"].astype(np.int32)
    meta = json.loads(bytes(data["meta"]).decode("utf-8"))
    program = Program(table=arrays["table"].astype(np.int32), final=arrays["final"].astype(bool),
                      rule_of=arrays["rule_of"].astype(np.int32), rule_start=arrays["rule_start"].astype(np.int32),
                      call_ptr=arrays["call_ptr"].astype(np.int64), call_rule=arrays["call_rule"].astype(np.int32),
                      call_ret=arrays["call_ret"].astype(np.int32), classes=arrays["classes"].astype(np.int64))
    _validate(program, dist)
    return program, dist, meta["warnings"], meta["post_checks"]


def _validate(p: Program, dist: np.ndarray) -> None:
    n = p.num_states
    if p.table.ndim != 2 or p.final.shape != (n,) or dist.shape != (n,) or p.classes.shape != (256,):
        raise ValueError("shape mismatch")
    if p.classes.min() < 0 or p.classes.max() >= p.table.shape[1]:
        raise ValueError("class out of range")
    if p.table.max() >= n or p.table.min() < -1 or p.call_ptr.shape != (n + 1,):
        raise ValueError("state out of range")
    if not 0 <= p.start < n or (len(p.call_ret) and (p.call_ret.max() >= n or p.call_rule.max() >= p.num_rules)):
        raise ValueError("edge out of range")


def store(path: Path, program: Program, dist: np.ndarray, warnings: list[str], post_checks: list[str]) -> None:
    meta = json.dumps({"warnings": warnings, "post_checks": post_checks}).encode("utf-8")
    arrays = {k: getattr(program, k) for k in _ARRAYS}
    if program.num_states < 32767:
        arrays["table"] = arrays["table"].astype(np.int16)
    write_entry(path, dist=dist, meta=np.frombuffer(meta, dtype=np.uint8), **arrays)
