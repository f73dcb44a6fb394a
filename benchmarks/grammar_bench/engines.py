"""The grammar engines compared, each behind one small interface: compile a schema for the
tokenizer (or refuse with a message) and say whether a token sequence is a complete document.

kvx: compile_schema (no disk cache, extra_keys="schema": JSON Schema's own additionalProperties
default, as for xgrammar below) + Matcher walk, and the jsonschema post-check kvx runs on every
record (kvx.job.validation). llguidance: LLMatcher.grammar_from_json_schema, compact separators,
no whitespace, its defaults otherwise. xgrammar: GrammarCompiler.compile_json_schema, compact
separators, no whitespace, strict_mode=False (JSON Schema's own additionalProperties default)."""
from __future__ import annotations

import importlib.metadata
import json
from typing import Protocol


class Refused(Exception):
    def __init__(self, message: str, crash: bool = False):
        super().__init__(message)
        self.crash = crash  # not the engine's own refusal type (kvx: not UnsupportedSchema)


class Compiled(Protocol):
    def accepts(self, ids: list[int]) -> bool: ...

    def post_check(self, value) -> bool | None:
        """kvx: would the record pass kvx's jsonschema check; peers: None (they have none)."""


class Engine(Protocol):
    name: str

    def compile(self, schema_text: str) -> Compiled: ...


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return (text[0] if text else type(err).__name__)[:300]


class KvxCompiled:
    def __init__(self, grammar, schema):
        self.grammar, self.schema, self._checker = grammar, schema, None

    def accepts(self, ids):
        m = self.grammar.matcher()
        for tid in ids:
            if not m.is_allowed(tid):
                return False
            m.advance(tid)
        return m.is_accepting()

    def post_check(self, value):
        from kvx.job.validation import RecordChecker

        try:
            if self._checker is None:  # built on first use: not part of the compile time
                self._checker = RecordChecker(self.schema)
            return self._checker.problem(value) is None
        except Exception:  # a check that crashes does not pass the record
            return False


class KvxEngine:
    name = "kvx"

    def __init__(self, tokenizer):
        from kvx.grammar import GrammarOptions, compile_schema

        self.tokenizer, self._compile = tokenizer, compile_schema
        self._options = GrammarOptions(extra_keys="schema")
        self._compile({"type": "integer"}, tokenizer, cache=False)  # per-tokenizer tables, once

    def compile(self, schema_text):
        from kvx.grammar import UnsupportedSchema

        schema = json.loads(schema_text)
        try:
            grammar = self._compile(schema, self.tokenizer, self._options, cache=False)
        except UnsupportedSchema as err:
            raise Refused(_first_line(err)) from None
        except RecursionError as err:
            raise Refused(f"RecursionError: {_first_line(err)}", crash=True) from None
        except Exception as err:
            raise Refused(f"{type(err).__name__}: {_first_line(err)}", crash=True) from None
        return KvxCompiled(grammar, schema)


class LlgCompiled:
    def __init__(self, matcher):
        self.matcher = matcher

    def accepts(self, ids):
        m = self.matcher.deep_copy()
        return m.consume_tokens(ids) and m.is_accepting()

    def post_check(self, value):
        return None


class LlguidanceEngine:
    name = "llguidance"
    OPTIONS = {"whitespace_flexible": False, "item_separator": ",", "key_separator": ":"}

    def __init__(self, tokenizer):
        import llguidance
        import llguidance.hf

        self.llg = llguidance
        self.tokenizer = llguidance.hf.from_tokenizer(tokenizer, n_vocab=len(tokenizer))

    def compile(self, schema_text):
        try:
            grammar = self.llg.LLMatcher.grammar_from_json_schema(schema_text, defaults=self.OPTIONS)
            matcher = self.llg.LLMatcher(self.tokenizer, grammar, log_level=0)
        except Exception as err:
            raise Refused(_first_line(err)) from None
        if matcher.is_error():
            raise Refused(_first_line(Exception(matcher.get_error())))
        return LlgCompiled(matcher)


class XgrCompiled:
    def __init__(self, xgr, compiled, eos: int):
        self.xgr, self.compiled, self.eos = xgr, compiled, eos

    def accepts(self, ids):
        m = self.xgr.GrammarMatcher(self.compiled)
        return all(m.accept_token(tid) for tid in ids) and m.accept_token(self.eos)

    def post_check(self, value):
        return None


class XgrammarEngine:
    name = "xgrammar"

    def __init__(self, tokenizer):
        import xgrammar

        self.xgr = xgrammar
        self.eos = tokenizer.eos_token_id
        info = xgrammar.TokenizerInfo.from_huggingface(tokenizer, vocab_size=len(tokenizer), stop_token_ids=[self.eos])
        self.compiler = xgrammar.GrammarCompiler(info, cache_enabled=False)

    def compile(self, schema_text):
        try:
            compiled = self.compiler.compile_json_schema(schema_text, any_whitespace=False, separators=(",", ":"),
                                                         strict_mode=False)
        except Exception as err:
            raise Refused(_first_line(err)) from None
        return XgrCompiled(self.xgr, compiled, self.eos)


ENGINES = {"kvx": KvxEngine, "llguidance": LlguidanceEngine, "xgrammar": XgrammarEngine}
MODULES = {"kvx": "kvx", "llguidance": "llguidance", "xgrammar": "xgrammar"}


def make_engine(spec: str) -> Engine:
    """An engine by name, on the default model's tokenizer; or "module:attr", a factory called
    without arguments (tests use it for engines that need no tokenizer)."""
    if spec in ENGINES:
        from benchmarks.grammar_bench.tokenizer import smol_tokenizer

        return ENGINES[spec](smol_tokenizer())
    import importlib

    module, attr = spec.split(":", 1)
    return getattr(importlib.import_module(module), attr)()


def available(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(MODULES[name]) is not None


def peer_version(name: str) -> str:
    return importlib.metadata.version(name)
