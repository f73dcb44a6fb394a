"""Dates a text spells, read as (year, month, day): the grounding check's notion of "the same date"."""
import pytest

from kvx.grounding import Grounding
from kvx.text_dates import as_dates, dates_in


@pytest.mark.parametrize("text", ["on March 5th, 2024 I called", "Mar. 5 2024", "5 March 2024", "the 5th of March, 2024",
                                  "2024-03-05", "2024/03/05", "03/05/2024", "5.3.2024", "3/5/24"])
def test_each_spelling_of_a_date_holds_its_iso_form(text):
    assert (2024, 3, 5) in dates_in(text)


def test_ambiguous_numeric_dates_give_both_readings_and_impossible_ones_none():
    assert dates_in("paid 04/07/2023") == {(2023, 4, 7), (2023, 7, 4)}
    assert dates_in("paid 13/07/2023") == {(2023, 7, 13)}
    assert dates_in("order 2024-13-40, March 5 (no year), 12/2024, v1.2.3, phone 555-12-3456") == set()


def test_a_value_is_a_date_only_as_a_whole():
    assert as_dates(" March 5, 2024 ") == {(2024, 3, 5)}
    assert as_dates("2024-03-05") == {(2024, 3, 5)}
    assert as_dates("due 2024-03-05") == set() and as_dates("Marchant 5 2024") == set()


@pytest.mark.parametrize("value,held", [("2024-03-05", True), ("03/05/2024", True), ("March 5, 2024", True),
                                        ("2024-03-06", False), ("2023-03-05", False), ("2024-05-03", False)])
def test_grounding_holds_a_date_the_text_spells_otherwise(value, held):
    g = Grounding({("due",): "string"})
    text = "Invoice dated March 5th, 2024, payable within 30 days."
    assert g.ungrounded({"due": value}, text) == ([] if held else [(("due",), ("due",), value)])
