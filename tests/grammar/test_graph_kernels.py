"""The compiled graph kernels (numba) give what the numpy versions give: the same reachable states,
the same minimal tables (state for state, both number breadth-first), the same byte distances, and
composed automata of the same language and size (the subset states may be numbered otherwise)."""
from __future__ import annotations

import random

import numpy as np
import pytest
from grammar_fixtures import random_regex

from kvx.grammar import GrammarOptions
from kvx.grammar.automata import cdfa, compose, determinize, graph_kernels, link_kernel
from kvx.grammar.automata import regex_ast as ra
from kvx.grammar.errors import TooLarge, UnsupportedSchema
from kvx.grammar.schema.compiler import compile_program
from kvx.grammar.tokens import budget

pytestmark = pytest.mark.skipif(graph_kernels.kernels() is None, reason="numba cannot compile here")


@pytest.fixture
def numpy_only(monkeypatch):
    """Run a body with the compiled kernels switched off (the numpy versions)."""
    def run(fn, *args):
        with monkeypatch.context() as m:
            m.setattr(graph_kernels, "kernels", lambda: None)
            return fn(*args)
    return run


def _random_dfa(rng, n, k):
    trans = rng.integers(-1, n, size=(n, k)).astype(np.int32)
    # many equal rows and chains, so blocks merge and split over several rounds
    for s in range(0, n - 1, 3):
        trans[s] = trans[s + 1]
    return trans, rng.random(n) < 0.3


def test_hopcroft_matches_numpy_moore_rounds(numpy_only):
    rng = np.random.default_rng(7)
    for _ in range(300):
        n, k = int(rng.integers(1, 300 if _ % 10 == 0 else 60)), int(rng.integers(1, 6))
        trans, acc = _random_dfa(rng, n, k)
        start = int(rng.integers(0, n))
        want = numpy_only(determinize.minimise, trans, acc, start)
        got = determinize.minimise(trans, acc, start)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]) and got[2] == want[2] == 0


def test_hopcroft_matches_moore_on_long_chains(numpy_only):
    # two interleaved counters: every distinguishing length up to 150 takes a Moore round
    n = 300
    trans = np.full((n, 2), -1, dtype=np.int32)
    trans[np.arange(n - 1), np.arange(n - 1) % 2] = np.arange(1, n)
    trans[np.arange(0, n - 2, 2), 1] = np.arange(2, n, 2)
    acc = np.zeros(n, dtype=bool)
    acc[-1] = acc[n // 2] = True
    want = numpy_only(determinize.minimise, trans, acc, 0)
    got = determinize.minimise(trans, acc, 0)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


def test_tree_minimise_matches_hopcroft_on_trees_after_a_minimal_head():
    """A minimal head (Hopcroft's own result) followed by random tree rows that move only forward
    or into the head, many of them alike (key_names' trie after the string body): merging from the
    last row back gives Hopcroft's table, state for state."""
    from kvx.grammar.automata.minimise_kernel import tree_minimal_rows

    rng = np.random.default_rng(11)
    for case in range(300):
        k = int(rng.integers(1, 5))
        head, head_acc = _random_dfa(rng, int(rng.integers(1, 12)), k)
        head, head_acc, _ = determinize.minimise(head, head_acc, 0)
        first, n = len(head), len(head) + int(rng.integers(1, 80))
        trans = np.full((n, k), -1, dtype=np.int32)
        trans[:first] = head
        acc = np.zeros(n, dtype=bool)
        acc[:first] = head_acc
        for r in range(n - 1, first - 1, -1):  # forward or into the head; alike subtrees are common
            for c in range(k):
                roll = rng.random()
                trans[r, c] = (-1 if roll < 0.3 else int(rng.integers(0, first)) if roll < 0.6 or r == n - 1
                               else int(rng.integers(r + 1, n)))
            acc[r] = rng.random() < 0.5
        want = determinize.minimise(trans, acc, first)
        got = tree_minimal_rows(trans.copy(), acc, first, first)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]), case


def test_minimise_merges_equivalent_states():
    # 0 -a-> 1, 0 -b-> 2, 1 and 2 accept and die: one accepting state after minimisation
    trans = np.array([[1, 2], [-1, -1], [-1, -1]], dtype=np.int32)
    out, acc, start = determinize.minimise(trans, np.array([False, True, True]), 0)
    assert out.tolist() == [[1, 1], [-1, -1]] and acc.tolist() == [False, True] and start == 0


