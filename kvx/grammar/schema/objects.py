"""The body of an object rule for one alternative: `{`, members, `}`.

Declared properties come in `properties` order, optional ones may be left out; then, in any order,
the names only `required` lists (each once, all of them) and any number of other keys. The key space of the others is cut by the
patternProperties regexes they match (each region gets the conjunction of its schemas, or
additionalProperties / unevaluatedProperties where nothing matches), minus the declared names in
every spelling (`"a\\/b"` cannot smuggle in a declared `a/b`), within propertyNames. Where the schema
says nothing of other keys, none is written unless GrammarOptions.extra_keys is "schema". Members are
counted when minProperties/maxProperties ask for it. A finite automaton cannot stop two extra keys
from being equal; json.loads keeps the last, which still validates because both obey the same schema.
"""
from __future__ import annotations

from dataclasses import replace

from kvx.grammar.automata import deadline
from kvx.grammar.automata import regex_ast as ra
from kvx.grammar.automata.cdfa import CDFA
from kvx.grammar.automata.compose import fast_compile
from kvx.grammar.automata.dfa import DFA
from kvx.grammar.automata.dfa_ops import product
from kvx.grammar.automata.process_cache import ProcessCache
from kvx.grammar.errors import TooLarge, UnsupportedSchema, too_large
from kvx.grammar.schema import charset as cs
from kvx.grammar.schema import strings
from kvx.grammar.schema.containers import Body
from kvx.grammar.schema.key_names import body_without_names
from kvx.grammar.schema.refs import escape
from kvx.grammar.schema.regex_parse import RELAX_OVER, PatternError, reads_classes, relaxes, written_states
from kvx.grammar.schema.scalars import LENGTHS, LONG_WITH_PATTERN, count_keyword
from kvx.grammar.schema.values import dumps

MAX_REGIONS = 64  # non-empty key regions the patternProperties of one object cut (up to 2^n)
MAX_LOOSE = 6  # required names no `properties` declares, tracked as a set (2^n); past that, in order


