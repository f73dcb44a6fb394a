"""compile_schema: JSON Schema + tokenizer -> Grammar (DFA, token FSM, length-budget distances).

The compiled DFA and its distances are cached on disk under $KVX_CACHE/grammar (default
~/.cache/kvx/grammar), keyed by the schema + options + compiler source hash and the tokenizer hash.
Writes are atomic (temp file + rename); an unreadable entry is deleted and rebuilt.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from kvx.grammar.tokens.budget import token_prefixes
from kvx.grammar.automata.dfa import DFA
from kvx.grammar.tokens.matcher import Matcher
from kvx.grammar.tokens.token_fsm import TokenFSM, token_matrix
from kvx.grammar.tokens.vocab import TokenVocab, vocab_for
from kvx.paths import cache_root

CACHE_FORMAT = 1


@dataclass
class CompileStats:
    dfa_states: int = 0
    compile_ms: float = 0.0  # DFA (or cache load) + distances: the per-schema cost
    tokenizer_prep_ms: float = 0.0  # vocab bytes + token matrix, once per tokenizer per process
    from_cache: bool = False


@dataclass
class Grammar:
    dfa: DFA
    vocab: TokenVocab
    fsm: TokenFSM
    warnings: list[str] = field(default_factory=list)
    post_checks: list[str] = field(default_factory=list)  # keywords left to the jsonschema check
    stats: CompileStats = field(default_factory=CompileStats)

    @classmethod
    def from_dfa(cls, dfa: DFA, tokenizer, **kw) -> "Grammar":
        vocab = tokenizer if isinstance(tokenizer, TokenVocab) else vocab_for(tokenizer)
        return cls(dfa=dfa, vocab=vocab, fsm=TokenFSM(dfa, vocab), **kw)

    @property
    def vocab_size(self) -> int:
        return self.vocab.vocab_size

    def matcher(self, max_tokens: int | None = None) -> Matcher:
        return Matcher(self.fsm, max_tokens)

    def accepts_text(self, text: str) -> bool:
        return self.dfa.accepts(text.encode("utf-8"))

    def first_visit_ms(self) -> list[float]:
        return [t * 1e3 for t in self.fsm.first_visit_s]


@lru_cache(maxsize=1)
def _warm_compiler() -> None:
    """Once per process: imports (jsonschema) and the schema-independent one-character automaton."""
    from kvx.grammar.schema import formats, regex_parse  # noqa: F401
    from kvx.grammar.schema.compiler import compile_dfa  # noqa: F401


def compile_schema(
    schema: dict,
    tokenizer,
    *,
    whitespace: str = "compact",
    max_depth: int = 4,
    lenient: bool = False,
    max_ws: int = 2,
    cache: bool = True,
) -> Grammar:
    """Compile `schema` for `tokenizer` (a kvx Tokenizer or a HF tokenizer); raises UnsupportedSchema."""
    t0 = time.perf_counter()
    vocab = vocab_for(tokenizer)
    token_matrix(vocab)
    vocab.single_byte_tokens(), vocab.longest
    token_prefixes(vocab)  # per-tokenizer tables, cached in memory by vocab hash
    _warm_compiler()

    prep_ms = (time.perf_counter() - t0) * 1e3
    t1 = time.perf_counter()
    options = {"whitespace": whitespace, "max_ws": max_ws, "max_depth": max_depth, "lenient": lenient}
    path = _cache_path(schema, options, vocab) if cache else None
    loaded = _load(path) if path is not None else None
    if loaded is None:
        from kvx.grammar.schema.compiler import compile_dfa

        compiled = compile_dfa(schema, whitespace=whitespace, max_ws=max_ws, max_depth=max_depth, lenient=lenient)
        fsm = TokenFSM(compiled.dfa, vocab)
        warnings, post_checks = list(compiled.warnings), list(compiled.post_checks)
        if path is not None:
            _store(path, compiled.dfa, fsm.byte_dist, warnings, post_checks)
    else:
        dfa, dist, warnings, post_checks = loaded
        fsm = TokenFSM(dfa, vocab, byte_dist=dist)
    stats = CompileStats(
        dfa_states=fsm.dfa.num_states,
        compile_ms=(time.perf_counter() - t1) * 1e3,
        tokenizer_prep_ms=prep_ms,
        from_cache=loaded is not None,
    )
    return Grammar(fsm.dfa, vocab, fsm, warnings, post_checks, stats)


def cache_dir() -> Path:
    return cache_root() / "grammar"


@lru_cache(maxsize=1)
def _compiler_hash() -> str:
    """Hash of the grammar package sources, so a compiler change never serves a stale DFA."""
    h = hashlib.sha256(str(CACHE_FORMAT).encode())
    for src in sorted(Path(__file__).parent.rglob("*.py")):
        h.update(str(src.relative_to(Path(__file__).parent)).encode() + src.read_bytes())
    return h.hexdigest()[:16]


def _cache_path(schema: dict, options: dict, vocab: TokenVocab) -> Path:
    key = json.dumps({"schema": schema, "options": options, "compiler": _compiler_hash()}, sort_keys=True)
    schema_hash = hashlib.sha256(key.encode()).hexdigest()[:24]
    return cache_dir() / f"{schema_hash}-{vocab.hash[:16]}.npz"


def _load(path: Path):
    if not path.exists():
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            trans, accepting = data["trans"].astype(np.int32), data["accepting"].astype(bool)
            dist, start = data["dist"].astype(np.int32), int(data["start"])
            meta = json.loads(bytes(data["meta"]).decode("utf-8"))
        num = trans.shape[0]
        if trans.ndim != 2 or trans.shape[1] != 256 or accepting.shape != (num,) or dist.shape != (num,):
            raise ValueError("shape mismatch")
        if not 0 <= start < num or trans.max() >= num or trans.min() < -1:
            raise ValueError("state out of range")
        return DFA(trans=trans, accepting=accepting, start=start), dist, meta["warnings"], meta["post_checks"]
    except Exception:  # corrupt or foreign entry: drop it and rebuild
        path.unlink(missing_ok=True)
        return None


def _store(path: Path, dfa: DFA, dist: np.ndarray, warnings: list[str], post_checks: list[str]) -> None:
    meta = json.dumps({"warnings": warnings, "post_checks": post_checks}).encode("utf-8")
    trans = dfa.trans.astype(np.int16) if dfa.num_states < 32767 else dfa.trans
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            np.savez(f, trans=trans, accepting=dfa.accepting, dist=dist, start=np.int64(dfa.start),
                     meta=np.frombuffer(meta, dtype=np.uint8))
        os.replace(tmp, path)
    except OSError:  # a read-only or full cache only costs speed
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
