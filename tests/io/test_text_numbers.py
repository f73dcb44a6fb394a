"""Numbers a text states, in digits or words: the grounding check's notion of "the same amount"."""
import pytest

from kvx.grounding import Grounding
from kvx.text_numbers import text_values


@pytest.mark.parametrize("text,number", [
    ("refund of twenty-five dollars", 25), ("two hundred and fifty", 250), ("fifteen hundred", 1500),
    ("a thousand times", 1000), ("five hundred thousand", 500_000), ("ninety nine", 99), ("$1,200.50", 1200.5),
    ("2.5 million", 2_500_000), ("3k", 3000), ("a 7% fee", 0.07), ("7 percent", 0.07), ("7%", 7)])
def test_each_way_of_writing_a_number(text, number):
    assert any(abs(v - number) < 1e-9 for v in text_values(text))


def test_separate_numbers_are_not_summed():
    values = text_values("between five and ten, one two three, twenty thirty")
    assert 15 not in values and 6 not in values and 50 not in values
    assert {5, 10, 1, 2, 3, 20, 30} <= set(values)


@pytest.mark.parametrize("value,held", [(250, True), (250.0, True), (0.07, True), (7, True), (25, False), (2507, False)])
def test_grounding_holds_an_amount_written_in_words(value, held):
    g = Grounding({("amount",): "number"})
    text = "They charged me two hundred and fifty dollars plus a 7% fee."
    assert g.ungrounded({"amount": value}, text) == ([] if held else [(("amount",), ("amount",), value)])
