"""The ECMA-262 regex subset JSON Schema `pattern` uses -> byte-level regex AST.

Parsed at the character level (code point classes), then every class is mapped through an
encoder: by default to all its JSON-string spellings, so the automaton runs on the JSON text of
the string while the pattern means the decoded value. `^`/`$` are honoured at the start/end of
top-level branches (an alternation or optional group holding one at a branch's edge is split:
`(^|-)x(-|$)`, `^/(a$)?`; a branch with one that cannot hold, `a$b`, matches nothing) and a `^`
opening a lookahead; an unanchored side is padded with "any characters" (search semantics).
Lookaheads keep the words of what follows them that start (`?=`) or do not start (`?!`) with a
match of theirs (schema/lookaheads.py): anywhere in a branch, in groups and bounded repeats, and
the tempered `((?!x).)*` before the end. Word boundaries `\\b`/`\\B` are marked where they sit and
resolved against the characters around them (schema/word_bounds.py). Python's inline flags `(?i)`
and `(?s)` at the start, and `(?i:...)` groups (not ECMA-262's, but the record check runs Python's re,
which reads them) fold letters into every case Python pairs them in (charset.case_closed).
Unicode property escapes (`\\p{Letter}`, `\\P{Lu}`) are the code points the `regex` package gives them,
as the record check reads them (schema/unicode_properties.py). Lookbehinds, backreferences and other
inline flags raise UnsupportedSchema.
"""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Literal

from kvx.grammar.schema import charset as cs
from kvx.grammar.automata import deadline
from kvx.grammar.automata import regex_ast as ra
from kvx.grammar.automata.compose import fast_compile
from kvx.grammar.automata.determinize import DEFAULT_MAX_STATES
from kvx.grammar.schema import python_classes, strings, word_bounds
from kvx.grammar.errors import TooLarge, UnsupportedSchema, too_large
from kvx.grammar.schema.anchors import (has_anchor, loosened, opening_anchored_looks, split_edge, strip_all,
                                       without_impossible)
from kvx.grammar.schema.lookaheads import LookaheadError, Spelling, has_lookahead, holds, with_rest
from kvx.grammar.schema.unicode_properties import UnknownProperty, escape_ranges

WORD = python_classes.ASCII["w"]  # word boundaries read ASCII word characters in both readings
# \s as Python's re reads it (the record check): ECMA-262's less U+FEFF, plus the separators
# U+001C-001F and U+0085 (str.isspace). Read as ECMA-262, "2\ufeffhours" passed `^\d+\s(hours?)$`.
SPACE = cs.normalise([(0x09, 0x0D), (0x1C, 0x20), (0x85, 0x85), (0xA0, 0xA0), (0x1680, 0x1680),
                      (0x2000, 0x200A), (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000)])
DOT = cs.subtract(cs.ANY, cs.normalise([(0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029)]))
PYTHON_DOT = cs.subtract(cs.ANY, ((0x0A, 0x0A),))
CLASS_ESCAPES = frozenset("dDwWsS")


def class_escape(letter: str, wide: bool) -> tuple:
    r"""The code points of `\d`, `\W`, ... ECMA-262 reads `\d` and `\w` as ASCII, Python's re (the
    record check) as Unicode: read narrow, a class holds what both put in it, read wide, what
    either may (python_classes), for a pattern whose matches are subtracted (`not`, the keys
    outside patternProperties). `\s` is Python's in both."""
    if letter in "sS":
        return SPACE if letter == "s" else cs.complement(SPACE)
    return python_classes.reading(letter, wide)


CONTROL_ESCAPES = {"t": 0x09, "n": 0x0A, "v": 0x0B, "f": 0x0C, "r": 0x0D}
FLAGS = "imsxauL"  # inline flag letters Python's `re` knows (i and s are read, the others refused)


class PatternError(Exception):
    pass


