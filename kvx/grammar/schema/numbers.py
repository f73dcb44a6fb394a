"""Exact digit-range automata: integers in [lo, hi] and decimals compared against bounds.

Canonical integer spelling: -?(0|[1-9][0-9]*), never "-0". Bounded decimals are written without an
exponent (x ≥ m is not a regular property of mantissa/exponent pairs); unbounded numbers may use one.
"""
from __future__ import annotations

import math
from decimal import Decimal
from functools import lru_cache
from typing import Callable, Optional

import numpy as np

from kvx.grammar.automata import regex_ast as ra
from kvx.grammar.automata.determinize import compile_node, minimise, trim
from kvx.grammar.automata.dfa import DFA
from kvx.grammar.automata.dfa_ops import product
from kvx.grammar.errors import TooLarge

DIGIT = ra.byte_range(0x30, 0x39)
NONZERO = ra.byte_range(0x31, 0x39)


def dec_digit(a: int, b: int) -> ra.Node:
    return ra.byte_range(0x30 + a, 0x30 + b)


def fixed_range(lo: list[int], hi: list[int], digit: Callable[[int, int], ra.Node], base: int = 10) -> ra.Node:
    """Digit strings of exactly len(lo) digits whose value lies in [lo, hi] (same length)."""
    if not lo:
        return ra.EMPTY
    if lo[0] == hi[0]:
        return ra.seq(digit(lo[0], lo[0]), fixed_range(lo[1:], hi[1:], digit, base))
    n = len(lo) - 1
    low_tail_min = all(d == 0 for d in lo[1:])
    high_tail_max = all(d == base - 1 for d in hi[1:])
    a = lo[0] if low_tail_min else lo[0] + 1
    b = hi[0] if high_tail_max else hi[0] - 1
    parts = []
    if not low_tail_min:
        parts.append(ra.seq(digit(lo[0], lo[0]), fixed_range(lo[1:], [base - 1] * n, digit, base)))
    if a <= b:
        parts.append(ra.seq(digit(a, b), ra.rep(digit(0, base - 1), n, n)))
    if not high_tail_max:
        parts.append(ra.seq(digit(hi[0], hi[0]), fixed_range([0] * n, hi[1:], digit, base)))
    return ra.alt(*parts)


def _digits(v: int) -> list[int]:
    return [int(c) for c in str(v)]


def uint_range(lo: int, hi: Optional[int]) -> ra.Node:
    """Canonical non-negative integers (no leading zeros) in [lo, hi]; hi None = unbounded."""
    lo = max(lo, 0)
    if hi is not None and hi < lo:
        return ra.NOTHING
    parts = []
    width_lo = len(str(lo))
    width_hi = len(str(hi)) if hi is not None else width_lo
    for w in range(width_lo, width_hi + 1):
        a = max(lo, 10 ** (w - 1) if w > 1 else 0)
        b = 10 ** w - 1 if hi is None else min(hi, 10 ** w - 1)
        if a <= b:
            parts.append(fixed_range(_digits(a), _digits(b), dec_digit))
    if hi is None:  # every longer spelling
        parts.append(ra.seq(NONZERO, ra.rep(DIGIT, width_lo, None)))
    return ra.alt(*parts)


INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def within_int64(lo: Optional[int], hi: Optional[int]) -> tuple[int | None, int | None]:
    """[lo, hi] cut to the int64 range; as given where nothing of it is inside (the schema's bounds
    stand, and the writer names the value it cannot hold)."""
    a = INT64_MIN if lo is None else max(lo, INT64_MIN)
    b = INT64_MAX if hi is None else min(hi, INT64_MAX)
    return (a, b) if a <= b else (lo, hi)


def int_range(lo: Optional[int], hi: Optional[int]) -> ra.Node:
    """Canonical integers in [lo, hi] (None = unbounded on that side)."""
    if lo is None and hi is None:
        return ANY_INTEGER
    if (lo, hi) == (INT64_MIN, INT64_MAX):
        return _int64()
    return _int_range(lo, hi)


def _int_range(lo: Optional[int], hi: Optional[int]) -> ra.Node:
    parts = []
    if hi is None or hi >= 0:
        parts.append(uint_range(max(lo, 0) if lo is not None else 0, hi))
    if lo is None or lo < 0:
        neg_hi = None if lo is None else -lo  # magnitudes of the negative part
        neg_lo = 1 if hi is None or hi >= 0 else -hi
        if neg_hi is None or neg_lo <= neg_hi:
            parts.append(ra.seq(ra.lit("-"), uint_range(neg_lo, neg_hi)))
    return ra.alt(*parts)


