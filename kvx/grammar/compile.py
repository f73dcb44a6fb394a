"""compile_schema: JSON Schema + tokenizer -> Grammar (pushdown program, token tables, budget).

The compiled program and its distances are cached on disk (kvx/grammar/cache.py).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import lru_cache

from kvx.grammar import cache as _cache
from kvx.grammar.automata import graph_kernels
from kvx.grammar.automata.pda import Program
from kvx.grammar.errors import TooLarge, too_large
from kvx.grammar.options import GrammarOptions
from kvx.grammar.tokens.budget import token_prefixes
from kvx.grammar.tokens.matcher import Matcher
from kvx.grammar.tokens.stacks import MAX_DEPTH, TokenPDA
from kvx.grammar.tokens.token_walk import token_matrix
from kvx.grammar.tokens.vocab import TokenVocab, vocab_for


@dataclass
class CompileStats:
    dfa_states: int = 0  # states of all rules together
    rules: int = 0
    compile_ms: float = 0.0  # program (or cache load) + distances: the per-schema cost
    compile_cpu_ms: float = 0.0  # the compiling thread's CPU over the same span: what the deadline counts
    tokenizer_prep_ms: float = 0.0  # vocab bytes + token matrix, once per tokenizer per process
    from_cache: bool = False


@dataclass
class Grammar:
    program: Program
    vocab: TokenVocab
    pda: TokenPDA
    warnings: list[str] = field(default_factory=list)
    post_checks: list[str] = field(default_factory=list)  # keywords left to the jsonschema check
    stats: CompileStats = field(default_factory=CompileStats)

    def matcher(self, max_tokens: int | None = None) -> Matcher:
        return Matcher(self.pda, max_tokens)

    def accepts_text(self, text: str) -> bool:
        return self.program.accepts(text.encode("utf-8"))


@lru_cache(maxsize=1)
def _warm_compiler() -> None:
    """Once per process: imports (jsonschema, the pattern parser, formats) and the compiled graph
    kernels (loaded from numba's disk cache)."""
    from kvx.grammar.schema import formats, regex_parse  # noqa: F401
    from kvx.grammar.schema.compiler import compile_program  # noqa: F401

    graph_kernels.kernels()


def compile_schema(
    schema: dict,
    tokenizer,
    options: GrammarOptions = GrammarOptions(),
    *,
    max_depth: int = MAX_DEPTH,
    cache: bool = True,
) -> Grammar:
    """Compile `schema` for `tokenizer` (a kvx Tokenizer or a HF tokenizer); raises UnsupportedSchema.
    `max_depth`: nesting safety limit of generated documents (frames on the stack)."""
    t0 = time.perf_counter()
    vocab = vocab_for(tokenizer)
    token_matrix(vocab)
    vocab.single_byte_tokens(), vocab.longest
    token_prefixes(vocab)  # per-tokenizer tables, cached in memory by vocab hash
    _warm_compiler()

    prep_ms = (time.perf_counter() - t0) * 1e3
    t1, c1 = time.perf_counter(), time.thread_time()
    path = _cache.cache_path(schema, options.program_key(), vocab) if cache else None
    loaded = _cache.load(path) if path is not None else None
    if loaded is None:
        from kvx.grammar.schema.compiler import compile_program, compile_scope

        with compile_scope(options):  # the distances count too
            compiled = compile_program(schema, options)
            program = compiled.program
            try:
                pda = TokenPDA(program, vocab, max_depth=max_depth)
            except TooLarge as err:
                raise too_large("/", err, pointer="") from None
        warnings, post_checks = list(compiled.warnings), list(compiled.post_checks)
        if path is not None:
            _cache.store(path, program, pda.byte_dist, warnings, post_checks)
    else:
        program, dist, warnings, post_checks = loaded
        pda = TokenPDA(program, vocab, byte_dist=dist, max_depth=max_depth)
    stats = CompileStats(dfa_states=program.num_states, rules=program.live_rules,
                         compile_ms=(time.perf_counter() - t1) * 1e3, tokenizer_prep_ms=prep_ms,
                         compile_cpu_ms=(time.thread_time() - c1) * 1e3,
                         from_cache=loaded is not None)
    return Grammar(program, vocab, pda, warnings, post_checks, stats)
