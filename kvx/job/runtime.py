"""Build what a job runs on: tokenizer, compiled grammar and engine, from the CLI's options.

Tests replace `build_runtime` (monkeypatch) or, for subprocess tests, name a factory in the
KVX_RUNTIME_FACTORY environment variable ("module:function", called like build_runtime).
"""
from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable

from kvx.engine.api import Attention, Constraint, Dtype, EngineConfig, KVDtype
from kvx.errors import ConfigError
from kvx.grammar.options import GrammarOptions
from kvx.models.resolve import DEFAULT_MODEL


@dataclass
class EngineOptions:
    """The model, engine and grammar options of one run; the engine's defaults are EngineConfig's."""

    model: str = DEFAULT_MODEL
    dtype: Dtype = EngineConfig.dtype
    attention: Attention = EngineConfig.attention
    kv_dtype: KVDtype = EngineConfig.kv_dtype
    kv_memory: int | None = EngineConfig.kv_memory  # bytes
    batch_tokens: int = EngineConfig.batch_tokens
    max_seqs: int = EngineConfig.max_seqs
    speculate: int = EngineConfig.speculative_tokens
    grammar: GrammarOptions = field(default_factory=GrammarOptions)


@dataclass
class Runtime:
    tokenizer: Any  # encode / decode / chat_prompt / eos_token_ids
    engine: Any  # generate(requests) -> Results; metrics.snapshot() -> dict
    max_model_len: int
    model_name: str
    grammar: Any = None  # kvx.grammar.Grammar, or None for unconstrained generation
    close: Callable[[], None] = lambda: None  # release what the runtime holds (a fleet's replicas)

    def constraint(self, max_tokens: int) -> Callable[[], Constraint] | None:
        grammar = self.grammar
        if grammar is None:
            return None
        return lambda: grammar.matcher(max_tokens=max_tokens)

    @cached_property
    def shortest_record(self) -> int:
        """Output tokens the shortest record the grammar allows takes, EOS included (1 without one);
        worked out once (the start-up check and the job both read it)."""
        return 1 if self.grammar is None else self.grammar.matcher().min_tokens_to_finish()


def check_engine_options(opts: EngineOptions) -> None:
    """What the machine cannot do, found before the model loads (exit 2): a KV pool larger than the
    free memory (it would be killed for memory later), Triton attention without a GPU."""
    import torch

    from kvx.engine.block_manager import check_pool_fits

    cuda = torch.cuda.is_available()
    if opts.attention == "triton" and not cuda and os.environ.get("TRITON_INTERPRET") != "1":
        raise ConfigError("{option} triton needs a CUDA GPU and none is visible; use {option} auto or torch",
                          option="attention")
    if opts.kv_memory is not None:  # where load_model puts the weights, the engine puts the pool
        check_pool_fits(opts.kv_memory, torch.device("cuda" if cuda else "cpu"))


def build_runtime(schema: dict, opts: EngineOptions) -> Runtime:
    hook = os.environ.get("KVX_RUNTIME_FACTORY")
    if hook:
        module, _, name = hook.partition(":")
        try:
            factory = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError) as e:
            raise ConfigError(f"KVX_RUNTIME_FACTORY={hook}: cannot load it ({e})") from None
        return factory(schema, opts)
    return real_runtime(schema, opts)


def real_runtime(schema: dict, opts: EngineOptions) -> Runtime:
    from kvx.engine import Engine
    from kvx.engine.api import EngineConfig
    from kvx.grammar import compile_schema
    from kvx.models import load_model

    loaded = load_model(opts.model, dtype=opts.dtype)
    # Compile before building the engine: a schema the grammar cannot handle exits 2 right away.
    grammar = compile_schema(schema, loaded.tokenizer, opts.grammar)
    config = EngineConfig(
        kv_memory=opts.kv_memory,
        kv_dtype=opts.kv_dtype,
        batch_tokens=opts.batch_tokens,
        max_seqs=opts.max_seqs,
        speculative_tokens=opts.speculate,
        attention=opts.attention,
        dtype=opts.dtype,
    )
    engine = Engine(loaded, config)
    return Runtime(loaded.tokenizer, engine, engine.max_model_len, loaded.source.spec, grammar)