@lru_cache(maxsize=1)
def _int64() -> ra.Node:
    """Every int64, composed once a process (a Parquet output's every integer slot holds it)."""
    return ra.Embed(compile_node(_int_range(INT64_MIN, INT64_MAX)))


# ---- decimals -------------------------------------------------------------------------------

FRACTION = ra.opt(ra.seq(ra.lit("."), ra.plus(DIGIT)))
EXPONENT = ra.seq(ra.chars("eE"), ra.opt(ra.chars("+-")), ra.plus(DIGIT))
UINT = ra.alt(ra.lit("0"), ra.seq(NONZERO, ra.star(DIGIT)))
ANY_NUMBER = ra.Embed(compile_node(ra.seq(ra.opt(ra.lit("-")), UINT, FRACTION, ra.opt(EXPONENT))))  # built once
ANY_INTEGER = ra.Embed(compile_node(ra.alt(ra.lit("0"), ra.seq(ra.opt(ra.lit("-")), NONZERO, ra.star(DIGIT)))))  # no -0


FLOAT64_EXACT_INT = 1 << 53  # every integer up to this magnitude is a float64


@lru_cache(maxsize=1)
def float64_exact() -> DFA:
    """JSON numbers a float64 holds as written or reads as a float anyway: an integer spelling
    (json.loads gives an int) only within +-2^53, anything with a fraction or an exponent."""
    sign = ra.opt(ra.lit("-"))
    return compile_node(ra.alt(ra.lit("-0"), _int_range(-FLOAT64_EXACT_INT, FLOAT64_EXACT_INT),
                               ra.seq(sign, UINT, ra.lit("."), ra.plus(DIGIT), ra.opt(EXPONENT)),
                               ra.seq(sign, UINT, EXPONENT)))


def _split(m: Decimal) -> tuple[int, str]:
    """Non-negative decimal -> (integer part, fraction digits without trailing zeros)."""
    text = format(m, "f")
    ip, _, fp = text.partition(".")
    return int(ip), fp.rstrip("0")


def _frac_ge(fd: str, strict: bool) -> ra.Node:
    """Fraction suffixes ('' or '.' digits+) whose value 0.F is >= 0.fd (> if strict)."""
    tail_any = ra.star(DIGIT)
    # digits strictly above fd at some position j, equal before
    parts = []
    for j, c in enumerate(fd):
        d = int(c)
        if d < 9:
            parts.append(ra.seq(ra.lit(fd[:j]), dec_digit(d + 1, 9), tail_any))
    # equal to fd, then more digits (nonzero somewhere if strict)
    if strict:
        parts.append(ra.seq(ra.lit(fd), ra.star(DIGIT), NONZERO, tail_any))
    else:
        parts.append(ra.seq(ra.lit(fd), tail_any))
    body = ra.alt(*parts)
    needs_digit = ra.seq(ra.lit("."), body)
    # the empty suffix has value 0: acceptable iff fd == '' and not strict; a body of '' is not
    # a valid fraction, so '.': body must be non-empty
    nonempty = _intersect_nonempty(needs_digit)
    if not fd and not strict:
        return ra.alt(ra.EMPTY, nonempty)
    return nonempty


def _frac_le(fd: str, strict: bool) -> ra.Node:
    """Fraction suffixes whose value 0.F is <= 0.fd (< if strict)."""
    tail_any = ra.star(DIGIT)
    parts = []
    for j, c in enumerate(fd):
        d = int(c)
        if d > 0:
            parts.append(ra.seq(ra.lit(fd[:j]), dec_digit(0, d - 1), tail_any))
    # a proper prefix of fd followed by nothing is smaller (fd has no trailing zeros)
    for j in range(len(fd)):
        parts.append(ra.lit(fd[:j]))
    if not strict:
        parts.append(ra.seq(ra.lit(fd), ra.star(ra.lit("0"))))
    body = ra.alt(*parts)
    nonempty = _intersect_nonempty(ra.seq(ra.lit("."), body))
    if fd or not strict:  # no fraction at all = .0, below any positive fd
        return ra.alt(ra.EMPTY, nonempty)
    return nonempty


def _intersect_nonempty(node: ra.Node) -> ra.Node:
    """Restrict '.'-suffixes to ones with at least one digit."""
    a = compile_node(node)
    b = compile_node(ra.seq(ra.lit("."), ra.plus(DIGIT)))
    if a is None or b is None:
        return ra.NOTHING
    d = product(a, b)
    return ra.NOTHING if d is None else ra.Embed(d)


