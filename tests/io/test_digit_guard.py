"""Digits in free text come from the text (kvx/digit_guard.py): which runs are held, which strings
are looked at, and tokens that write several characters at once."""
import pickle

from char_vocab import Spell

from kvx.digit_guard import DigitGuard, held_runs, shaped_places
from kvx.json_cursor import JsonCursor
from kvx.spelling import Spelling

CHARS = '{}":,[]. -_/\\0123456789abcdefghijklmnopqrstuvwxyz'
SCHEMA = {"type": "object", "properties": {
    "summary": {"type": "string"}, "name": {"type": ["string", "null"]},
    "date": {"type": "string", "format": "date"}, "ref": {"type": ["string", "null"], "pattern": "^[a-z0-9]+$"},
    "plan": {"enum": ["v1", "v2"]}, "count": {"type": "integer"},
    "notes": {"type": "array", "items": {"type": "string"}},
    "opt": {"anyOf": [{"type": "string", "format": "date-time"}, {"type": "null"}]}}}
TEXT = "Order 58213 of 1,200 units arrived on 2023/05/04; call 555 0100."


def guard(text: str = TEXT) -> tuple[DigitGuard, Spell]:
    spell = Spell(CHARS)
    return DigitGuard(text, JsonCursor(spell.spelling), shaped_places(SCHEMA)), spell


def test_held_runs_are_the_texts_digits_and_grouped_numbers_joined():
    held = held_runs(TEXT)
    for run in (b"58213", b"582", b"1200", b"2023", b"05", b"0100", b"555"):
        assert run in held, run
    for run in (b"1234", b"12000", b"2024", b"5555", b"213058"):  # not within one run of the text
        assert run not in held, run
    assert held_runs("no digits at all") == b"||"


def test_a_run_the_text_lacks_is_refused_at_its_first_digit_that_leaves_the_text():
    g, spell = guard()
    assert not spell.vetoed(g, '{"summary":"order ', "5")
    assert not spell.vetoed(g, '{"summary":"order 5821', "3")
    assert spell.vetoed(g, '{"summary":"order 58213', "4")  # 582134: longer than the text's run
    assert spell.vetoed(g, '{"summary":"order 12', "3")  # 123 is nowhere in the text
    assert not spell.vetoed(g, '{"summary":"1200 units in 202', "3")  # "1,200" counts as 1200
    assert spell.vetoed(g, '{"summary":"in 202', "4")
    assert not spell.vetoed(g, '{"summary":"order 58213', " ")  # a word after it: fine
    assert spell.vetoed(g, '{"summary":"v2_1_1_11_', "9")  # 9 is not in the text at all
    assert spell.vetoed(g, '{"notes":["ok","id 4', "4")  # array items, by place
    assert spell.vetoed(g, '{"name":"xl-9', "9")


def test_keys_numbers_and_shaped_strings_are_left_alone():
    g, spell = guard()
    assert not spell.vetoed(g, '{"count":123', "4")  # a JSON number: the grammar's (and --ungrounded's)
    assert not spell.vetoed(g, '{"date":"2024-0', "9")  # format date: may normalise "May 4th"
    assert not spell.vetoed(g, '{"ref":"ab9', "9")  # a pattern: --copy-codes' affair
    assert not spell.vetoed(g, '{"plan":"v', "1")  # an enum
    assert not spell.vetoed(g, '{"opt":"1999', "9")  # Optional[datetime]
    assert not spell.vetoed(g, '{"k9', "9")  # a key
    assert not guard("no digits")[0].vetoes(Spell(CHARS).ids('{"summary":"a'), Spell(CHARS).chars.index("b"))


def test_tokens_of_several_characters_and_escapes():
    tokens = [b'{"summary":"', b"order ", b"58", b"213", b"2134", b'9"', b"9 ", b"\\", b"u0039", b'"}', b"12,", b"00"]
    spelling = Spelling(tokens)
    g = DigitGuard(TEXT, JsonCursor(spelling), shaped_places(SCHEMA))
    ids = {t: i for i, t in enumerate(tokens)}
    out = [ids[b'{"summary":"'], ids[b"order "]]
    assert not g.vetoes(out, ids[b"58"])
    assert not g.vetoes(out + [ids[b"58"]], ids[b"213"])
    assert g.vetoes(out + [ids[b"58"]], ids[b"2134"])  # 582134
    assert g.vetoes(out, ids[b"9 "])  # a digit before the space
    assert not g.vetoes(out + [ids[b"58"], ids[b"213"]], ids[b'"}'])  # the string's end
    assert g.vetoes(out, ids[b'9"'])  # the digit comes before the closing quote
    assert not g.vetoes(out + [ids[b"\\"]], ids[b"u0039"])  # an escape's hex digits are not a number
    assert not g.vetoes(out, ids[b"12,"]) and not g.vetoes(out + [ids[b"12,"]], ids[b"00"])  # 12,00: runs 12 and 00


def test_the_guard_follows_a_dropped_draft_and_pickles():
    g, spell = guard()
    assert spell.vetoed(g, '{"summary":"order 58213', "4")
    assert not spell.vetoed(g, '{"summary":"order 5', "8")  # the output lost its tail: rescanned
    again = pickle.loads(pickle.dumps(g))
    assert again.vetoes(spell.ids('{"summary":"order 12'), spell.chars.index("3"))


def test_a_long_value_is_read_at_its_end():
    g, spell = guard()
    filler = "word " * 40  # past the bytes the guard reads back
    assert not spell.vetoed(g, '{"summary":"' + filler + "order 5821", "3")
    assert spell.vetoed(g, '{"summary":"' + filler + "order 58213", "4")
    assert spell.vetoed(g, '{"summary":"1 ' + filler + "9", "9")
