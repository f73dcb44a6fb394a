"""The tokenizer every engine gets: the default model's (SmolLM2-135M-Instruct), the same loader
the grammar tests use (tests/grammar/grammar_fixtures.py)."""
from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def smol_tokenizer():
    folder = str(REPO / "tests" / "grammar")
    if folder not in sys.path:
        sys.path.append(folder)
    from grammar_fixtures import smol_tokenizer as load

    return load()
