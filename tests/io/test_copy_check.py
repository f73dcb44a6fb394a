"""Copies of --examples values (kvx/copy_check.py): what counts as a copy, and the guard's veto."""
from char_vocab import Spell
from kvx.copy_check import CopyCheck, CopyGuard
from kvx.spelling import Spelling

SCHEMA = {"type": "object", "properties": {"kind": {"enum": ["refund", "other"]}, "name": {"type": "string"},
                                           "amount": {"type": "number"}, "items": {"type": "array"}}}
EXAMPLE = {"kind": "refund", "name": "Northwind Home Lending", "amount": 1250.0, "items": [{"sku": "AB-77"}],
           "ok": True}


def test_a_copy_is_an_example_value_the_text_lacks():
    check = CopyCheck([EXAMPLE], SCHEMA)
    text = "I paid $1,250.00 to Contoso and want it back."
    record = {"kind": "refund", "name": "northwind home lending ", "amount": 1250, "items": [{"sku": "AB-77"}],
              "ok": True}
    # the enum value and the boolean are shared rightly; 1250 is in the text; name and sku are copies
    assert check.copied(record, text) == ["/name", "/items/*/sku"]
    assert check.copied({"name": "Contoso", "amount": 99}, text) == []
    assert check.copied({"name": "Northwind Home Lending"}, "Northwind Home Lending sent me a bill") == []
    assert check.copied({"amount": 1250.001}, "no amounts here") == ["/amount"]  # within a cent


def test_the_guard_stops_a_copy_at_its_start_or_at_a_long_run():
    spell = Spell('{}":,[]. 0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ$')
    check = CopyCheck([EXAMPLE], SCHEMA)
    guard = CopyGuard(check, "Contoso billed me $99 for a North Face jacket.", spell.spelling)
    assert not spell.vetoed(guard, '{"name":"No', "r")  # "Nor" is in the text ("North Face")
    assert not spell.vetoed(guard, '{"name":"North', " ")  # "north " too
    assert spell.vetoed(guard, '{"name":"North', "w")  # "northw": the example's start, not in the text
    assert spell.vetoed(guard, '{"name":"Xyz Home Lendin', "g")  # a 10-character run from inside it
    assert not spell.vetoed(guard, '{"name":"Contos', "o")
    assert spell.vetoed(guard, '{"name":"x","amount":12', "5")  # 125... of 1250, absent from the text
    assert not spell.vetoed(guard, '{"name":"x","amount":9', "9")
    assert not spell.vetoed(guard, '{"kind":"refun', "d")  # enum members are never copies


def test_the_guard_travels_to_a_replica_without_the_vocabulary():
    """A Ray replica gets the guard pickled with each request: the vocabulary's bytes stay behind
    (found again by hash in the receiving process, which built the same vocabulary), and the
    guard vetoes the same tokens there."""
    import pickle

    from kvx.grammar.tokens.vocab import _VOCABS, TokenVocab

    spell = Spell('{}":,[]. 0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ$')
    filler = [bytes([0x80 + i % 64]) for i in range(20000)]
    vocab = TokenVocab(token_bytes=spell.token_bytes + filler, eos_ids=[0], kind="byte")
    _VOCABS[id(spell)] = (spell, vocab)  # as vocab_for registers what a process builds
    check = CopyCheck([EXAMPLE], SCHEMA)
    guard = CopyGuard(check, "Contoso billed me $99 for a North Face jacket.", Spelling(vocab.token_bytes, vocab.hash))
    wire = pickle.dumps(guard)
    assert len(wire) < 2000  # not the 20,000-token vocabulary
    there = pickle.loads(wire)
    assert there.spelling.token_bytes is vocab.token_bytes
    for output, nxt in (('{"name":"North', "w"), ('{"name":"North', " "), ('{"name":"x","amount":12', "5")):
        assert spell.vetoed(there, output, nxt) == spell.vetoed(guard, output, nxt)
    assert spell.vetoed(there, '{"name":"North', "w")
    del _VOCABS[id(spell)]
    assert pickle.loads(wire).spelling.token_bytes == []  # a process that never built it: the guard vetoes nothing
