"""The repeat guard (kvx/repeat_guard.py): no n-gram twice inside one JSON string unless the text
has it; right values (dates, phone numbers, copied text) stay writable; nothing outside strings."""
import pickle
import random

from char_vocab import Spell
from kvx.repeat_guard import RepeatGuard

CHARS = '{}":,[]. -_/\\0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ'


def guard_for(text: str, n: int = 3) -> tuple[RepeatGuard, Spell]:
    spell = Spell(CHARS)
    return RepeatGuard(text, n, spell.spelling), spell


def test_a_string_may_not_write_an_ngram_twice():
    guard, spell = guard_for("My order never came.")
    assert spell.vetoed(guard, '{"summary":"last las', "t")  # "ast" again
    assert not spell.vetoed(guard, '{"summary":"last las', "s")  # "ass" is new
    assert not spell.vetoed(guard, '{"summary":"last las', '"')  # the closing quote always may
    assert spell.vetoed(guard, '{"summary":"I am sorry. I a', "m")
    assert spell.vetoed(guard, '{"summary":"Sorry. sor', "r")  # case aside: "sor" again
    off, spell = guard_for("My order never came.", n=0)
    assert not spell.vetoed(off, '{"summary":"last las', "t")


def test_the_history_is_one_string_and_only_strings():
    guard, spell = guard_for("nothing repeats here")
    assert not spell.vetoed(guard, '{"a":"abc","b":"ab', "c")  # another string: its own n-grams
    assert not spell.vetoed(guard, '{"a":[true,true,tru', "e")  # between strings: never
    assert not spell.vetoed(guard, '{"abc":1,"ab', "c")  # n-grams of keys are their own too
    # an escaped quote does not end the string: its n-grams still count
    assert spell.vetoed(guard, '{"a":"ab\\"abc\\"ab', "c")
    assert not spell.vetoed(guard, '{"a":"ab\\', '"')  # an escape is never refused


def test_right_values_stay_writable():
    guard, spell = guard_for("Call 555-555-5555 about XXXX XXXX XXXX, the card ending XXXX.")
    for value in ("2022-01-01", "555-555-5555", "1000000", "XXXX XXXX XXXX"):
        out = '{"v":"'
        for ch in value:
            assert not spell.vetoed(guard, out, ch), (value, out)
            out += ch
    # digits and punctuation count at 3n characters: the 11th of `1_1_1_1_1_1` repeats 9 of them
    assert spell.vetoed(guard, '{"v":"' + "1_1_1_1_1_", "1")
    assert not spell.vetoed(guard, '{"v":"' + "1_1_1_1_1", "_")


def test_a_copy_is_only_as_long_as_the_text_has_it():
    def refused(text: str, value: str) -> bool:
        guard, spell = guard_for(text)
        return any(spell.vetoed(guard, '{"v":"' + value[:i], value[i]) for i in range(len(value)))

    assert not refused("name: XXXX XXXX XXXX XXXX, ok", "XXXX XXXX XXXX XXXX")
    assert refused("name: XXXX XXXX, ok", "XXXX XXXX XXXX XXXX")  # more of them than the text has


def test_a_dropped_draft_is_rescanned():
    """The guard keeps its scan between calls; a shorter or different output (a draft cut back)
    gives the same answers as a fresh guard."""
    guard, spell = guard_for("text")
    assert not spell.vetoed(guard, '{"a":"xyzxy', "q")
    assert spell.vetoed(guard, '{"a":"xyzxy', "z")
    assert not spell.vetoed(guard, '{"a":1,"b":"xy', "z")  # same length as before, another tail
    assert spell.vetoed(guard, '{"a":1,"b":"xyzxy', "z")
    assert not spell.vetoed(guard, '{"a":"xy', "z")
    fresh, _ = guard_for("text")
    assert spell.vetoed(fresh, '{"a":"xyzxy', "z") and spell.vetoed(guard, '{"a":"xyzxy', "z")


def test_the_guard_pickles_without_its_scan_mattering():
    guard, spell = guard_for("text")
    spell.vetoed(guard, '{"a":"xyzxy', "z")
    there = pickle.loads(pickle.dumps(guard))
    assert spell.vetoed(there, '{"a":"xyzxy', "z") and not spell.vetoed(there, '{"b":"xy', "z")


def test_the_kept_scan_answers_as_a_fresh_guard():
    """One guard asked along random outputs that grow, lose tails (dropped drafts) and change, gives
    the answers a new guard gives for each output (the kept scan and n-gram counts are exact)."""
    rng = random.Random(7)
    alphabet, weights = 'ab x1"\\,', [8, 8, 4, 4, 3, 1, 1, 1]  # strings of a few letters, now and then closed
    kept, spell = guard_for("ab ab x")
    output, refused = '{"s":"', 0
    for _ in range(3000):
        nxt = rng.choices(alphabet, weights)[0]
        fresh, _ = guard_for("ab ab x")
        answer = spell.vetoed(kept, output, nxt)
        assert answer == spell.vetoed(fresh, output, nxt), (output, nxt)
        refused += answer
        if rng.random() < 0.15 and len(output) > 8:
            output = output[:rng.randrange(6, len(output))]  # a draft cut back
        else:
            output += nxt
    assert refused > 100  # the walk meets many repeats