def test_reach_matches_numpy_search(numpy_only):
    rng = np.random.default_rng(3)
    for _ in range(200):
        n = int(rng.integers(1, 80))
        src, dst = rng.integers(0, n, 2 * n), rng.integers(0, n, 2 * n)
        seeds = rng.integers(0, n, int(rng.integers(0, 3)))
        assert np.array_equal(cdfa.reach(n, src, dst, seeds), numpy_only(cdfa.reach, n, src, dst, seeds))


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"a": {"type": "string", "maxLength": 5}, "b": {"type": "integer"}},
     "required": ["a"]},
    {"$defs": {"node": {"type": "object", "properties": {"v": {"type": "number"},
                                                          "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
                        "required": ["v", "kids"]}},
     "$ref": "#/$defs/node"},
    {"anyOf": [{"type": "array", "items": {"type": "array", "minItems": 2}, "minItems": 1},
               {"type": "object", "required": ["x", "y"]}]},
])
def test_byte_distances_match_numpy_levels(schema, numpy_only):
    program = compile_program(schema, GrammarOptions(extra_keys="schema")).program
    usable = np.ones(256, dtype=bool)
    usable[[0x22, 0x5C]] = False  # bytes left out change the shortest paths
    for allowed in (np.ones(256, dtype=bool), usable):
        want = numpy_only(budget.byte_distances, program, allowed)
        got = budget.byte_distances(program, allowed)
        assert got.dtype == want.dtype and np.array_equal(got, want)


def _canonical(dfa):
    """Minimal table of a DFA's language, numbered breadth-first (equal languages, equal tables)."""
    if dfa is None:
        return None
    trans, acc, _ = determinize.minimise(dfa.trans, dfa.accepting, dfa.start)
    return trans.tolist(), acc.tolist()


def _assert_composed_alike(node, numpy_only):
    """Compiled and numpy composition: both empty, or the same size and language."""
    want = numpy_only(compose.fast_compile, node)
    got = compose.fast_compile(node)
    assert (got is None) == (want is None)
    if got is not None:
        assert got.num_states == want.num_states
        assert _canonical(got) == _canonical(want)


def test_composed_automata_match_numpy_subsets(numpy_only):
    rng = random.Random(11)
    keys = [ra.lit(k) for k in ('"a"', '"ab"', '"abc"', '"b"')]
    for i in range(300):
        if i % 2:  # object-like: key literals sharing prefixes, each followed by a random value
            node = ra.seq(ra.lit("{"), ra.rep(ra.alt(*(ra.seq(k, ra.lit(":"), random_regex(rng)) for k in keys)), 0, 3),
                          ra.lit("}"))
        else:
            node = random_regex(rng)
        _assert_composed_alike(node, numpy_only)


def test_members_read_by_their_moves_match_numpy_subsets(numpy_only):
    """The subset loop reads each member by its live cells and reuses the last union where a class
    leads the members to the same targets (letters a literal splits apart, read alike by every
    open string): many classes, open and bounded strings beside literals sharing prefixes."""
    rng = random.Random(23)
    letters = "abcdefghij"
    for _ in range(150):
        strings = [ra.rep(ra.chars("".join(rng.sample(letters, rng.randint(3, 10)))), rng.randint(0, 2),
                          rng.choice([None, 3, 6])) for _ in range(rng.randint(1, 3))]
        words = [ra.lit("".join(rng.choice(letters) for _ in range(rng.randint(1, 4)))) for _ in range(rng.randint(1, 4))]
        body = ra.alt(*strings, *words)
        node = ra.seq(ra.rep(ra.seq(body, ra.lit(",")), 0, None), body) if rng.random() < 0.5 else \
            ra.seq(body, ra.lit(":"), ra.alt(*strings[:1], *words[1:]))
        _assert_composed_alike(node, numpy_only)


def _size_or_refused(node, cap: int):
    try:
        dfa = compose.fast_compile(node, cap)
    except TooLarge:
        return "refused"
    return None if dfa is None else dfa.num_states


