"""Schema-constrained decoding: JSON Schema -> byte DFA -> lazy token FSM (see docs/grammar_tokens.md)."""
from kvx.grammar.automata.dfa import DFA
from kvx.grammar.errors import UnsupportedSchema
from kvx.grammar.compile import CompileStats, Grammar, compile_schema
from kvx.grammar.tokens.matcher import DisallowedToken, Matcher
from kvx.grammar.tokens.vocab import TokenVocab, vocab_for

__all__ = [
    "CompileStats",
    "DFA",
    "DisallowedToken",
    "Grammar",
    "Matcher",
    "TokenVocab",
    "UnsupportedSchema",
    "compile_schema",
    "vocab_for",
]