class ObjectBody(Body):
    def __init__(self, slots, alt, context: tuple):
        super().__init__(slots, alt, context)
        self.rank = {k: i for i, k in enumerate(slots.key_order(context))}
        # each piece's patternProperties (read for every key: openapi's 4,000 keys x 40 pieces)
        self.patterns = [pats if isinstance(pats := node.get("patternProperties", {}), dict) else {}
                         for node in self.nodes]
        # the pieces a key's value may be held to: those declaring it, and those whose patterns or
        # other-keys schemas apply to keys they do not declare (renovate's objects: 300 keys x 320
        # pieces, most of them an `if` saying nothing of the key, read 96,000 times an object)
        self._declaring: dict[str, list[int]] = {}
        for i, node in enumerate(self.nodes):
            props = node.get("properties", {})
            for key in props if isinstance(props, dict) else ():
                self._declaring.setdefault(key, []).append(i)
        self._speaking = [i for i, node in enumerate(self.nodes) if self.patterns[i] or "additionalProperties" in node
                          or "unevaluatedProperties" in node]
        self._naming = [i for i, node in enumerate(self.nodes) if "propertyNames" in node]

    def build(self) -> ra.Node:
        order, required = self._declared()
        absent = {k for node in self.nodes for k in node.get("kvx:absent", [])}
        declared = {k for node in self.nodes for k in node.get("properties", {})}
        loose_keys = [k for k in order if k not in declared] if len(order) - len(declared) <= MAX_LOOSE else []
        witness = self._witness()
        if witness is not None and witness[0] is None:  # a member no key can be
            return ra.NOTHING
        members, loose = [], []
        for key in order:
            deadline.check()  # a member's value is often built already (renovate's 300 keys): no look there
            member = self._member(key, absent)
            if member is None:
                if key in required:
                    return ra.NOTHING
                continue
            failing = self._member(key, absent, witness) if witness and self._in(witness[0], key) else None
            (loose if key in loose_keys else members).append((member, key in required, failing))
        lo, hi = 0, None
        for p, node in zip(self.alt, self.nodes):
            where = self.s.notes.where(p.ptr)
            lo = max(lo, count_keyword(node, "minProperties", where, 0))
            m = count_keyword(node, "maxProperties", where, None)
            hi = m if hi is None or (m is not None and m < hi) else hi
        # where only other keys could reach minProperties (or be the member a negation asks for), they
        # stay whatever --extra-keys says
        closed = (self.s.opt.extra_keys == "declared" and self._silent_about_others() and lo <= len(members) + len(loose)
                  and (witness is None or any(m[-1] is not None for m in members + loose)))
        names = tuple(order) + tuple(sorted(absent - set(order)))
        extra = self._extra(names, closed, hi)
        failing_extra = self._extra(names, closed, hi, witness) if witness else None
        if closed:  # named by the piece that declares the keys (a $ref's target, not the referrer)
            self.s.notes.closed_object(next(p.ptr for p, node in zip(self.alt, self.nodes) if self._declares(node)))
        graph = members_graph(members, (extra, failing_extra), [(m, failing) for m, _, failing in loose], lo, hi,
                              self.s.ws, witness is not None)
        return ra.seq(ra.lit("{"), self.s.ws, graph, ra.lit("}"))

    def _witness(self) -> tuple[DFA | None, str | None] | None:
        """(key bodies, pointer of the failing value or None: any value) of the member a negated
        patternProperties, additionalProperties or propertyNames asks for (`kvx:someKey`: at least
        one such member), or None."""
        asks = [(p, node["kvx:someKey"]) for p, node in zip(self.alt, self.nodes) if "kvx:someKey" in node]
        if not asks:
            return None
        if len(asks) > 1:
            where = self.s.notes.where(asks[1][0].ptr)
            raise UnsupportedSchema(f"unsupported keyword 'not' at {where} (two negated key schemas on one object)",
                                    "not", where)
        p, spec = asks[0]
        max_states = self.s.scalars.max_states
        if "pattern" in spec:
            return self.s.scalars._pattern(spec["pattern"], f"{p.ptr}/patternProperties"), spec["value"]
        if "notNames" in spec:  # keys outside the names language
            names = self._names_language(spec["notNames"])
            return (any_key_body() if names is None else
                    product(any_key_body(), names, "minus", max_states)), None
        # the keys matching none of the patterns: the region the patterns leave unchosen
        keys = next((k for chosen, k in self._key_regions(sorted(spec["exceptPatterns"])) if not chosen), None)
        return _minus_names(keys, tuple(spec["except"]), max_states), spec["value"]

    @staticmethod
    def _in(keys: DFA, key: str) -> bool:
        return keys.accepts(dumps(key)[1:-1].encode("utf-8"))

    def _member(self, key: str, absent: set, witness: tuple | None = None) -> ra.Node | None:
        """The member of declared `key`; with `witness`, its value also failing the negated schema."""
        more = (witness[1],) if witness and witness[1] else ()
        if key in absent or not self._name_ok(key):
            return None
        pointers = self._key_schemas(key) + more
        value = self.s.plain(pointers)
        if value is None:  # a container's or an applicator's: its context fixes its members' order
            value = self.s.value(pointers, self.s.member_context(self.context, key=key))
        if ra.is_nothing(value):
            return None
        ws = self.s.ws
        return ra.seq(ra.lit(dumps(key)), ws, ra.lit(":"), ws, value, ws)

    def _declared(self) -> tuple[list, set]:
        order: list[str] = []
        required: set[str] = set()
        for p, node in zip(self.alt, self.nodes):
            props = node.get("properties", {})
            if not isinstance(props, dict):
                where = self.s.notes.where(p.ptr)
                raise UnsupportedSchema(f"invalid schema: 'properties' must be an object at {where}", "properties", where)
            order += [k for k in props if k not in order]
        for p, node in zip(self.alt, self.nodes):
            req = node.get("required", [])
            if not isinstance(req, list) or not all(isinstance(r, str) for r in req):
                where = self.s.notes.where(p.ptr)
                raise UnsupportedSchema(f"invalid schema: 'required' must be an array of strings at {where}",
                                        "required", where)
            order += [k for k in dict.fromkeys(req) if k not in order]  # a name listed twice is one key
            required |= set(req)
        position = {k: i for i, k in enumerate(order)}
        order.sort(key=lambda k: (self.rank.get(k, len(self.rank)), position[k]))
        return order, required

    def _patterns(self, i: int) -> dict:
        return self.patterns[i]

    def _matches(self, pattern: str, key: str, i: int) -> bool:
        return self.s.scalars.matches(pattern, key, f"{self.alt[i].ptr}/patternProperties")

    def _evaluates_all(self, i: int) -> bool:
        """A piece in i's scope evaluates every property (additionalProperties, a nested unevaluated*)."""
        return any("additionalProperties" in self.nodes[j] or (j != i and "unevaluatedProperties" in self.nodes[j])
                   for j in self.scope[i])

    def _key_schemas(self, key: str) -> tuple:
        """Pointers of every schema the value of declared `key` must satisfy."""
        out = []
        for i in sorted({*self._declaring.get(key, ()), *self._speaking}):
            p, node = self.alt[i], self.nodes[i]
            matched = False
            if key in node.get("properties", {}):
                out.append(f"{p.ptr}/properties/{escape(key)}")
                matched = True
            for pat in self._patterns(i):
                if self._matches(pat, key, i):
                    out.append(f"{p.ptr}/patternProperties/{escape(pat)}")
                    matched = True
            if matched:
                continue
            if "additionalProperties" in node:
                out.append(f"{p.ptr}/additionalProperties")
            elif "unevaluatedProperties" in node and not self._evaluated_name(key, i):
                out.append(f"{p.ptr}/unevaluatedProperties")
        return tuple(out)

    def _evaluated_name(self, key: str, i: int) -> bool:
        if self._evaluates_all(i):
            return True
        for j in self.scope[i]:
            if key in self.nodes[j].get("properties", {}):
                return True
            if any(self._matches(pat, key, j) for pat in self._patterns(j)):
                return True
        return False

    def _name_ok(self, key: str) -> bool:
        """A declared key within every propertyNames (its enum and applicators too)."""
        return all(self.s.scalars.satisfies(key, self.nodes[i]["propertyNames"], f"{self.alt[i].ptr}/propertyNames")
                   for i in self._naming)

    # ---- keys nobody declared -----------------------------------------------------------------
    def _silent_about_others(self) -> bool:
        """The object declares its keys and says nothing of any others (GrammarOptions.extra_keys)."""
        return (any(map(self._declares, self.nodes))
                and not any(k in node for node in self.nodes for k in ("additionalProperties", "unevaluatedProperties")))

    @staticmethod
    def _declares(node: dict) -> bool:
        return bool(node.get("properties") or node.get("patternProperties"))

    def _extra(self, declared: tuple, closed: bool, most: int | None, witness: tuple | None = None) -> ra.Node | None:
        """Members of undeclared keys, by the patterns they match; `closed`: none matching no pattern;
        `most`: the object's maxProperties; with `witness`, only those of its keys, their values also
        failing its schema."""
        patterns = sorted({pat for i in range(len(self.alt)) for pat in self._patterns(i)})
        regions = []
        relax = self._relaxable(patterns, closed, most, witness)
        if relax:  # said here, once a compile: the regions themselves are kept across compiles
            ptr = next(p.ptr for i, p in enumerate(self.alt) if patterns[0] in self._patterns(i))
            self.s.notes.post_check("patternProperties", ptr, f"the key pattern {patterns[0]!r} is past "
                                    f"the state cap (alone or in its object): its repeats over {RELAX_OVER} "
                                    "written unbounded")
        for chosen, keys in self._key_regions(patterns, relax):
            if witness is not None:
                keys = product(keys, witness[0], "and", self.s.scalars.max_states)
                if keys is None:
                    continue
            member = None if closed and not chosen else self._region(chosen, keys, declared, witness)
            if member is not None:
                regions.append(member)
        return ra.alt(*regions) if regions else None

    def _relaxable(self, patterns: list, closed: bool, most: int | None, witness: tuple | None) -> bool:
        """Whether a key pattern past the state cap (alone or in its object: _keys_past_cap) may be
        read relaxed (regex_parse.RELAX_OVER: a superset, then checked after generation, as a value's
        own pattern is): one pattern that relaxing changes, no negation asking for a member, and
        nothing for a key outside it (`closed`, or a value no key may have: `additionalProperties:
        false`). A key the relaxed pattern lets in wrongly is then one the record check refuses,
        never a valid key given another key's schema."""
        if len(patterns) != 1 or witness is not None:
            return False
        try:
            wanted = relaxes(patterns[0]) and self._keys_past_cap(patterns[0], most)
        except PatternError:  # refused with its place where the regions are cut
            return False
        return wanted and (closed or ra.is_nothing(self._region_value(frozenset())))

    def _keys_past_cap(self, pattern: str, most: int | None) -> bool:
        """Whether the key pattern is past the cap, alone or written once per member the object may
        hold: `^.{1,256}$` is 29,697 states as written, under the cap, but Vercel's `maxProperties:
        100` writes it a hundred times (seen here, before the rule is built and runs to the cap)."""
        max_states = self.s.scalars.max_states
        states = written_states(pattern, max_states)
        return states is None or states * (most or 1) > max_states

    def _key_regions(self, patterns: list, relax: bool = False) -> list[tuple[frozenset, DFA]]:
        """The key space cut by the patterns: (the patterns its keys match, the string bodies matching
        exactly those), each pattern splitting every region so far, the empty parts dropped: patterns
        that exclude each other (`^table `, `^view `...) make n + 1 regions, not 2^n. Kept per pattern
        list: OpenAPI's 200 objects each cut by `^x-` paid two products apiece. `relax`: see
        _relaxable."""
        key = (tuple(patterns), self.s.scalars.max_states, relax)
        hit = _REGIONS.get(key)
        if hit is None:
            hit = _REGIONS.keep(key, self._cut_regions(patterns, relax))
        return hit

    def _cut_regions(self, patterns: list, relax: bool) -> list[tuple[frozenset, DFA]]:
        regions = [(frozenset(), any_key_body())]
        max_states = self.s.scalars.max_states
        for pat in patterns:
            # a key matching the pattern in one reading only (regex_parse.pattern_dfa) is in no
            # region; read wide only for \d and \w (a key "größe" against `^\w+$`): wide `.` and `$`
            # differ on line breaks alone, and a second automaton for every `$` cost 7% of the compile
            where = self.alt[0].ptr + "/patternProperties"
            dfa = self.s.scalars._pattern(pat, where, relax="always" if relax else "no")
            wide = self.s.scalars._pattern(pat, where, wide=True) if reads_classes(pat) and not relax else dfa
            split = []
            for chosen, keys in regions:
                try:
                    inside = None if dfa is None else product(keys, dfa, "and", max_states)
                    outside = keys if wide is None else product(keys, wide, "minus", max_states)
                except TooLarge as err:  # the patterns together, each under the cap alone
                    raise too_large(self.s.notes.where(where), err, "patternProperties") from None
                split += [(chosen | {pat}, inside)] if inside is not None else []
                split += [(chosen, outside)] if outside is not None else []
            if len(split) > MAX_REGIONS:
                where = self.s.notes.where(self.alt[0].ptr)
                raise too_large(where, f"more than {MAX_REGIONS} key regions of patternProperties in one object",
                                "patternProperties")
            regions = split
        rank = {pat: i for i, pat in enumerate(patterns)}  # by size, then pattern order: as combinations come
        return sorted(regions, key=lambda region: (len(region[0]), sorted(rank[p] for p in region[0])))

    def _region(self, chosen: frozenset, keys: DFA, declared: tuple, witness: tuple | None = None) -> ra.Node | None:
        """The member of keys matching exactly the patterns in `chosen` (None if there is none)."""
        value = self._region_value(chosen, witness)
        if ra.is_nothing(value):
            return None
        key = self._key_language(keys, declared)
        if key is None:
            return None
        ws = self.s.ws
        return ra.seq(strings.quoted(ra.Embed(key)), ws, ra.lit(":"), ws, value, ws)

    def _region_value(self, chosen: frozenset, witness: tuple | None = None) -> ra.Node:
        """The value of a key matching exactly the patterns in `chosen`."""
        ptrs = [witness[1]] if witness and witness[1] else []
        for i, (p, node) in enumerate(zip(self.alt, self.nodes)):
            mine = [pat for pat in self._patterns(i) if pat in chosen]
            if mine:
                ptrs += [f"{p.ptr}/patternProperties/{escape(pat)}" for pat in mine]
            elif "additionalProperties" in node:
                ptrs.append(f"{p.ptr}/additionalProperties")
            elif "unevaluatedProperties" in node and not self._region_evaluated(chosen, i):
                ptrs.append(f"{p.ptr}/unevaluatedProperties")
        return self.s.value(tuple(ptrs), self.s.member_context(self.context, key="", patterns=frozenset(chosen)))

    def _region_evaluated(self, chosen: set, i: int) -> bool:
        return self._evaluates_all(i) or any(pat in chosen for j in self.scope[i] for pat in self._patterns(j))

    def _key_language(self, keys: DFA, declared: tuple) -> DFA | None:
        """A region's string bodies, not declared, within every propertyNames."""
        key = _minus_names(keys, declared, self.s.scalars.max_states)
        try:
            return self._named(key, relaxed=False)
        except TooLarge:  # a long name bound times another piece's names: the bounds left to the check
            deadline.check()
            return self._named(key, relaxed=True)

    def _named(self, key: DFA | None, relaxed: bool) -> DFA | None:
        """`key` within every piece's propertyNames; `relaxed`: their length bounds over
        LONG_WITH_PATTERN left to the check, as a value's are beside a pattern (mergify's
        `maxLength: 1024` names, 20,481 states, times another piece's two name patterns was past the
        cap). Past the cap relaxed, the refusal names the propertyNames."""
        for i in self._naming:
            if key is None:
                break
            where = f"{self.alt[i].ptr}/propertyNames"
            names = self._names_language(where, relaxed)
            try:
                key = None if names is None else product(key, names, max_states=self.s.scalars.max_states)
            except TooLarge as err:
                if not relaxed:
                    raise
                raise too_large(self.s.notes.where(where), err, "propertyNames") from None
        return key

    def _names_language(self, ptr: str, relaxed: bool = False) -> DFA | None:
        """String bodies a propertyNames schema allows (keys are strings: other types drop out);
        `relaxed`: see _named."""
        bodies = []
        for alt in self.s.alternatives((ptr,)):
            pieces = self.s.pieces(alt)
            for _, node in pieces:
                if "type" in node and "string" not in ([node["type"]] if isinstance(node["type"], str) else node["type"]):
                    break
            else:
                listed = self.s.listed(pieces)
                if listed is not None:  # the listed names that pass the rest, in every spelling
                    names = [n for n in listed if isinstance(n, str)
                             and all(self.s.scalars.valid(n, p, node) for p, node in pieces)]
                    bodies += [ra.seq(*(strings.json_char(cs.of(c)) for c in n)) for n in names]
                    continue
                spec = self.s.scalars.string_spec(pieces)
                if spec is not None and relaxed:
                    lo, hi = self.s.notes.long_bounds(pieces, spec.lo, spec.hi, LONG_WITH_PATTERN, LENGTHS,
                                                      f"over {LONG_WITH_PATTERN} beside another propertyNames")
                    spec = replace(spec, lo=lo, hi=hi)
                if spec is not None:
                    bodies.append(self.s.scalars.string_body(spec))
        return fast_compile(ra.alt(*bodies), self.s.scalars.max_states) if bodies else None