def test_the_state_cap_refuses_what_numpy_refuses(numpy_only):
    """The compiled subset loop stops early once the states reached from the start pass the cap (a
    lower bound of what the trim keeps): it refuses exactly the automata numpy refuses at that cap."""
    rng = random.Random(17)
    blowups = [ra.seq(ra.rep(ra.chars("ab"), 0, None), ra.chars("a"), ra.rep(ra.chars("ab"), n, n), ra.rep(leaf, 0, 2))
               for n in range(2, 8) for leaf in (ra.chars("a"), ra.chars("c"))]
    nodes = blowups + [random_regex(rng) for _ in range(200)]
    refused = kept = 0
    for node in nodes:
        for cap in (4, 8, 16, 40, 100, 300):
            got = _size_or_refused(node, cap)
            assert got == numpy_only(_size_or_refused, node, cap)
            refused += got == "refused"
            kept += isinstance(got, int)
    assert refused > 100 and kept > 100


def test_schema_programs_match_numpy_subsets(numpy_only):
    schema = {"type": "object", "properties": {"id": {"type": "integer"}, "idx": {"type": "string", "maxLength": 3},
                                               "tags": {"type": "array", "items": {"enum": ["a", "ab", "abc"]}}},
              "required": ["id"]}
    want = numpy_only(compile_program, schema, GrammarOptions(extra_keys="schema")).program
    got = compile_program(schema, GrammarOptions(extra_keys="schema")).program
    assert got.num_states == want.num_states and got.num_rules == want.num_rules
    for text in ['{"id":1}', '{"idx":"ab","id":2}', '{"id":3,"tags":["ab","abc"]}', '{"id":1,"x":{"y":[1]}}',
                 '{"id":1,"idx":"abcd"}', '{"tags":["a"]}', '{"id":1,"tags":["b"]}']:
        assert got.accepts(text.encode()) == want.accepts(text.encode()), text


def test_call_edges_and_spread_match_numpy():
    from kvx.grammar.automata import pda
    from kvx.grammar.automata.cdfa import compact

    body = ra.seq(ra.lit("["), ra.opt(ra.seq(pda.call_symbol(3), ra.star(ra.seq(ra.lit(","), ra.alt(
        pda.call_symbol(300), pda.call_symbol(5), ra.lit("0")))))), ra.lit("]"))
    c = compact(compose.fast_compile(body))
    table, call = np.ascontiguousarray(c.trans, dtype=np.int32), int(c.cob[pda.CALL_BYTE])
    want_edges, want_spelling = pda._call_edges(table, c.cob, call)
    edges, spelled = link_kernel._call_edges(table, c.cob.astype(np.int64), call)  # inside the link kernel
    assert edges.tolist() == [list(e) for e in want_edges] and sorted({e[1] for e in want_edges}) == [3, 5, 300]
    assert set(np.flatnonzero(spelled).tolist()) == want_spelling
    out = np.empty((len(table), 256), dtype=np.int32)
    graph_kernels.kernels().spread(table, c.cob.astype(np.int64), 7, out)
    assert np.array_equal(out, np.where(table >= 0, table + 7, -1)[:, c.cob])


def test_read_body_matches_numpy():
    """The compiled reading of a rule body (its call edges out, the states that only spelled them
    dropped) gives numpy's body state for state."""
    from kvx.grammar.automata import pda

    rng = random.Random(5)
    for _ in range(100):
        calls = [pda.call_symbol(rng.choice([2, 3, 255, 256, 4000])) for _ in range(rng.randint(0, 3))]
        pieces = [random_regex(rng) for _ in range(2)] + calls
        rng.shuffle(pieces)
        composed = compose.Composer().build(ra.seq(ra.lit("["), ra.alt(*pieces), ra.star(ra.alt(*calls, ra.lit(","))),
                                                   ra.lit("]")))
        if composed is None:
            continue
        want = pda._body(composed)  # the numpy reading
        table, final, start, edges = link_kernel.read_body(
            np.ascontiguousarray(composed.trans, dtype=np.int32), composed.cob.astype(np.int64),
            int(composed.cob[pda.CALL_BYTE]), composed.accepting.astype(bool), composed.start)
        assert np.array_equal(table, want.table) and np.array_equal(final, want.final)
        assert start == want.start and np.array_equal(edges, want.edges)
        assert table.dtype == want.table.dtype == np.int32 and edges.dtype == want.edges.dtype