class _Parser:
    """Recursive descent over the pattern; builds a char-level tree of tuples:
    ('cls', ranges) ('cat', items) ('alt', items) ('rep', node, lo, hi) ('bol',) ('eol',)
    ('look', positive, node) (a lookahead)."""

    def __init__(self, src: str, wide: bool = False):
        self.src = src
        self.i = 0
        self.wide = wide  # class_escape's reading; flipped inside `[^...]` and `(?!...)`
        self.ignore_case = False  # (?i): Python's and Rust's inline flag, not ECMA-262's
        self.dot_all = False  # (?s): `.` matches line ends too

    def peek(self, k: int = 0):
        j = self.i + k
        return self.src[j] if j < len(self.src) else None

    def take(self) -> str:
        c = self.src[self.i]
        self.i += 1
        return c

    def parse(self):
        node = self.alternation()
        if self.i != len(self.src):
            raise PatternError(f"unbalanced ')' at offset {self.i}")
        return node

    def alternation(self):
        branches = [self.sequence()]
        while self.peek() == "|":
            self.take()
            branches.append(self.sequence())
        return branches[0] if len(branches) == 1 else ("alt", branches)

    def sequence(self):
        items = []
        while self.peek() is not None and self.peek() not in "|)":
            atom = self.atom()
            if atom != ("flags",):
                items.append(self.quantified(atom))
        return ("cat", items)

    def quantified(self, atom):
        while True:
            c = self.peek()
            if c in ("*", "+", "?"):
                self.take()
                lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
            elif c == "{" and self._brace_quantifier() is not None:
                lo, hi = self._brace_quantifier(consume=True)
            else:
                return atom
            if atom[0] in ("bol", "eol", "wordb"):
                raise PatternError("quantified anchor")
            if self.peek() == "?":  # lazy: same language
                self.take()
            if hi is not None and hi < lo:
                raise PatternError("quantifier {n,m} with m < n")
            atom = ("rep", atom, lo, hi)

    def _brace_quantifier(self, consume: bool = False):
        j = self.i + 1
        k = j
        while k < len(self.src) and self.src[k].isdigit():
            k += 1
        if k == j:
            return None
        lo = int(self.src[j:k])
        hi = lo
        if k < len(self.src) and self.src[k] == ",":
            k += 1
            m = k
            while k < len(self.src) and self.src[k].isdigit():
                k += 1
            hi = int(self.src[m:k]) if k > m else None
        if k >= len(self.src) or self.src[k] != "}":
            return None
        if consume:
            self.i = k + 1
        return lo, hi

    def atom(self):
        c = self.take()
        if c == "^":
            return ("bol",)
        if c == "$":
            return ("eol",)
        if c == ".":  # ECMA-262's `.` leaves out \r, U+2028 and U+2029 too, Python's only \n
            return ("cls", cs.ANY if self.dot_all else PYTHON_DOT if self.wide else DOT)
        if c == "(":
            if self.peek() == "?":
                self.take()
                if self.peek() is not None and self.peek() in FLAGS + "-":
                    return self._flagged()
                kind = self.take() if self.peek() is not None else ""
                if kind in ("=", "!"):
                    self.wide ^= kind == "!"  # what must not follow is read the other way
                    inner = self.alternation()
                    self.wide ^= kind == "!"
                    if self.peek() != ")":
                        raise PatternError("missing ')'")
                    self.take()
                    return ("look", kind == "=", inner)
                if kind == "<" and self.peek() not in ("=", "!"):
                    while self.peek() not in (">", None):
                        self.take()
                    self.take()
                elif kind == "<":
                    raise PatternError("lookbehind assertions")
                elif kind != ":":  # (?m), (?x) and the like
                    raise PatternError(f"inline flags '(?{kind}'" if kind.isalpha() else "unknown group '(?'")
            inner = self.alternation()
            if self.peek() != ")":
                raise PatternError("missing ')'")
            self.take()
            return inner
        if c == "[":
            return ("cls", self.char_class())
        if c == "\\":
            letter = self.peek()
            atom = self.escape(in_class=False)
            if self.ignore_case and atom[0] == "cls" and letter not in CLASS_ESCAPES:  # `\d`, `\W`: as written
                return ("cls", cs.case_closed(atom[1]))
            return atom
        if c in "*+?":
            raise PatternError(f"nothing to repeat before {c!r}")
        if c == ")":
            raise PatternError("unbalanced ')'")
        return ("cls", cs.case_closed(self._literal(c)) if self.ignore_case else self._literal(c))

    def _flagged(self):
        """`(?i)` / `(?s)` at the start of the pattern (Python's global flags), or `(?i:...)`,
        `(?-i:...)` (a group with flags on or off)."""
        start = self.i - 2
        on, off, sign = set(), set(), True
        while self.peek() is not None and self.peek() in FLAGS + "-":
            c = self.take()
            if c == "-":
                sign = False
            else:
                (on if sign else off).add(c)
        unknown = sorted((on | off) - set("is"))
        if unknown:
            raise PatternError(f"inline flag '{unknown[0]}'")
        end = self.take() if self.peek() is not None else ""
        saved = self.ignore_case, self.dot_all
        self.ignore_case = ("i" in on) or (self.ignore_case and "i" not in off)
        self.dot_all = ("s" in on) or (self.dot_all and "s" not in off)
        if end == ")":
            if start != 0 or off:
                raise PatternError("inline flags not at the start of the pattern")
            return ("flags",)  # nothing to match: the sequence drops it
        if end != ":":
            raise PatternError("unknown group '(?'")
        inner = self.alternation()
        if self.peek() != ")":
            raise PatternError("missing ')'")
        self.take()
        self.ignore_case, self.dot_all = saved
        return inner

    def _literal(self, c: str) -> tuple:
        cp = ord(c)
        return ((cp, cp),)

    def escape(self, in_class: bool):
        if self.peek() is None:
            raise PatternError("trailing backslash")
        c = self.take()
        if c in CLASS_ESCAPES:
            return ("cls", class_escape(c, self.wide))
        if c in CONTROL_ESCAPES:
            return ("cls", ((CONTROL_ESCAPES[c],) * 2,))
        if c == "b" and in_class:
            return ("cls", ((8, 8),))
        if c in "bB":
            return ("wordb", c == "b")
        if c == "0" and not (self.peek() or "").isdigit():
            return ("cls", ((0, 0),))
        if c.isdigit():
            raise PatternError("backreferences")
        if c == "k" and self.peek() == "<":
            raise PatternError("named backreferences")
        if c in "pP" and self.peek() == "{":
            end = self.src.find("}", self.i)
            if end < 0:
                raise PatternError("a Unicode property escape without its '}'")
            name, self.i = self.src[self.i + 1:end], end + 1
            try:
                return ("cls", escape_ranges(c, name))
            except UnknownProperty as e:
                raise PatternError(str(e)) from None
        if c == "c" and (self.peek() or "").isalpha():
            v = ord(self.take()) % 32
            return ("cls", ((v, v),))
        if c == "x" and self._hex_ahead(2):
            v = int(self.src[self.i:self.i + 2], 16)
            self.i += 2
            return ("cls", ((v, v),))
        if c == "u" and self._hex_ahead(4):
            v = int(self.src[self.i:self.i + 4], 16)
            self.i += 4
            if 0xD800 <= v <= 0xDBFF and self.src[self.i:self.i + 2] == "\\u":
                self.i += 2
                if self._hex_ahead(4):
                    lo = int(self.src[self.i:self.i + 4], 16)
                    if 0xDC00 <= lo <= 0xDFFF:
                        self.i += 4
                        v = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00)
                    else:
                        self.i -= 2
                else:
                    self.i -= 2
            return ("cls", ((v, v),))
        return ("cls", self._literal(c))  # identity escape: \. \/ \- ...

    def _hex_ahead(self, n: int) -> bool:
        part = self.src[self.i:self.i + n]
        return len(part) == n and all(ch in "0123456789abcdefABCDEF" for ch in part)

    def char_class(self) -> tuple:
        negate = self.peek() == "^"
        if negate:
            self.take()
            self.wide = not self.wide  # the members of a negated class are what is left out
        ranges: list = []
        categories: list = []  # `\d`, `\W`...: not case-folded under (?i), as Python's re reads them
        first = True
        while True:
            c = self.peek()
            if c is None:
                raise PatternError("missing ']'")
            if c == "]" and not first:
                self.take()
                break
            first = False
            if c == "\\" and self.peek(1) in CLASS_ESCAPES:
                categories.extend(self._class_atom())
                continue
            lo = self._class_atom()
            if self.peek() == "-" and self.peek(1) not in ("]", None):
                self.take()
                hi = self._class_atom()
                if len(lo) != 1 or len(hi) != 1 or lo[0][0] != lo[0][1] or hi[0][0] != hi[0][1]:
                    raise PatternError("class range with a class escape")
                if hi[0][0] < lo[0][0]:
                    raise PatternError("class range out of order")
                ranges.append((lo[0][0], hi[0][0]))
            else:
                ranges.extend(lo)
        out = cs.union(cs.case_closed(ranges) if self.ignore_case else ranges, categories)
        if negate:
            self.wide = not self.wide
            return cs.complement(out)
        return out

    def _class_atom(self) -> tuple:
        c = self.take()
        if c == "\\":
            return self.escape(in_class=True)[1]
        return self._literal(c)


