"""The vectorised per-state token walk against a plain per-token DFA run (the reference)."""
import json
from pathlib import Path

import numpy as np
from grammar_fixtures import REPO, smol_tokenizer, tiny_sentencepiece

from kvx.grammar import compile_schema
from kvx.grammar.tokens.vocab import vocab_for

TICKET = json.loads((REPO / "schemas" / "ticket.json").read_text())


def _reference(grammar, state):
    allowed = {}
    for tid, tb in enumerate(grammar.vocab.token_bytes):
        if tb:
            nxt = grammar.dfa.run(tb, state)
            if nxt >= 0:
                allowed[tid] = nxt
    return allowed


def test_walk_matches_reference_on_ticket_states(tmp_path, monkeypatch):
    monkeypatch.setenv("KVX_CACHE", str(tmp_path))
    grammar = compile_schema(TICKET, smol_tokenizer())
    prefixes = [b"", b'{"category":"', b'{"category":"billing","priority":"low","sentiment":"neutral","summary":"ab']
    for prefix in prefixes:
        state = grammar.dfa.run(prefix)
        ref = _reference(grammar, state)
        entry = grammar.fsm.state(state)
        assert dict(zip(entry.ids.tolist(), entry.nexts.tolist())) == ref
        mask = entry.mask.numpy()
        assert set(np.flatnonzero(mask).tolist()) == set(ref)  # not accepting: no EOS


def test_sentencepiece_grammar_walk_and_eos(tmp_path, monkeypatch):
    monkeypatch.setenv("KVX_CACHE", str(tmp_path))
    tok = tiny_sentencepiece()
    schema = {"type": "object", "properties": {"name": {"enum": ["am", "name"]}}, "required": ["name"],
              "additionalProperties": False}
    grammar = compile_schema(schema, tok)
    eos = vocab_for(tok).eos_ids[0]
    for text in ['{"name":"am"}', '{"name":"name"}']:
        m = grammar.matcher()
        state = grammar.dfa.start
        ids = tok.encode(text, add_special_tokens=False)
        ids = [i for i in ids if tok.convert_ids_to_tokens(i) != "\u2581"]
        for tid in ids:
            assert m.allowed_mask()[tid]
            m.advance(tid)
            state = grammar.dfa.run(grammar.vocab.token_bytes[tid], state)
        assert m.state == state and m.is_accepting() and m.allowed_mask()[eos]
        m.advance(eos)
        assert m.is_finished() and not m.allowed_mask().any()
    assert not grammar.accepts_text('{"name":"x"}')


def test_numba_and_lockstep_walks_agree(tmp_path, monkeypatch):
    """The per-token numba walk (states most tokens enter) and the numpy lockstep walk give the same
    allowed ids and next states, on every 9th state of the three shipped schemas."""
    from kvx.grammar.tokens import token_walk
    from kvx.grammar.tokens.token_fsm import walk_lockstep

    monkeypatch.setenv("KVX_CACHE", str(tmp_path))
    numba_states = 0
    for name in ("ticket", "invoice", "sql_query_plan"):
        grammar = compile_schema(json.loads((REPO / "schemas" / f"{name}.json").read_text()), smol_tokenizer())
        dfa, mat = grammar.dfa, grammar.fsm.matrix
        for state in range(0, dfa.num_states, 9):
            ids, nexts = walk_lockstep(dfa, mat, state)
            if token_walk.worth_it(dfa.trans, mat, state):
                numba_states += 1
                fast_ids, fast_nexts = token_walk.walk_tokens(dfa.trans, mat, len(grammar.vocab.token_bytes), state)
                assert np.array_equal(fast_ids, ids) and np.array_equal(fast_nexts, nexts), (name, state)
    assert numba_states > 20  # string contents: the states the numba walk is for
