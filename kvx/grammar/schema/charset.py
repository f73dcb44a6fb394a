"""Sets of Unicode code points as sorted, disjoint (lo, hi) ranges (char-level classes)."""
from __future__ import annotations

from bisect import bisect_right

from kvx.grammar.schema.case_groups import case_groups

MAX_CP = 0x10FFFF
SURROGATES = ((0xD800, 0xDFFF),)
ANY = ((0, 0xD7FF), (0xE000, MAX_CP))  # every Unicode scalar value


def normalise(ranges) -> tuple:
    out: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if hi < lo:
            continue
        if out and lo <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return tuple((a, b) for a, b in out)


def union(*sets) -> tuple:
    return normalise([r for s in sets for r in s])


def complement(ranges) -> tuple:
    """Scalar values (no surrogates) not in `ranges`."""
    out, nxt = [], 0
    for lo, hi in normalise(ranges):
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = max(nxt, hi + 1)
    if nxt <= MAX_CP:
        out.append((nxt, MAX_CP))
    return intersect(out, ANY)


def intersect(a, b) -> tuple:
    out = []
    for lo, hi in normalise(a):
        for lo2, hi2 in normalise(b):
            x, y = max(lo, lo2), min(hi, hi2)
            if x <= y:
                out.append((x, y))
    return normalise(out)


def subtract(a, b) -> tuple:
    return intersect(a, complement(b))


def of(text: str) -> tuple:
    return normalise((ord(c), ord(c)) for c in text)


def contains(ranges, cp: int) -> bool:
    return any(lo <= cp <= hi for lo, hi in ranges)


def case_closed(ranges) -> tuple:
    """`ranges` with every case variant of its members (IGNORECASE, inline flag `(?i)`)."""
    ranges = normalise(ranges)
    starts = [lo for lo, _ in ranges]

    def holds(cp: int) -> bool:
        k = bisect_right(starts, cp) - 1
        return k >= 0 and cp <= ranges[k][1]

    extra = [cp for group in case_groups() if any(map(holds, group)) for cp in group]
    return normalise([*ranges, *((cp, cp) for cp in extra)])