_ANY_KEY: list = []


def any_key_body() -> DFA:
    if not _ANY_KEY:
        _ANY_KEY.append(fast_compile(strings.string_body()))
    return _ANY_KEY[0]


_NOT_NAMES: ProcessCache[CDFA | None] = ProcessCache(1024)  # names -> any key but them
_REGIONS: ProcessCache[list] = ProcessCache(1024)  # (patterns, max_states, relax) -> their key regions (ObjectBody._key_regions)


def _minus_names(body, names: tuple, max_states: int):
    """`body` without any spelling of the given names (their decoded value, not just their text).
    Any key but the names is built directly (key_names.py) unless a name is not ASCII, and kept per
    name set (every object with extra keys needs one); a narrower body (a pattern's region) is its
    product with that, not with the names' spellings (~3 ms an object: OpenAPI's `^x-` regions)."""
    if body is None or not names:
        return body
    others = _NOT_NAMES.get(names)
    if others is None:
        others = body_without_names(any_key_body(), names)
        if others is None:  # a name outside ASCII: the product with the names' spellings
            spelled = ra.alt(*(ra.seq(*(strings.json_char(cs.of(c)) for c in name)) for name in names))
            others = product(any_key_body(), fast_compile(spelled, max_states), mode="minus", max_states=max_states)
        elif others.num_states > max_states:
            raise TooLarge(f"more than {max_states} DFA states")
        _NOT_NAMES.keep(names, others)
    if body is any_key_body() or others is None:
        return others
    return product(body, others, mode="and", max_states=max_states)


