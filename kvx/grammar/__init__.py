"""Schema-constrained decoding: JSON Schema -> pushdown automaton of byte DFAs -> lazy token tables
(see docs/grammar_compiler.md and docs/grammar_tokens.md)."""
from kvx.grammar.automata.pda import Program
from kvx.grammar.compile import CompileStats, Grammar, compile_schema
from kvx.grammar.errors import UnsupportedSchema
from kvx.grammar.tokens.matcher import DisallowedToken, Matcher
from kvx.grammar.tokens.vocab import TokenVocab, vocab_for

__all__ = [
    "CompileStats",
    "DisallowedToken",
    "Grammar",
    "Matcher",
    "Program",
    "TokenVocab",
    "UnsupportedSchema",
    "compile_schema",
    "vocab_for",
]
