"""Anchors (`^`, `$`) in a pattern's parse tree, read off its top-level branches: stripped from
their edges (as often as they repeat there), alternations and optional groups holding one at an
edge split into branches (`(^|-)x`, `^/(a$)?`), a branch whose anchor cannot hold recognised (it
matches nothing), a `^` opening a lookahead resolved by where the branch starts, and the repeats
on an unanchored side cut to their least count (search semantics make the rest redundant)."""
from __future__ import annotations

from kvx.grammar.schema.lookaheads import holds


def _strip(node, side: str):
    """Remove a ^ (side='start') or $ (side='end') from the edge of a branch: (node, anchored)."""
    kind = node[0]
    if kind == ("bol" if side == "start" else "eol"):
        return ("cat", []), True
    if kind == "cat":
        items = list(node[1])
        filled = [i for i, item in enumerate(items) if item != ("cat", [])]  # an empty group is no edge
        if not filled:
            return node, False
        idx = filled[0] if side == "start" else filled[-1]
        items[idx], anchored = _strip(items[idx], side)
        return ("cat", items), anchored
    if kind == "alt":
        stripped = [_strip(b, side) for b in node[1]]
        flags = {a for _, a in stripped}
        if len(flags) == 1:
            return ("alt", [b for b, _ in stripped]), flags.pop()
    return node, False


def strip_all(node, side: str):
    """_strip, as often as the edge holds an anchor (`^^a`, `^(?:^a)`: one `^`)."""
    node, anchored = _strip(node, side)
    again = anchored
    while again:
        node, again = _strip(node, side)
    return node, anchored


def split_edge(node, side: str) -> list:
    """`node` as branches whose `side` edge is no alternation holding an anchor: `a(/|$)` is `a/`
    and `a$`, so that _strip finds the `$` (an alternation without one stays whole)."""
    kind = node[0]
    if kind == "alt" and has_anchor(node):
        return [b for n in node[1] for b in split_edge(n, side)]
    if kind == "rep" and (node[2], node[3]) == (0, 1) and has_anchor(node):  # `(...$)?`: left out, or there
        return [("cat", []), *split_edge(node[1], side)]
    if kind == "cat":
        inner = [i for i, item in enumerate(node[1]) if item not in (("bol",), ("eol",), ("cat", []))]
        if inner:  # the edge past the anchors already there (`^(^a:)?b`)
            idx = inner[0] if side == "start" else inner[-1]
            edges = split_edge(node[1][idx], side)
            if len(edges) > 1:
                return [("cat", [*node[1][:idx], e, *node[1][idx + 1:]]) for e in edges]
    return [node]


def _min_length(node) -> int:
    kind = node[0]
    if kind == "cls":
        return 1
    if kind == "cat":
        return sum(map(_min_length, node[1]))
    if kind == "alt":
        return min(map(_min_length, node[1]), default=0)
    return node[2] * _min_length(node[1]) if kind == "rep" else 0


def _flat(node) -> list:
    return [x for item in node[1] for x in _flat(item)] if node[0] == "cat" else [node]


def anchor_cannot_hold(branch) -> bool:
    """A `^` after something that reads a character, or a `$` before one (no multiline mode): the
    branch matches nothing (`a$b`)."""
    items = _flat(branch)
    return any((item == ("bol",) and _min_length(("cat", items[:i])) > 0)
               or (item == ("eol",) and _min_length(("cat", items[i + 1:])) > 0) for i, item in enumerate(items))


def without_impossible(node):
    """`node` without the parts an anchor rules out, anywhere inside it (a sequence where a `^`
    follows something that reads a character, or a `$` precedes one); None if nothing is left.
    Gradle's certificate pattern, `^(?:-----BEGIN...\\s*^-----END...)+$`, written for a multiline
    mode it does not get: the group matches nothing, so the pattern matches no string."""
    kind = node[0]
    if kind == "cat":
        items = [without_impossible(item) for item in node[1]]
        if any(item is None for item in items) or anchor_cannot_hold(("cat", items)):
            return None
        return ("cat", items)
    if kind == "alt":
        branches = [b for b in map(without_impossible, node[1]) if b is not None]
        return ("alt", branches) if branches else None
    if kind == "rep":
        inner = without_impossible(node[1])
        if inner is None:
            return ("cat", []) if node[2] == 0 else None
        return ("rep", inner, node[2], node[3])
    return node


def opening_anchored_looks(branch):
    """For a branch that opens with lookaheads holding a `^` (which holds only at the string's start):
    (the branch where it starts the string, those `^` dropped; the branch elsewhere, where such a
    lookahead fails: a positive one rules it out (None), a negative one drops out), or None when it
    opens with none."""
    items = branch[1] if branch[0] == "cat" else [branch]
    at_start, later, found, k = [], [], False, 0
    while k < len(items) and items[k][0] == "look":
        _, positive, inner = items[k]
        inner, anchored = _strip(inner, "start")
        found |= anchored
        at_start.append(("look", positive, inner))
        if not anchored and later is not None:
            later.append(items[k])
        elif anchored and positive:
            later = None
        k += 1
    if not found:
        return None
    rest = list(items[k:])
    return ("cat", at_start + rest), None if later is None else ("cat", later + rest)


def has_anchor(node) -> bool:
    return holds(node, ("bol", "eol"))


def loosened(branch, at_start: bool, at_end: bool):
    """The branch with a repeat on an unanchored side cut to its least count: `.*` there takes the
    rest, so `.*\\$\\w{1,255}.*` holds the same strings as `.*\\$\\w.*` (GitLab's cache policy: past
    the deadline counted out to 255)."""
    items = list(branch[1]) if branch[0] == "cat" else [branch]
    for side, anchored in ((-1, at_end), (0, at_start)):
        while not anchored and items and items[side][0] == "rep":
            _, inner, lo, _ = items[side]
            if lo:
                items[side] = ("rep", inner, lo, lo)
                break
            items.pop(side)
    return ("cat", items)