# rule bodies that link merges (equal shapes at two places, equal recursive definitions), cuts (a
# definition that requires itself: no finite value), and leaves without a document (required so)
_SELF_REQUIRED = {"type": "object", "properties": {"x": {"$ref": "#/$defs/loop"}}, "required": ["x"]}
LINKED = [
    {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}, "name": {"type": "string"}}},
    {"type": "object", "properties": {"a": {"type": "object", "properties": {"x": {"type": "integer"}}},
                                      "b": {"type": "object", "properties": {"x": {"type": "integer"}}},
                                      "c": {"type": "array", "items": {"type": "string"}},
                                      "d": {"type": "array", "items": {"type": "string"}},
                                      "e": {"type": "object", "properties": {"x": {"properties": {"y": {"type": "null"}}}}},
                                      "f": {"type": "object", "properties": {"x": {"properties": {"y": {"type": "null"}}}}}}},
    {"$defs": {"A": {"type": "object", "properties": {"n": {"$ref": "#/$defs/A"}, "v": {"type": "string"}}},
               "B": {"type": "object", "properties": {"n": {"$ref": "#/$defs/B"}, "v": {"type": "string"}}}},
     "type": "object", "properties": {"a": {"$ref": "#/$defs/A"}, "b": {"$ref": "#/$defs/B"}}},
    {"$defs": {"loop": _SELF_REQUIRED}, "type": "object",
     "properties": {"a": {"$ref": "#/$defs/loop"}, "b": {"type": "integer"},
                    "c": {"anyOf": [{"$ref": "#/$defs/loop"}, {"type": "array", "items": {"$ref": "#/$defs/loop"}}]}}},
    {"$defs": {"loop": _SELF_REQUIRED}, "$ref": "#/$defs/loop"},
]


def _composed_bodies(schema, monkeypatch) -> list:
    from kvx.grammar.schema import rules

    seen, link = [], rules.link
    monkeypatch.setattr(rules, "link", lambda bodies: seen.append(bodies) or link(bodies))
    try:
        compile_program(schema, GrammarOptions(extra_keys="schema"))
    except UnsupportedSchema:  # no document: the bodies were composed all the same
        pass
    return seen[0]


@pytest.mark.parametrize("schema", LINKED)
def test_compiled_link_gives_numpy_link_program(schema, numpy_only, monkeypatch):
    """link in one compiled call gives the program the numpy steps give, array for array: the same
    rules merged, the same calls cut, the same numbering of states and order of call edges."""
    from kvx.grammar.automata import pda

    bodies = _composed_bodies(schema, monkeypatch)
    got, want = pda.link(bodies), numpy_only(pda.link, bodies)
    if want is None:
        assert got is None and schema is LINKED[-1]
        return
    for field in ("table", "final", "rule_of", "rule_start", "call_ptr", "call_rule", "call_ret", "classes"):
        a, b = getattr(got, field), getattr(want, field)
        assert a.dtype == b.dtype and np.array_equal(a, b), field
    if schema is LINKED[1]:  # bodies composed apart merge too: e and f each call their own x
        assert got.live_rules < len({id(b) for b in bodies if b is not None})
    if schema is LINKED[3]:  # the loop's calls are cut: a document with "a" cannot complete
        assert got.accepts(b'{"b":1}') and not got.accepts(b'{"a":{}}')


def test_compiled_link_keeps_the_cap_and_stops_at_the_deadline(numpy_only, monkeypatch):
    """Over the cap on all rules' states both links refuse alike; past the deadline the compiled one
    stops at its look (status -2) and finishes without one."""
    from kvx.grammar.automata import deadline, pda

    bodies = _composed_bodies(LINKED[1], monkeypatch)
    states = pda.link(bodies).num_states
    monkeypatch.setattr(pda, "MAX_STATES", states - 1)
    for run in (pda.link, lambda b: numpy_only(pda.link, b)):
        with pytest.raises(TooLarge, match="states in all rules"):
            run(bodies)
    distinct = {id(d): d for d in bodies if d is not None}
    number = {key: i for i, key in enumerate(distinct)}
    args = (*cdfa.flat_tables(list(distinct.values())), np.array([d.start for d in distinct.values()], np.int64),
            np.array([-1 if d is None else number[id(d)] for d in bodies], np.int64), pda.CALL_BYTE, states)
    with deadline.within(deadline.Deadline(-1.0)):
        assert graph_kernels.kernels().link(*args, 1)[0] == -2
        assert graph_kernels.kernels().link(*args, 1 << 40)[0] == 0