def _to_ast(node, encode) -> ra.Node:
    kind = node[0]
    if kind == "cls":
        return encode(node[1])
    if kind == "cat":
        return ra.seq(*(_to_ast(n, encode) for n in node[1]))
    if kind == "alt":
        return ra.alt(*(_to_ast(n, encode) for n in node[1]))
    if kind == "rep":
        return ra.rep(_to_ast(node[1], encode), node[2], node[3])
    if kind == "wordb":
        return word_bounds.marker(node[1])
    if kind == "look":
        raise PatternError("lookaround assertions")
    raise PatternError("anchor in the middle of a pattern")


def _searched_tree(tree, encode, max_states: int = DEFAULT_MAX_STATES, wide: bool = False) -> ra.Node:
    """The top-level branches, each as the strings holding a match of it, grouped by how they are
    anchored: `en|de|ru|...` is one `.*(en|de|ru|...).*`, not a union of ten searches (a union the
    subset construction tracks branch by branch: 3^10 states before minimising). A branch with a
    lookahead is written with its rest (lookaheads.with_rest). `wide`: a closing `$` also holds
    before a final newline, as in Python's re (not in a branch with a lookahead)."""
    anything = ra.star(encode(cs.ANY))
    closing = ra.alt(ra.EMPTY, encode(cs.of("\n"))) if wide else ra.EMPTY
    groups: dict[tuple[bool, bool], list] = {}
    looked = []
    spelling = Spelling(to_ast=lambda t: _to_ast(t, encode), any_char=encode(cs.ANY), max_states=max_states,
                        starts_with=lambda t: _starts_with(t, encode, max_states))
    top = tree[1] if tree[0] == "alt" else [tree]
    for branch in [b for t in top for s in split_edge(t, "start") for b in split_edge(s, "end")]:
        branch, at_start = strip_all(branch, "start")
        branch, at_end = strip_all(branch, "end")
        split = opening_anchored_looks(branch)
        if at_start and split is not None:  # its opening lookaheads look from the string's start
            branch, split = split[0], None
        if has_anchor(branch):
            branch = without_impossible(branch)
            if branch is None:  # an anchor rules it out
                continue
            if has_anchor(branch):
                raise PatternError("anchor in the middle of a pattern")
        branch = loosened(branch, at_start, at_end)
        if has_lookahead(branch):
            end = ra.EMPTY if at_end else anything  # `$` as ECMA-262 reads it: the tempered token ends the string
            try:
                if split is None:
                    looked.append(ra.seq(ra.EMPTY if at_start else anything, with_rest(branch, end, spelling)))
                    continue
                looked.append(with_rest(split[0], end, spelling))  # the branch at the string's start
                if split[1] is not None:
                    looked.append(ra.seq(encode(cs.ANY), anything, with_rest(split[1], end, spelling)))
            except LookaheadError as err:
                raise PatternError(str(err)) from None
        else:
            groups.setdefault((at_start, at_end), []).append(_to_ast(branch, encode))
    return ra.alt(*(ra.seq(ra.EMPTY if at_start else anything, ra.alt(*bodies), closing if at_end else anything)
                    for (at_start, at_end), bodies in groups.items()), *looked)


