"""Matcher: EOS only in accepting states, disallowed tokens raise, jump-forward, budget, disk cache."""
import json

import numpy as np
import pytest
from grammar_fixtures import REPO, smol_tokenizer

from kvx.grammar import DisallowedToken, compile_schema

TICKET = json.loads((REPO / "schemas" / "ticket.json").read_text())
ENUM = {"type": "object", "properties": {"colour": {"enum": ["red", "green"]}}, "required": ["colour"],
        "additionalProperties": False}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KVX_CACHE", str(tmp_path))
    return tmp_path


def _text(grammar, ids):
    return b"".join(grammar.vocab.token_bytes[i] for i in ids).decode()


def test_forced_tokens_spell_the_forced_bytes(cache):
    grammar = compile_schema(ENUM, smol_tokenizer())
    m = grammar.matcher()
    forced = m.forced_tokens()
    assert _text(grammar, forced) == '{"colour":"'
    assert forced == m.forced_tokens()  # pure
    for tid in forced:
        m.advance(tid)
    assert m.forced_tokens() == []  # red or green: a choice
    g = smol_tokenizer().encode("g", add_special_tokens=False)
    assert len(g) == 1
    m.advance(g[0])
    assert _text(grammar, m.forced_tokens()) == 'reen"}'
    with pytest.raises(DisallowedToken):
        m.advance(2)  # EOS before the document is complete
    for tid in m.forced_tokens():
        m.advance(tid)
    assert m.is_accepting() and m.min_tokens_to_finish() == 1
    assert np.flatnonzero(m.allowed_mask().numpy()).tolist() == [2]
    m.advance(2)
    assert m.is_finished() and m.min_tokens_to_finish() == 0


def test_tight_budget_still_closes_the_json(cache):
    grammar = compile_schema(TICKET, smol_tokenizer())
    need = grammar.matcher().min_tokens_to_finish()
    rng = np.random.default_rng(0)
    m = grammar.matcher(max_tokens=need)
    ids = []
    while not m.is_finished():
        allowed = np.flatnonzero(m.allowed_mask().numpy())
        tid = int(rng.choice(allowed))
        m.advance(tid)
        ids.append(tid)
    assert len(ids) <= need and ids[-1] == 2
    json.loads(_text(grammar, ids[:-1]))


def test_disk_cache_hit_and_corrupt_entry_rebuilt(cache):
    tok = smol_tokenizer()
    first = compile_schema(ENUM, tok)
    assert not first.stats.from_cache
    second = compile_schema(ENUM, tok)
    assert second.stats.from_cache and (second.program.trans == first.program.trans).all()
    (entry,) = list((cache / "grammar").glob("*.npz"))
    entry.write_bytes(b"not an npz")
    third = compile_schema(ENUM, tok)
    assert not third.stats.from_cache and third.accepts_text('{"colour":"red"}')
    assert compile_schema(ENUM, tok).stats.from_cache
