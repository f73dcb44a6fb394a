"""Free text cut at its maxLength ends at its last full sentence (kvx/cut_text.py)."""
import pytest

from kvx.cut_text import TextCut, at_sentence_end
from kvx.record_fields import pointer

CUT = "The card was charged twice. I called the bank and they said it is pending. Now the fee is still th"


@pytest.mark.parametrize("value,want", [
    (CUT, "The card was charged twice. I called the bank and they said it is pending."),
    ("Refund me. Please help! Why is my card still blocked? It has been two weeks now and",
     "Refund me. Please help! Why is my card still blocked?"),
    ('They said "we will call you." Nobody did. I waited for a whole month and then', 'They said "we will call you." Nobody did.'),
    ("Ends whole. This one too.", None),  # the last sentence is whole
    ("Dr. Smith of St. Louis told me the claim would be paid within a week but it never was and", None),  # early ends only
    ("no sentence ends anywhere in this value at all", None),
])
def test_a_value_at_its_bound_ends_at_its_last_full_sentence(value, want):
    assert at_sentence_end(value, 1, len(value)) == want


def test_a_value_short_of_its_bound_or_a_cut_under_min_length_stays():
    assert at_sentence_end(CUT, 1, len(CUT) + 1) is None  # the model ended it there itself
    assert at_sentence_end(CUT, 80, len(CUT)) is None  # what is left would be under minLength


def test_which_fields_are_free_text():
    schema = {"type": "object", "properties": {
        "summary": {"type": "string", "maxLength": 100},
        "note": {"type": ["string", "null"], "maxLength": 50, "minLength": 3},
        "opt": {"anyOf": [{"type": "string", "maxLength": 40}, {"type": "null"}]},
        "code": {"type": "string", "maxLength": 10, "pattern": "^[A-Z]+$"},
        "day": {"type": "string", "maxLength": 10, "format": "date"},
        "kind": {"type": "string", "maxLength": 10, "enum": ["a", "b"]},
        "free": {"type": "string"},  # no bound: the grammar never cuts it at one
        "long": {"type": "string", "maxLength": 5000},  # over 1024: left to the check, not cut by the grammar
        "mixed": {"type": ["string", "integer"], "maxLength": 9},
        "items": {"type": "array", "items": {"type": "object", "properties": {"text": {"type": "string", "maxLength": 30}}}},
    }}
    assert {pointer(p): b for p, b in TextCut.of(schema).fields.items()} == {
        "/summary": (0, 100), "/note": (3, 50), "/opt": (0, 40), "/items/*/text": (0, 30)}


def test_a_record_is_cut_where_its_values_ran_into_their_bound():
    schema = {"type": "object", "properties": {"summary": {"type": "string", "maxLength": len(CUT)},
                                               "tags": {"type": "array", "items": {"type": "string", "maxLength": 14}}}}
    record = {"summary": CUT, "tags": ["Very late. Bro", "short", "Yes. No more.", "Late. Broken i"]}
    cut, where = TextCut.of(schema).cut(record)
    assert cut == {"summary": CUT[:CUT.index("pending.") + 8], "tags": ["Very late.", "short", "Yes. No more.",
                                                                       "Late. Broken i"]}  # its end is too early
    assert [pointer(p) for p in where] == ["/summary", "/tags/*"]
    assert record["summary"] == CUT  # the record itself is left as it was