def test_subset_loop_stops_at_the_deadline():
    """The compiled subset loop looks at the compile's deadline each `look_every` units of work (a
    member or class read), not per count of states: past it, it stops (status -2, which the composer
    turns into its deadline refusal); without one, or before its first look, it finishes."""
    from kvx.grammar.automata import deadline

    n = 3000  # closure states, each a few units of work
    trans = np.full((n, 1), -1, np.int32)
    trans[:-1, 0] = np.arange(1, n, dtype=np.int32)
    args = (trans, np.ones(n, np.bool_), np.zeros(n, np.int64), np.array([0, 1], np.int64), np.array([n - 1], np.int64),
            np.array([True]), np.array([0], np.int64), False, 4 * n)
    assert graph_kernels.kernels().subsets(*args, 100)[0] == 0
    with deadline.within(deadline.Deadline(-1.0)):
        assert graph_kernels.kernels().subsets(*args, 100)[0] == -2
        assert graph_kernels.kernels().subsets(*args, 1 << 40)[0] == 0  # no look: all the work done


def test_a_few_heavy_subset_states_reach_the_deadline_look():
    """Fewer than 1,024 states, each reading thousands of members (megalinter's kind of network): the
    loop still looks at the deadline and stops, where a count of states never would have."""
    from kvx.grammar.automata import deadline

    m, classes = 2000, 8  # a start subset of m copies' states, each moving on every class to its own state
    n = 2 * m
    trans = np.full((n, classes), -1, np.int32)
    trans[:m] = (m + np.arange(m, dtype=np.int32))[:, None]
    args = (trans, np.zeros(n, np.bool_), np.full(n, -1, np.int64), np.array([0], np.int64), np.zeros(0, np.int64),
            np.zeros(0, np.bool_), np.arange(m, dtype=np.int64), False, 4 * n)
    status, out, _, _ = graph_kernels.kernels().subsets(*args, 1 << 12)
    assert status == 0 and len(out) - n < 1024  # few new states
    with deadline.within(deadline.Deadline(-1.0)):
        assert graph_kernels.kernels().subsets(*args, 1 << 12)[0] == -2


def test_column_classes_match_numpy(numpy_only):
    rng = np.random.default_rng(5)
    for _ in range(100):
        rows = int(rng.integers(1, 30))
        base = rng.integers(-1, 4, size=(rows, int(rng.integers(1, 12))))
        mat = base[:, rng.integers(0, base.shape[1], 256)]  # many identical columns
        for dtype in (np.int32, np.int64):
            want = numpy_only(cdfa.column_classes, mat.astype(dtype))
            got = cdfa.column_classes(mat.astype(dtype))
            assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


def test_trim_matches_numpy_search(numpy_only):
    rng = np.random.default_rng(13)
    for _ in range(300):
        n, k = int(rng.integers(1, 60)), int(rng.integers(1, 6))
        trans, acc = _random_dfa(rng, n, k)
        trans[rng.random((n, k)) < 0.4] = -1  # dead ends and unreachable parts
        start, cob = int(rng.integers(0, n)), rng.integers(0, k, 256)
        for all_live in (False, True):
            want = numpy_only(cdfa.trim, trans, acc, start, cob, all_live)
            got = cdfa.trim(trans, acc, start, cob, all_live)
            assert (got is None) == (want is None)
            if got is not None:
                assert np.array_equal(got.trans, want.trans) and np.array_equal(got.accepting, want.accepting)
                assert got.start == want.start


def test_product_matches_numpy_walk(numpy_only):
    """Intersections and differences of random regexes: the same table, state for state, as the
    numpy walk, and the language the operands give on short strings."""
    from kvx.grammar.automata import dfa_ops

    rng = random.Random(17)
    for _ in range(150):
        a, b = compose.fast_compile(random_regex(rng)), compose.fast_compile(random_regex(rng))
        if a is None or b is None:
            continue
        for mode in ("and", "minus"):
            want = numpy_only(dfa_ops.product, a, b, mode)
            got = dfa_ops.product(a, b, mode)
            assert (got is None) == (want is None)
            if got is not None:
                assert np.array_equal(got.trans, want.trans) and np.array_equal(got.accepting, want.accepting)
                assert np.array_equal(got.cob, want.cob) and got.start == want.start
            for text in ("", "a", "ab", "ba", "abc", "aab", "0", "a0b"):
                data = text.encode()
                inside = got is not None and got.accepts(data)
                assert inside == (a.accepts(data) and (b.accepts(data) if mode == "and" else not b.accepts(data)))