def _starts_with(tree, encode, max_states: int):
    """The automaton of the strings that start with a match of a lookahead's `tree` (None: no string
    does). A `^` in it holds only at the string's start, which this automaton, the same wherever
    the lookahead sits, cannot tell: one opening a lookahead at the start is dropped before
    (opening_anchored_looks), any other is refused."""
    if holds(tree, ("bol",), in_lookaheads=True):
        raise PatternError("anchor ^ inside a lookahead")
    return fast_compile(_searched_tree(("cat", [("bol",), tree]), encode, max_states), max_states)


def pattern_ast(pattern: str, encode=strings.json_char) -> ra.Node:
    """Language of strings (spelled through `encode`) that contain a match of `pattern`."""
    tree = _Parser(pattern).parse()
    if not holds(tree, ("wordb",), in_lookaheads=True):
        return _searched_tree(tree, encode)
    dfa = _tree_dfa(tree, encode, DEFAULT_MAX_STATES)
    return ra.NOTHING if dfa is None else ra.Embed(dfa)


def _tree_dfa(tree, encode, max_states: int, wide: bool = False):
    """The automaton of the strings holding a match of the parse tree; its word boundaries, marked
    where they sit, resolved by word_bounds (not beside a lookahead, whose rest has no markers)."""
    dfa = fast_compile(_searched_tree(tree, encode, max_states, wide), max_states)
    if not holds(tree, ("wordb",), in_lookaheads=True):
        return dfa
    if holds(tree, ("look",)):
        raise PatternError("word boundary in a pattern with a lookahead")
    return word_bounds.resolve(dfa, encode(WORD), encode(cs.complement(WORD)), max_states)


# past the state cap, a pattern of a string value is tried again with every bounded repeat over this
# made unbounded (`[^/].{0,1023}` -> `[^/].*`: the count times the character's spellings is what
# is large); the pattern is then checked after generation
RELAX_OVER = 16


