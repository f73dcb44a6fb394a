"""Schema-constrained decoding: JSON Schema -> pushdown automaton of byte DFAs -> lazy token tables
(see docs/grammar_compiler.md and docs/grammar_tokens.md). Its names load on first use, so
kvx.grammar.options (the options, declared once) imports without torch or numpy."""
from kvx.lazy import lazy_names

_HOME = {"CompileStats": "kvx.grammar.compile", "Grammar": "kvx.grammar.compile",
         "compile_schema": "kvx.grammar.compile", "DisallowedToken": "kvx.grammar.tokens.matcher",
         "Matcher": "kvx.grammar.tokens.matcher", "Program": "kvx.grammar.automata.pda",
         "TokenVocab": "kvx.grammar.tokens.vocab", "vocab_for": "kvx.grammar.tokens.vocab",
         "UnsupportedSchema": "kvx.grammar.errors", "GrammarOptions": "kvx.grammar.options"}
__all__ = sorted(_HOME)
__getattr__ = lazy_names(__name__, _HOME)