def _unsigned_ge(m: Decimal, strict: bool) -> ra.Node:
    """Non-negative plain decimals I(.F)? with value >= m (> if strict), m >= 0."""
    ip, fd = _split(m)
    any_frac = FRACTION
    return ra.alt(ra.seq(uint_range(ip + 1, None), any_frac),
                  ra.seq(uint_range(ip, ip), _frac_ge(fd, strict)))


def _unsigned_le(m: Decimal, strict: bool) -> ra.Node:
    ip, fd = _split(m)
    below = ra.seq(uint_range(0, ip - 1), FRACTION) if ip > 0 else ra.NOTHING
    return ra.alt(below, ra.seq(uint_range(ip, ip), _frac_le(fd, strict)))


UNSIGNED = ra.seq(UINT, FRACTION)
NONZERO_UNSIGNED = ra.alt(ra.seq(ra.lit("0."), ra.star(DIGIT), NONZERO, ra.star(DIGIT)),
                          ra.seq(NONZERO, ra.star(DIGIT), FRACTION))


def decimal_ge(m: Decimal, strict: bool) -> ra.Node:
    """Plain decimals (no exponent, no negative zero) with value >= m (> if strict)."""
    if m >= 0:
        return _unsigned_ge(m, strict)
    # every non-negative value, plus negatives whose magnitude is <= |m| (< if strict)
    neg = _magnitude_nonzero(_unsigned_le(-m, strict))
    return ra.alt(UNSIGNED, ra.seq(ra.lit("-"), neg))


def decimal_le(m: Decimal, strict: bool) -> ra.Node:
    if m >= 0:
        return ra.alt(_unsigned_le(m, strict), ra.seq(ra.lit("-"), NONZERO_UNSIGNED))
    return ra.seq(ra.lit("-"), _magnitude_nonzero(_unsigned_ge(-m, strict)))


def _magnitude_nonzero(node: ra.Node) -> ra.Node:
    a, b = compile_node(node), compile_node(NONZERO_UNSIGNED)
    if a is None or b is None:
        return ra.NOTHING
    d = product(a, b)
    return ra.NOTHING if d is None else ra.Embed(d)


# ---- multipleOf -----------------------------------------------------------------------------

def _decimal_parts(m: Decimal) -> tuple[int, int]:
    """m = a / 10^d with a, d non-negative integers, d as small as possible."""
    sign, digits, exp = m.normalize().as_tuple()
    a = int("".join(map(str, digits)) or "0")
    return (a, -exp) if exp < 0 else (a * 10 ** exp, 0)


def multiple_of(m: Decimal, integer: bool, max_states: int) -> DFA:
    """Canonical plain spellings (no exponent) of the multiples of m > 0: integers
    -?(0|[1-9][0-9]*) if `integer`, else decimals with an optional fraction. A value x is a multiple
    of a/10^d when x*10^d is divisible by a: the automaton keeps that remainder digit by digit
    (fraction digits past the d-th must be 0)."""
    a, d = _decimal_parts(m)
    if integer:  # x * 10^d divisible by a  <=>  x divisible by a / gcd(a, 10^d)
        a, d = a // math.gcd(a, 10 ** d), 0
    frac_states = 0 if integer else (d + 1) * a
    n = 3 + a + frac_states
    if n > max_states:
        raise TooLarge(f"more than {max_states} DFA states (multipleOf {m})")
    start, minus, zero = 0, 1, 2
    rem = lambda r: 3 + r  # after a non-zero integer part
    frac = lambda j, r: 3 + a + j * a + r  # j fraction digits read
    trans = np.full((n, 256), -1, dtype=np.int32)
    acc = np.zeros(n, dtype=bool)
    digits = np.arange(0x30, 0x3A)
    trans[start, 0x2D] = minus
    trans[start, 0x30] = zero  # integers are never written -0
    if not integer:
        trans[minus, 0x30] = zero
    for s in (start, minus):
        trans[s, digits[1:]] = [rem(x % a) for x in range(1, 10)]
    acc[zero] = True
    for r in range(a):
        trans[rem(r), digits] = [rem((10 * r + x) % a) for x in range(10)]
        acc[rem(r)] = (r * 10 ** d) % a == 0
    if not integer:
        trans[zero, 0x2E] = frac(0, 0)
        for r in range(a):
            trans[rem(r), 0x2E] = frac(0, r)
            for j in range(d + 1):
                if j < d:
                    trans[frac(j, r), digits] = [frac(j + 1, (10 * r + x) % a) for x in range(10)]
                else:
                    trans[frac(j, r), 0x30] = frac(j, r)
                acc[frac(j, r)] = j > 0 and (r * 10 ** (d - j)) % a == 0
    trimmed = trim(trans, acc)
    t, acc2, s0 = minimise(*trimmed)
    return DFA(t, acc2, s0)