def members_graph(members: list, extras: tuple, loose: list, lo: int, hi: int | None, ws: ra.Node,
                  witnessed: bool = False) -> ra.Node:
    """Declared members in order (optional ones skippable), then the `loose` members (required, each
    once, any order) mixed with any number of extras; commas only between written members; lo..hi
    members in all. Nodes: ("at", i, c, w) before declared member i with c written (c stops at the
    largest count that matters), ("x", c, S, w) among the extras with the loose members S written;
    a join node per (member, count) so each member's automaton appears once per count. Each member
    (and `extras`, a pair) has a second form, the one failing what a negation asks to fail (None:
    none); `witnessed`: the object ends only once a member in that form is written (w = 1), else w
    is 1 throughout."""
    if hi is not None and hi < lo:
        return ra.NOTHING
    extra, failing_extra = extras
    n = len(members)
    top = hi if hi is not None else max(1, lo)
    states = (0, 1) if witnessed else (1,)
    ids: dict[tuple, int] = {}
    nid = lambda key: ids.setdefault(key, len(ids))
    nid(("at", 0, 0, states[0]))  # the start
    sep = ra.seq(ra.lit(","), ws)
    edges = []

    def write(src: tuple, dst_of_count, join_key, label, c: int) -> None:
        """src --[comma]--> join(count after) --label--> dst(count after)."""
        after = c + 1 if hi is not None else min(c + 1, top)
        if after > top:
            return
        fresh = join_key + (after,) not in ids
        join = nid(join_key + (after,))
        edges.append((nid(src), join, sep if c else None))
        if fresh:  # the member's own edge, once per join node
            edges.append((join, nid(dst_of_count(after)), label))

    for i, (member, req, failing) in enumerate(members):
        for c in range(top + 1):
            for w in states:
                if not req:
                    edges.append((nid(("at", i, c, w)), nid(("at", i + 1, c, w)), None))
                write(("at", i, c, w), lambda a, i=i, w=w: ("at", i + 1, a, w), ("join", i, w), member, c)
                if witnessed and failing is not None:
                    write(("at", i, c, w), lambda a, i=i: ("at", i + 1, a, 1), ("wjoin", i), failing, c)
    full = (1 << len(loose)) - 1
    for c in range(top + 1):
        for w in states:
            edges.append((nid(("at", n, c, w)), nid(("x", c, 0, w)), None))
            for seen in range(full + 1):
                src = ("x", c, seen, w)
                if extra is not None:
                    write(src, lambda a, seen=seen, w=w: ("x", a, seen, w), ("xjoin", seen, w), extra, c)
                if witnessed and failing_extra is not None:
                    write(src, lambda a, seen=seen: ("x", a, seen, 1), ("wxjoin", seen), failing_extra, c)
                for k, (member, failing) in enumerate(loose):
                    if not seen >> k & 1:
                        now = seen | 1 << k
                        write(src, lambda a, now=now, w=w: ("x", a, now, w), ("ljoin", k, now, w), member, c)
                        if witnessed and failing is not None:
                            write(src, lambda a, now=now: ("x", a, now, 1), ("wljoin", k, now), failing, c)
    finals = tuple(nid(("x", c, full, 1)) for c in range(lo, top + 1))
    return ra.Graph(len(ids), tuple(edges), finals)
