"""The token layer against a plain byte-level reference: Program.run follows every token's bytes
through calls and returns with explicit stacks; the cached per-state tables, the stack-dependent
tokens and the interned configurations must agree with it for every token of the vocabulary."""
import json

import numpy as np
from grammar_fixtures import REPO, smol_tokenizer, tiny_sentencepiece

from kvx.grammar import compile_schema
from kvx.grammar.tokens.vocab import vocab_for

TICKET = json.loads((REPO / "schemas" / "ticket.json").read_text())
NESTED = {"type": "object", "properties": {
    "items": {"type": "array", "items": {"type": "object", "properties": {"sku": {"type": "string", "maxLength": 8},
                                                                       "n": {"type": "integer"}},
                                         "required": ["sku"], "additionalProperties": False}},
    "meta": {"anyOf": [{"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}},
                       {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string"}}}}]}},
    "required": ["items"]}


def stacks_of(pda, cid) -> set:
    """A configuration's stacks as tuples (return states bottom first, then the top state)."""
    out = set()
    for top, node in pda.configs[cid].stacks:
        rets = []
        while node:
            rets.append(pda.node_ret[node])
            node = pda.node_parent[node]
        out.add(tuple(reversed(rets)) + (top,))
    return out


def check_against_reference(grammar, prefix: bytes) -> int:
    """Every token from the configuration after `prefix`: allowed exactly when the reference says
    so, landing on the same stacks. Returns the number of allowed tokens."""
    pda, program = grammar.pda, grammar.program
    stacks = program.run(prefix)
    cid = _config_of(pda, stacks)
    mask = pda.mask(cid).numpy()
    allowed = 0
    for tid, tb in enumerate(grammar.vocab.token_bytes):
        if not tb:
            continue
        want = program.run(tb, stacks)
        got = pda.next(cid, tid)
        assert (got >= 0) == bool(want) == bool(mask[tid]), (prefix, tb)
        if want:
            allowed += 1
            assert stacks_of(pda, got) == want, (prefix, tb)
    return allowed


def _config_of(pda, stacks) -> int:
    """The interned configuration of explicit stacks (tuples from Program.run)."""
    out = []
    for st in stacks:
        node = 0
        for ret in st[:-1]:
            node = pda.push(node, ret)
        out.append((st[-1], node))
    return pda.config(out)


def test_tables_match_reference_on_ticket(tmp_path, monkeypatch):
    monkeypatch.setenv("KVX_CACHE", str(tmp_path))
    grammar = compile_schema(TICKET, smol_tokenizer())
    for prefix in [b"", b'{"category":"', b'{"category":"billing","priority":"low","sentiment":"neutral","summary":"ab',
                   b'{"category":"billing","priority":"low","sentiment":"neutral","summary":"abcde",'
                   b'"requires_refund":true,"tags":["x"']:
        assert check_against_reference(grammar, prefix) > 0


def test_tables_match_reference_across_frames(tmp_path, monkeypatch):
    """Tokens that open and close frames (`[{"`, `"}]`, `},{"`) and anyOf branches calling different
    rules on the same byte (two stacks at once)."""
    monkeypatch.setenv("KVX_CACHE", str(tmp_path))
    grammar = compile_schema(NESTED, smol_tokenizer())
    for prefix in [b'{"items":', b'{"items":[', b'{"items":[{"sku":"ab', b'{"items":[{"sku":"ab","n":1',
                   b'{"items":[],"meta":{"a":[', b'{"items":[],"meta":{"a":[1']:
        assert check_against_reference(grammar, prefix) > 0
    m = grammar.pda
    assert len(m.configs[_config_of(m, grammar.program.run(b'{"items":[],"meta":{"a":['))].stacks) == 2


def test_sentencepiece_grammar_walk_and_eos(tmp_path, monkeypatch):
    monkeypatch.setenv("KVX_CACHE", str(tmp_path))
    tok = tiny_sentencepiece()
    schema = {"type": "object", "properties": {"name": {"enum": ["am", "name"]}}, "required": ["name"],
              "additionalProperties": False}
    grammar = compile_schema(schema, tok)
    eos = vocab_for(tok).eos_ids[0]
    for text in ['{"name":"am"}', '{"name":"name"}']:
        m = grammar.matcher()
        written = b""
        ids = tok.encode(text, add_special_tokens=False)
        ids = [i for i in ids if tok.convert_ids_to_tokens(i) != "\u2581"]
        for tid in ids:
            assert m.allowed_mask()[tid]
            m.advance(tid)
            written += grammar.vocab.token_bytes[tid]
        assert stacks_of(grammar.pda, m.state) == grammar.program.run(written)
        assert m.is_accepting() and m.allowed_mask()[eos]
        m.advance(eos)
        assert m.is_finished() and not m.allowed_mask().any()
    assert not grammar.accepts_text('{"name":"x"}')


def test_numba_and_lockstep_walks_agree(tmp_path, monkeypatch):
    """The per-token numba walk (states most tokens enter) and the numpy lockstep walk give the same
    alive tokens, end states and boundary stops, on every 7th state of the shipped schemas."""
    from kvx.grammar.tokens import token_walk

    monkeypatch.setenv("KVX_CACHE", str(tmp_path))
    numba_states = 0
    for schema in [json.loads((REPO / "schemas" / f"{n}.json").read_text()) for n in ("ticket", "invoice", "sql_query_plan")] + [NESTED]:
        grammar = compile_schema(schema, smol_tokenizer())
        table, classes = grammar.program.table, grammar.program.classes
        mat, edge = grammar.pda.frames.matrix, grammar.pda.frames.edge
        for state in range(0, grammar.program.num_states, 7):
            slow = token_walk.walk_lockstep(table, classes, edge, mat, state)
            if token_walk.worth_it(table, classes, mat, state):
                numba_states += 1
                fast = token_walk.walk_tokens(table, classes, edge, mat, len(grammar.vocab.token_bytes), state)
                assert np.array_equal(fast.ids, slow.ids) and np.array_equal(fast.nexts, slow.nexts), state
                order = np.argsort(slow.stop_ids)
                assert np.array_equal(fast.stop_ids, slow.stop_ids[order]), state
                assert np.array_equal(fast.stop_pos, slow.stop_pos[order]), state
                assert np.array_equal(fast.stop_state, slow.stop_state[order]), state
    assert numba_states > 20  # string contents: the states the numba walk is for
