"""The body of an array rule for one alternative: `[`, elements, `]`.

Position i's element obeys every piece's prefixItems[i] (draft <= 2019: items[i]), else its items
(additionalItems after an items array), else unevaluatedItems where nothing in the piece's scope
evaluates index i. `contains` counts: an element either matches the contains schema (counted) or not
(only where maxContains needs the distinction, by its negation); min/maxContains bound the count.
Node (i, c) of the element graph: i elements written (i stops where the positions become alike),
c counted. uniqueItems is left to the check after generation (kvx/grammar/schema/keywords.py), except
where every element is one of a few scalars (an enum of tags): the nodes are then the sets of values
written, so none repeats.
"""
from __future__ import annotations

from kvx.grammar.automata import regex_ast as ra
from kvx.grammar.errors import UnsupportedSchema
from kvx.grammar.schema.containers import Body
from kvx.grammar.schema.keywords import LONG_COUNT
from kvx.grammar.schema.scalars import count_keyword

MAX_UNIQUE_VALUES = 6  # uniqueItems over this many enum values stays post-checked (2^n sets written)


class ArrayBody(Body):

    def _prefix(self, i: int) -> tuple[str, int]:
        """(keyword, length) of piece i's per-position schemas."""
        node = self.nodes[i]
        if isinstance(node.get("items"), list):
            return "items", len(node["items"])
        return "prefixItems", len(node.get("prefixItems", []))

    def _tail(self, i: int) -> str | None:
        """The keyword that covers piece i's positions past its prefix."""
        node = self.nodes[i]
        if isinstance(node.get("items"), list):
            return "additionalItems" if "additionalItems" in node else None
        return "items" if "items" in node else None

    def _evaluated(self, index: int, i: int) -> bool:
        """Does a piece in i's scope evaluate position `index` (prefix, items, nested unevaluated*)?"""
        for j in self.scope[i]:
            if index < self._prefix(j)[1] or self._tail(j) is not None:
                return True
            if j != i and "unevaluatedItems" in self.nodes[j]:
                return True
        return False

    def _element(self, index: int) -> tuple[list, list]:
        """(schemas position `index` must obey, unevaluatedItems schemas a contains match waives)."""
        base, waivable = [], []
        for i, (p, node) in enumerate(zip(self.alt, self.nodes)):
            kw, n = self._prefix(i)
            tail = self._tail(i)
            if index < n:
                base.append(f"{p.ptr}/{kw}/{index}")
            elif tail is not None:
                base.append(f"{p.ptr}/{tail}")
            elif "unevaluatedItems" in node and not self._evaluated(index, i):
                contains_in_scope = any("contains" in self.nodes[j] for j in self.scope[i])
                (waivable if contains_in_scope else base).append(f"{p.ptr}/unevaluatedItems")
        return base, waivable

    def _contains(self):
        """(pointer, minContains, maxContains) of the one contains schema, or None."""
        found = []
        for i, (p, node) in enumerate(zip(self.alt, self.nodes)):
            if "contains" not in node:
                continue
            lo = count_keyword(node, "minContains", self._where(i), 1)
            hi = count_keyword(node, "maxContains", self._where(i), None)
            found.append((f"{p.ptr}/contains", lo, hi))
        if len({f[0] for f in found}) > 1:
            where = self._where(0)
            raise UnsupportedSchema(f"unsupported keyword 'contains' at {where} (two contains schemas on one "
                                    "array)", "contains", where)
        return found[0] if found else None

    def build(self) -> ra.Node:
        lo, hi, known = 0, None, 0
        for i, node in enumerate(self.nodes):
            lo = max(lo, count_keyword(node, "minItems", self._where(i), 0))
            m = count_keyword(node, "maxItems", self._where(i), None)
            hi = m if hi is None or (m is not None and m < hi) else hi
            known = max(known, self._prefix(i)[1])
        if hi is not None and hi < lo:
            return ra.NOTHING
        lo, hi = self.s.notes.long_bounds([(p.ptr, node) for p, node in zip(self.alt, self.nodes)], lo, hi,
                                          LONG_COUNT, ("minItems", "maxItems"), f"over {LONG_COUNT}")
        contains = self._contains()
        c_lo, c_hi = (contains[1], contains[2]) if contains else (0, None)
        if c_hi is not None and c_hi < c_lo:
            return ra.NOTHING
        c_top = c_hi if c_hi is not None else c_lo
        unique_pieces = [p.ptr for p, node in zip(self.alt, self.nodes) if node.get("uniqueItems") is True]
        if unique_pieces:
            unique = self._unique(lo, hi) if contains is None and known == 0 else None
            if unique is not None:
                return unique
            for ptr in unique_pieces:
                self.s.notes.post_check("uniqueItems", ptr, "the automaton cannot compare items")
        positions = hi if hi is not None else max(known, lo, 1)  # i == positions: the loop (if unbounded)
        options = {}  # index -> [(element value, counted)]
        for index in range(min(positions, known) + 1):
            options[index] = self._options(index, contains)
        ws, sep = self.s.ws, ra.seq(ra.lit(","), self.s.ws)
        node = lambda i, c: i * (c_top + 1) + c
        edges = []
        for i in range(positions + (1 if hi is None else 0)):
            here, nxt = min(i, positions), min(i + 1, positions)
            for value, counted in options[min(i, known)]:
                for c in range(c_top + 1):
                    after = c + counted if c_hi is not None else min(c + counted, c_top)
                    if after > c_top:
                        continue
                    edges.append((node(here, c), node(nxt, after), ra.seq(sep if i else ra.EMPTY, value, ws)))
        finals = tuple(node(i, c) for i in range(lo, positions + 1) for c in range(c_lo, c_top + 1))
        body = ra.Graph((positions + 1) * (c_top + 1), tuple(edges), finals)
        return ra.seq(ra.lit("["), ws, body, ra.lit("]"))

    def _unique(self, lo: int, hi: int | None) -> ra.Node | None:
        """uniqueItems where every element is one of a few scalars: node = the set of values written
        (a bit each), so none is written twice; None where the elements are not such a list."""
        base, waivable = self._element(0)
        if waivable:
            return None
        values = self.s.finite_scalars(tuple(base))
        if values is None or len(values) > MAX_UNIQUE_VALUES:
            return None
        top = len(values) if hi is None else min(hi, len(values))
        if lo > top:
            return ra.NOTHING
        ws, sep = self.s.ws, ra.seq(ra.lit(","), self.s.ws)
        edges = [(seen, seen | 1 << k, ra.seq(sep if seen else ra.EMPTY, ra.lit(v), ws))
                 for seen in range(1 << len(values)) if seen.bit_count() < top
                 for k, v in enumerate(values) if not seen >> k & 1]
        finals = tuple(seen for seen in range(1 << len(values)) if lo <= seen.bit_count() <= top)
        return ra.seq(ra.lit("["), ws, ra.Graph(1 << len(values), tuple(edges), finals), ra.lit("]"))

    def _options(self, index: int, contains) -> list[tuple[ra.Node, int]]:
        base, waivable = self._element(index)
        context = self.s.member_context(self.context, index=index)
        if contains is None:
            return [(self.s.value(tuple(base + waivable), context), 0)]
        ptr, _, c_hi = contains
        counted = self.s.value(tuple(base + [ptr]), context)
        rest = base + waivable
        if c_hi is not None:
            rest.append(self.s.negation(ptr))
        out = [(counted, 1), (self.s.value(tuple(rest), context), 0)]
        return [(v, k) for v, k in out if not ra.is_nothing(v)]
