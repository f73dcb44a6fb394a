"""`\\d` and `\\w` in the two readings of a pattern: ECMA-262's (ASCII) and Python's re (the record
check's; Unicode: Arabic-Indic digits and accented letters are in).

Narrow, a class holds what both readings put in it; wide, what either may. Spelled in every JSON
form, Python's exact sets are large (all its non-word characters: 3,500 states, 0.27 s), so each
side keeps to what spells small and is still sound: wide `\\d` is the ASCII digits and every
character from U+0660 (the first non-ASCII digit) on, wide `\\w` the ASCII word characters and all
non-ASCII ones; narrow `\\D` is the BMP's characters that Python's re finds no digit, narrow `\\W`
its non-word characters below U+0800 and among the general and CJK punctuation. Python's sets are
found by running `re` itself over those ranges, once a process, so they are exactly the running
Python's Unicode database.
"""
from __future__ import annotations

import re
from functools import lru_cache

from kvx.grammar.schema import charset as cs

ASCII = {"d": ((0x30, 0x39),), "w": ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A))}
WIDE = {"d": cs.intersect(cs.union(ASCII["d"], ((0x660, cs.MAX_CP),)), cs.ANY),
        "w": cs.intersect(cs.union(ASCII["w"], ((0x80, cs.MAX_CP),)), cs.ANY)}
SURELY_OUTSIDE_WITHIN = {"d": ((0, 0xFFFF),), "w": ((0, 0x7FF), (0x2000, 0x206F), (0x3000, 0x303F))}


def reading(letter: str, wide: bool) -> tuple:
    """The code points of the class escape `\\d`, `\\D`, `\\w` or `\\W`, read narrow or wide."""
    low, positive = letter.lower(), letter.islower()
    if positive:
        return WIDE[low] if wide else ASCII[low]
    return cs.complement(ASCII[low]) if wide else surely_outside(low)


@lru_cache(maxsize=None)
def surely_outside(letter: str) -> tuple:
    """The characters within SURELY_OUTSIDE_WITHIN that Python's re leaves out of `\\d` (`\\w`);
    ECMA-262's ASCII class leaves them out too."""
    ranges = []
    for lo, hi in cs.intersect(SURELY_OUTSIDE_WITHIN[letter], cs.ANY):
        text = "".join(map(chr, range(lo, hi + 1)))
        ranges += [(lo + m.start(), lo + m.end() - 1) for m in re.finditer(rf"[^\{letter}]+", text)]
    return cs.normalise(ranges)