def test_product_stops_at_its_cap_and_the_deadline():
    from kvx.grammar.automata import deadline, dfa_ops
    from kvx.grammar.errors import TooLarge, UnsupportedSchema

    counter = compose.fast_compile(ra.rep(ra.chars("ab"), 0, 5000))  # 5,001 states, one per length
    anything = compose.fast_compile(ra.star(ra.chars("ab")))
    assert dfa_ops.product(counter, anything).num_states == 5001
    with pytest.raises(TooLarge, match="more than 100 DFA states"):
        dfa_ops.product(counter, anything, max_states=100)
    with deadline.within(deadline.Deadline(-1.0)), pytest.raises(TooLarge, match="deadline"):
        dfa_ops.product(counter, anything)


def test_small_pages_turns_numpy_huge_page_advice_off_for_the_scope():
    from kvx.grammar.automata.small_pages import _set_madvise_hugepage, small_pages

    before = _set_madvise_hugepage(True)  # a known state
    try:
        with small_pages():
            assert _set_madvise_hugepage(False) is False  # off inside
        assert _set_madvise_hugepage(True) is True  # and back on after
    finally:
        _set_madvise_hugepage(before)


@pytest.mark.parametrize("pattern", [r"\bfoo", r"\bab\b", r"a\B", r"^\w+\b-", r"(x\b|y)z", r"\B", r"\b", r"\b\B",
                                     r"[a-z]{1,3}\.[a-z()]{1,3}\b([-a-z()]*)", r"(?i)\bA[b-]{0,4}\b", r"é\b|\bé",
                                     r"^(\b-|a\B){1,3}$", r"\d{2}\b\s?x"])
def test_word_boundaries_read_back_match_the_graph_route(pattern, numpy_only):
    """word_bounds reads a pattern's markers as empty moves in one compiled call: the same language as
    the numpy route (the marked automaton written out as a graph and composed again), whether the
    boundary holds, cannot hold, or sits beside non-ASCII characters and escapes."""
    from kvx.grammar.schema import regex_parse

    want = numpy_only(regex_parse._pattern_dfa, pattern, 50_000, False, False)
    got = regex_parse._pattern_dfa(pattern, 50_000, False, False)
    assert _canonical(got) == _canonical(want)


def test_empty_move_kernel_stops_at_its_cap_and_the_deadline():
    """Markers read as empty moves: a chain whose every state may skip ahead by an empty move makes one
    subset state per position; past the cap it refuses (status -1), past the deadline it stops (-2)."""
    from kvx.grammar.automata import deadline

    n = 2000
    table = np.full((n, 1), -1, np.int32)
    table[:-1, 0] = np.arange(1, n, dtype=np.int32)
    eps_ptr, eps_dst = np.arange(n + 1, dtype=np.int64), np.minimum(np.arange(n, dtype=np.int64) + 2, n - 1)
    accepting = np.zeros(n, np.bool_)
    accepting[-1] = True
    status, rows, acc = graph_kernels.kernels().empty_moves(table, accepting, 0, eps_ptr, eps_dst, 4 * n, 1 << 16)
    # the start's closure {0, 2, 4, ...} reads on to {1, 2, 3, ...}: a few thousand subset states, each accepting
    assert status == 0 and acc.all() and (rows[:-1, 0] >= 0).sum() == len(rows) - 1
    assert graph_kernels.kernels().empty_moves(table, accepting, 0, eps_ptr, eps_dst, 100, 1 << 16)[0] == -1
    with deadline.within(deadline.Deadline(-1.0)):
        assert graph_kernels.kernels().empty_moves(table, accepting, 0, eps_ptr, eps_dst, 4 * n, 100)[0] == -2


@pytest.mark.parametrize("schema", LINKED[:4])
def test_frame_boundaries_match_numpy(schema, numpy_only):
    """The compiled frame boundaries (the bytes that leave a frame, per calling or popping state) are
    numpy's, row for row."""
    from kvx.grammar.tokens.frames import boundary_of

    program = compile_program(schema, GrammarOptions(extra_keys="schema")).program
    got, want = boundary_of(program), numpy_only(boundary_of, program)
    assert np.array_equal(got.row, want.row) and np.array_equal(got.bytes, want.bytes)
    assert got.bytes.any(axis=1).all() and len(got.bytes) > 1  # every boundary state leaves on some byte
