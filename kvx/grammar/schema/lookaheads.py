"""Lookaheads in a pattern, as intersections with what follows them.

A lookahead looks at the rest of the string from its position: the rest of its branch, then what
may follow the match (nothing past a `$`, any characters otherwise). Writing a branch from the right,
that rest is a regex AST by the time the lookahead is met, and `(?=x)` keeps the words of the rest
that start with a match of x, `(?!x)` those that do not (a product of two automata). So a lookahead
may sit anywhere the rest is finite to write: in a sequence, in an alternation, in an optional or
bounded group (unrolled, up to MAX_UNROLL). In an unbounded repeat the rest runs through the loop
itself; the one form written out is the tempered token `((?!x).)*` (or `(?=x)`) right before the
end of the string: every non-empty suffix of the loop's span must not (must) start with x.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from kvx.grammar.automata import regex_ast as ra
from kvx.grammar.automata.compose import fast_compile
from kvx.grammar.automata.dfa import DFA
from kvx.grammar.automata.dfa_ops import product

MAX_UNROLL = 16  # copies of a bounded group holding a lookahead (each copy costs a product)


class LookaheadError(Exception):
    """A lookahead where its rest cannot be written out (the parser's PatternError says why)."""


@dataclass(frozen=True)
class Spelling:
    """How the pattern's pieces become automata: `to_ast` for a lookahead-free parse tree,
    `starts_with` for the strings that start with a match of a tree (None: no string does),
    `any_char` for one character in every spelling."""
    to_ast: Callable[[tuple], ra.Node]
    starts_with: Callable[[tuple], DFA | None]
    any_char: ra.Node
    max_states: int


def holds(node: tuple, kinds: tuple[str, ...], *, in_lookaheads: bool = False) -> bool:
    """Whether the parse tree has a node of one of `kinds` (or is one), outside lookaheads unless
    `in_lookaheads`."""
    kind = node[0]
    if kind in kinds:
        return True
    if kind in ("cat", "alt"):
        return any(holds(n, kinds, in_lookaheads=in_lookaheads) for n in node[1])
    if kind == "look":
        return in_lookaheads and holds(node[2], kinds, in_lookaheads=True)
    return kind == "rep" and holds(node[1], kinds, in_lookaheads=in_lookaheads)


def has_lookahead(node: tuple) -> bool:
    return holds(node, ("look",))


def with_rest(node: tuple, rest: ra.Node, sp: Spelling) -> ra.Node:
    """The strings that are a match of `node` followed by a word of `rest`, the lookaheads inside
    `node` checked against everything after them."""
    if not has_lookahead(node):
        return ra.seq(sp.to_ast(node), rest)
    kind = node[0]
    if kind == "cat":
        for item in reversed(node[1]):
            rest = with_rest(item, rest, sp)
        return rest
    if kind == "alt":
        return ra.alt(*(with_rest(branch, rest, sp) for branch in node[1]))
    if kind == "look":
        return _looked(node[1], node[2], rest, sp)
    _, item, lo, hi = node
    if hi is None:
        rest = _tempered(item, rest, sp)
        hi = lo
    elif hi > MAX_UNROLL:
        raise LookaheadError(f"lookahead in a group repeated up to {hi} times (at most {MAX_UNROLL})")
    for _ in range(hi - lo):  # the optional copies, innermost first: stop here or match one more
        rest = ra.alt(rest, with_rest(item, rest, sp))
    for _ in range(lo):
        rest = with_rest(item, rest, sp)
    return rest


def _looked(positive: bool, inner: tuple, rest: ra.Node, sp: Spelling) -> ra.Node:
    """The words of `rest` that start (positive) or do not start with a match of `inner`."""
    seen = sp.starts_with(inner)
    if seen is None:
        return ra.NOTHING if positive else rest
    following = fast_compile(rest, sp.max_states)
    if following is None:
        return ra.NOTHING
    kept = product(following, seen, "and" if positive else "minus", sp.max_states)
    return ra.NOTHING if kept is None else ra.Embed(kept.expand())


def _is_end(rest: ra.Node) -> bool:
    return isinstance(rest, ra.Seq) and not rest.items


def _tempered(item: tuple, rest: ra.Node, sp: Spelling) -> ra.Node:
    """`item*` followed by `rest`, for the tempered token: `item` is a lookahead then one character
    class, and `rest` is the end of the string."""
    if not _is_end(rest) or item[0] != "cat" or len(item[1]) != 2 or item[1][0][0] != "look" \
            or has_lookahead(item[1][1]) or item[1][1][0] != "cls":
        raise LookaheadError("lookahead in an unbounded repeat; only the tempered `((?!x).)*` right before the "
                             "end is read")
    (_, positive, inner), char = item[1]
    seen = sp.starts_with(inner)
    some = fast_compile(ra.plus(sp.any_char), sp.max_states)  # a non-empty suffix
    if positive:  # the suffixes that break the lookahead
        failing = some if seen is None else product(some, seen, "minus", sp.max_states)
    else:
        failing = None if seen is None else product(seen, some, "and", sp.max_states)
    run = fast_compile(ra.star(sp.to_ast(char)), sp.max_states)
    if failing is None:
        return ra.Embed(run)
    broken = fast_compile(ra.seq(ra.star(sp.any_char), ra.Embed(failing.expand())), sp.max_states)
    kept = product(run, broken, "minus", sp.max_states)
    return ra.NOTHING if kept is None else ra.Embed(kept.expand())
