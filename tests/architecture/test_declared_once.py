"""Each option's default and each option's choices are declared once in kvx (where the option is
owned), and the library layers name options by their fields, never by command-line flags.

Read from the source as tokens (comments and docstrings do not count), like a grep would."""
from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path
from typing import get_args

from kvx.engine.api import Attention, Dtype, EngineConfig, KVDtype

KVX = Path(__file__).resolve().parents[2] / "kvx"
CHOICES = {  # every option with a closed set of values: where its Literal is declared
    "DTYPES": (("auto", "float32", "bfloat16"), "kvx/engine/api.py"),
    "KV_DTYPES": (("auto", "float32", "bfloat16", "float16", "int8"), "kvx/engine/api.py"),
    "ATTENTION": (("auto", "torch", "triton"), "kvx/engine/api.py"),
    "WHITESPACE": (("compact", "flexible"), "kvx/grammar/options.py"),
    "CHOICE_MODES": (("greedy", "rank", "calibrated", "channel"), "kvx/job/settings.py"),
    "TRUNCATE_MODES": (("none", "head", "tail", "middle"), "kvx/prompts.py"),
    "SCHEMA_STYLES": (("fields", "json"), "kvx/prompts.py"),
}
OTHER_MEANINGS = {8192: {"kvx/models/llama.py"}}  # the rope table's first length, not a token budget
LIBRARY = ("kvx/engine", "kvx/models", "kvx/kernels", "kvx/grammar")


def _sources() -> dict[str, str]:
    return {p.relative_to(KVX.parent).as_posix(): p.read_text(encoding="utf-8") for p in sorted(KVX.rglob("*.py"))}


def _tokens(text: str) -> list[tokenize.TokenInfo]:
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT}
    return [t for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type not in skip]


def _places(predicate) -> set[str]:
    return {path for path, text in _sources().items() if any(predicate(t) for t in _tokens(text))}


def _string_lists(text: str) -> list[tuple[str, ...]]:
    """Every bracketed list of plain string literals: ("a", "b"), Literal["a", "b"], ["a"]."""
    found, toks = [], _tokens(text)
    for i, t in enumerate(toks):
        if t.string not in ("(", "["):
            continue
        items, j = [], i + 1
        while j < len(toks) and toks[j].type == tokenize.STRING and toks[j].string[0] in "'\"":
            items.append(ast.literal_eval(toks[j].string))
            j += 1
            if j < len(toks) and toks[j].string == ",":
                j += 1
            else:
                break
        if items and j < len(toks) and toks[j].string in (")", "]"):
            found.append(tuple(items))
    return found


def test_default_model_name_is_written_once():
    assert _places(lambda t: t.type == tokenize.STRING and "smollm2-135m" in t.string) == {"kvx/models/resolve.py"}


def test_default_token_budget_is_written_once():
    places = _places(lambda t: t.type == tokenize.NUMBER and t.string == str(EngineConfig.batch_tokens))
    assert places - OTHER_MEANINGS[8192] == {"kvx/engine/api.py"}


def test_grammar_option_defaults_are_written_once():
    """GrammarOptions owns them: the compiler, the job's EngineOptions and the CLI read its fields."""
    assert _places(lambda t: t.type == tokenize.STRING and t.string.strip("'\"") == "compact") == {"kvx/grammar/options.py"}


def test_each_choice_list_is_declared_once():
    counts = {name: [] for name in CHOICES}
    for path, text in _sources().items():
        for found in _string_lists(text):
            for name, (choices, _) in CHOICES.items():
                if found == choices:
                    counts[name].append(path)
    assert counts == {name: [home] for name, (_, home) in CHOICES.items()}


def test_choice_lists_finder_finds_a_literal():
    assert _string_lists('X = Literal["a", "b"]\nY = ("c",)\nZ = f("d", e)\n') == [("a", "b"), ("c",)]


def test_engine_choices_match_the_engine_tables():
    from kvx.engine.engine import _KV_DTYPES
    from kvx.models.loader import DTYPES

    assert get_args(KVDtype) == ("auto", *_KV_DTYPES)
    assert get_args(Dtype) == ("auto", *DTYPES)
    assert "auto" in get_args(Attention)


def _messages(text: str) -> list[str]:
    """String literals outside docstrings (an f-string's literal parts)."""
    tree = ast.parse(text)
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    return [n.value for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


def test_library_layers_name_no_command_line_flag():
    flag = re.compile(r"(?<![\w-])--[a-z][a-z-]+")
    named = [f"{path}: {m!r}" for path, text in _sources().items() if path.startswith(LIBRARY)
             for m in _messages(text) if flag.search(m) and "pip install" not in m]
    assert named == []