def _relaxed(node):
    """The parse tree with every repeat {lo,hi} whose hi is over RELAX_OVER made {min(lo,RELAX_OVER),}."""
    kind = node[0]
    if kind in ("cat", "alt"):
        return (kind, [_relaxed(n) for n in node[1]])
    if kind == "rep":
        _, inner, lo, hi = node
        if hi is not None and hi > RELAX_OVER:
            lo, hi = min(lo, RELAX_OVER), None
        return ("rep", _relaxed(inner), lo, hi)
    if kind == "look":
        return ("look", node[1], _relaxed(node[2]))
    return node


def _pattern_dfa(pattern: str, max_states: int, relax: bool, wide: bool):
    tree = _Parser(pattern, wide).parse()
    return _tree_dfa(_relaxed(tree) if relax else tree, strings.json_char, max_states, wide)


# When a pattern is read relaxed (a superset, see RELAX_OVER): "past-cap" where it is past the state
# cap as written (a value's own pattern), "always" (the lone key pattern of an object no other key may
# join, past the cap alone or once per member: objects.py); never for a set that is subtracted
Relax = Literal["no", "past-cap", "always"]


def pattern_dfa(pattern: str, pointer: str, max_states: int = 50_000, *, relax: Relax = "no", wide: bool = False):
    """DFA of JSON string bodies whose decoded value matches `pattern`; None if none can; read
    relaxed as `relax` says.

    Read narrow (the default), it holds the values both ECMA-262 and Python's re (the record
    check) find a match in: what a value may be. Read `wide`, those either finds one in: what is
    subtracted (`not: {pattern}`, the keys outside patternProperties), so that what is left matches
    in neither reading. See class_escape and _searched_tree."""
    try:
        wide = wide and reading_matters(pattern)
        dfa, err = _compiled(pattern, max_states, relax == "always", wide)
        if err is not None and relax == "past-cap":
            relaxed, still = _compiled(pattern, max_states, True, wide)
            if still is None:
                return relaxed
    except PatternError as e:
        raise UnsupportedSchema(f"unsupported pattern {pattern!r} ({e}) at {pointer}", "pattern", pointer) from None
    if err is not None:
        raise too_large(pointer, err, "pattern")
    return dfa


def written_states(pattern: str, max_states: int) -> int | None:
    """The states of `pattern`'s automaton as written (read narrow), None past the cap; PatternError
    for a pattern kvx cannot read."""
    dfa, err = _compiled(pattern, max_states, False, False)
    return None if err is not None else 0 if dfa is None else dfa.num_states


@lru_cache(maxsize=1024)
def relaxes(pattern: str) -> bool:
    """Whether relaxing changes `pattern` (it has a repeat bounded over RELAX_OVER); False for a
    pattern kvx cannot read (refused where it is built)."""
    try:
        tree = _Parser(pattern).parse()
    except PatternError:
        return False
    return _relaxed(tree) != tree


def is_relaxed(pattern: str, max_states: int) -> bool:
    """Whether `pattern` is past the cap as written and fits relaxed (pattern_dfa's "past-cap"). The
    arguments are spelt as pattern_dfa spells them: lru_cache keys a call by its arguments as given,
    so `_compiled(p, n, False)` would build again what `_compiled(p, n, False, False)` holds."""
    return _compiled(pattern, max_states, False, False)[1] is not None \
        and _compiled(pattern, max_states, True, False)[1] is None


CLASS_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\[dDwW]")  # an unescaped \d, \D, \w or \W


def reads_classes(pattern: str) -> bool:
    r"""Whether `pattern` holds a `\d`, `\D`, `\w` or `\W`, whose readings differ on non-ASCII digits
    and letters (a key's likely difference; `.` and `$` differ only on line breaks)."""
    return CLASS_ESCAPE.search(pattern) is not None


@lru_cache(maxsize=1024)
def reading_matters(pattern: str) -> bool:
    """Whether the wide reading of `pattern` differs from its narrow one."""
    tree = _Parser(pattern).parse()
    return holds(tree, ("eol",)) or _Parser(pattern, wide=True).parse() != tree


@lru_cache(maxsize=512)
def _compiled(pattern: str, max_states: int, relax: bool, wide: bool) -> tuple:
    """(the DFA, None) or (None, the cap's TooLarge). A deadline that passes propagates
    (deadline.check), so only the cap's verdicts are cached; the relaxed form is only built for a
    caller that takes it."""
    try:
        return _pattern_dfa(pattern, max_states, relax, wide), None
    except TooLarge as err:
        deadline.check()
        return None, err
