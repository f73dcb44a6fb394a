"""The key-repeat guard (kvx/key_repeat.py): once an object names a key twice, no token may write
a comma that continues that object; everything else (other objects, strings, arrays) is untouched."""
import pickle

from char_vocab import Spell
from kvx.json_cursor import JsonCursor
from kvx.key_repeat import KeyRepeatGuard
from kvx.spelling import Spelling

CHARS = '{}":,[] 0123456789abcdefghijklmnopqrstuvwxyz'


def test_an_object_that_repeats_a_key_may_only_close():
    spell = Spell(CHARS)
    guard = KeyRepeatGuard(JsonCursor(spell.spelling))
    repeated = '{"m":{"id":"1","id":"1"'
    assert spell.vetoed(guard, repeated, ",")
    assert not spell.vetoed(guard, repeated, "}")
    assert not spell.vetoed(guard, repeated, " ")
    assert not spell.vetoed(guard, repeated + "}", ",")  # the outer object names "m" once: it goes on
    assert not spell.vetoed(guard, '{"m":{"id":"1","ix":"1"', ",")  # no key twice
    assert not spell.vetoed(guard, '{"m":{"id":"1","id":"1,', ",")  # commas inside a string
    assert not spell.vetoed(guard, '{"m":{"id":"1","id":[1', ",")  # an array inside it goes on
    assert not spell.vetoed(guard, '{"m":{"id":"1","id":{"a":1', ",")  # and an object inside it
    assert spell.vetoed(guard, '{"m":{"id":"1","id":{"a":1}', ",")
    assert not spell.vetoed(guard, '{"a":{"id":1},"b":{"id":1', ",")  # one key in each of two objects
    # the same answers from a guard that saw other outputs first (a kept scan, cut back)
    fresh = KeyRepeatGuard(JsonCursor(spell.spelling))
    assert spell.vetoed(fresh, repeated, ",") and not spell.vetoed(fresh, '{"m":{"id":"1","ix":"1"', ",")
    there = pickle.loads(pickle.dumps(guard))  # it travels to Ray replicas with its request
    assert spell.vetoed(there, repeated, ",") and not spell.vetoed(there, repeated, "}")


def test_a_token_that_ends_a_value_and_writes_the_comma_is_refused():
    chars = sorted(set(CHARS))
    tokens = [c.encode() for c in chars] + [b'","', b'1","', b'"}']
    spelling = Spelling(tokens)
    guard = KeyRepeatGuard(JsonCursor(spelling))
    ids = lambda text: [chars.index(c) for c in text]
    output = ids('{"id":"1","id":"1')
    assert guard.vetoes(output, len(chars))  # '","'
    assert guard.vetoes(output[:-1], len(chars) + 1)  # '1","'
    assert not guard.vetoes(output, len(chars) + 2)  # '"}'
    assert not guard.vetoes(ids('{"id":"1","ix":"1'), len(chars))

