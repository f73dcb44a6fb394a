"""The pushdown layer at the token level: depth and recursion unbounded (up to the safety limit),
random token walks under a length budget on nested and recursive schemas always end in documents
jsonschema accepts, and the compile deadline refuses in time (checked with an injected clock)."""
import json

import jsonschema
import numpy as np
import pytest
from grammar_fixtures import smol_tokenizer

from kvx.grammar import UnsupportedSchema, compile_schema
from kvx.grammar.automata.deadline import Deadline
from kvx.grammar.schema.compiler import compile_program

TREE = {"$defs": {"node": {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 6},
    "children": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 3}},
    "required": ["name"], "additionalProperties": False}}, "$ref": "#/$defs/node"}
NESTED = {"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"type": "array", "items": {
    "type": "object", "properties": {"c": {"type": "array", "items": {"type": "array", "items": {
        "anyOf": [{"type": "integer"}, {"type": "object", "properties": {"d": {"type": "array"}}}]}}}},
    "required": ["c"]}}}, "required": ["b"]}}, "required": ["a"]}
JSON_VALUE = {"$defs": {"v": {"anyOf": [{"type": ["null", "boolean", "number", "string"]},
                                        {"type": "array", "items": {"$ref": "#/$defs/v"}},
                                        {"type": "object", "additionalProperties": {"$ref": "#/$defs/v"}}]}},
              "$ref": "#/$defs/v"}
BRANCHES = {"anyOf": [{"type": "array", "items": {"type": "object", "properties": {"x": {"type": "integer"}},
                                                  "required": ["x"], "additionalProperties": False}},
                      {"type": "array", "items": {"type": "object", "properties": {"x": {"type": "string"}},
                                                  "required": ["x"], "additionalProperties": False}}]}

# four object shapes in one slot, three of them open to other keys (rules.SPLIT_OBJECTS_FROM: each
# shape is its own rule, the run time follows every frame that fits `{`), recursive through `kids`
SHAPES = {"$defs": {"u": {"anyOf": [
    {"type": "object", "properties": {"kind": {"const": "a"}, "n": {"type": "integer"},
                                      "kids": {"type": "array", "items": {"$ref": "#/$defs/u"}, "maxItems": 2}},
     "required": ["kind"], "additionalProperties": {"type": "integer"}},
    {"type": "object", "properties": {"kind": {"const": "b"}, "s": {"type": "string", "maxLength": 4}},
     "required": ["kind"], "additionalProperties": {"type": "string", "maxLength": 3}},
    {"type": "object", "properties": {"x": {"type": "boolean"},
                                      "kids": {"type": "array", "items": {"$ref": "#/$defs/u"}, "maxItems": 2}},
     "required": ["x"], "additionalProperties": False},
    {"type": "object", "properties": {"y": {"type": "null"}}, "additionalProperties": {"type": "boolean"}},
    {"type": "integer"}]}}, "$ref": "#/$defs/u"}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KVX_CACHE", str(tmp_path))


def walk(grammar, rng, max_tokens, deepen=0.0):
    """A random walk of allowed tokens (preferring `[`/`{` tokens with probability `deepen`)."""
    m = grammar.matcher(max_tokens=max_tokens)
    opens = np.array([bool(tb) and tb[:1] in (b"[", b"{") for tb in grammar.vocab.token_bytes])
    ids = []
    while not m.is_finished():
        if rng.random() < 0.5:
            forced = m.forced_tokens()
            if forced:
                for tid in forced:
                    m.advance(tid)
                ids += forced
                continue
        mask = m.allowed_mask().numpy()
        allowed = np.flatnonzero(mask & opens) if rng.random() < deepen and (mask & opens).any() else np.flatnonzero(mask)
        assert len(allowed), "the mask may never be empty before EOS"
        tid = int(rng.choice(allowed))
        m.advance(tid)
        ids.append(tid)
    assert len(ids) <= max_tokens and ids[-1] in grammar.vocab.eos_ids
    return b"".join(grammar.vocab.token_bytes[i] for i in ids[:-1]).decode("utf-8")


def depth(v) -> int:
    if isinstance(v, (dict, list)):
        return 1 + max((depth(x) for x in (v.values() if isinstance(v, dict) else v)), default=0)
    return 0


@pytest.mark.parametrize("schema,deep", [(TREE, 4), (NESTED, 5), (JSON_VALUE, 5), (BRANCHES, 2), ({"type": "array"}, 5),
                                         (SHAPES, 1)],
                         ids=["tree", "nested", "json-value", "anyOf-arrays", "any-array", "object-shapes"])
def test_random_walks_under_budget_end_valid(schema, deep, cache):
    grammar = compile_schema(schema, smol_tokenizer())
    need = grammar.matcher().min_tokens_to_finish()
    rng = np.random.default_rng(7)
    deepest = 0
    for i in range(12):
        text = walk(grammar, rng, need + int(rng.integers(0, 60)), deepen=0.6 if i % 2 else 0.0)
        value = json.loads(text)
        jsonschema.validate(value, schema)
        deepest = max(deepest, depth(value))
    assert deepest >= deep  # where the schema allows, the walks went past the old depth cap of 4


def test_tight_budget_closes_deep_documents(cache):
    """Deep inside, with just enough tokens left to close every frame, the walk still ends valid."""
    grammar = compile_schema(JSON_VALUE, smol_tokenizer())
    rng = np.random.default_rng(3)
    deepest = 0
    for _ in range(5):
        m = grammar.matcher(max_tokens=60)
        ids = []
        while not m.is_finished():
            mask = m.allowed_mask().numpy()
            opens = [t for t in np.flatnonzero(mask) if grammar.vocab.token_bytes[t] in (b"[", b"[[", b"{\"")]
            tid = int(rng.choice(opens)) if opens and rng.random() < 0.8 else int(rng.choice(np.flatnonzero(mask)))
            m.advance(tid)
            ids.append(tid)
        assert len(ids) <= 60
        value = json.loads(b"".join(grammar.vocab.token_bytes[i] for i in ids[:-1]))
        jsonschema.validate(value, JSON_VALUE)
        deepest = max(deepest, depth(value))
    assert deepest >= 5


def feed(grammar, text: str) -> bool:
    """Does the matcher accept the tokenizer's own tokens of `text`, then EOS?"""
    tok = smol_tokenizer()
    m = grammar.matcher()
    for tid in tok.encode(text, add_special_tokens=False):
        if not m.is_allowed(tid):
            return False
        m.advance(tid)
    return m.is_accepting()


def test_fifty_deep_instance_and_the_level_four_off_by_one(cache):
    tree = compile_schema(TREE, smol_tokenizer())
    deep = {"name": "n0"}
    for i in range(1, 50):
        deep = {"name": f"n{i}", "children": [deep]}
    text = json.dumps(deep, separators=(",", ":"))
    assert depth(deep) == 99 and feed(tree, text)
    assert not feed(tree, text.replace('"n0"', "0"))  # a wrong leaf, 99 levels down
    any_array = compile_schema({"type": "array"}, smol_tokenizer())
    assert feed(any_array, '[[[["a"]]]]') and feed(any_array, "[[[[]]]]")
    assert feed(any_array, "[" * 50 + '"x"' + "]" * 50)


def test_depth_safety_limit(cache):
    grammar = compile_schema({"type": "array"}, smol_tokenizer(), max_depth=6)
    assert feed(grammar, "[[[[[[1]]]]]]")
    assert not feed(grammar, "[[[[[[[1]]]]]]]")
    m = grammar.matcher()
    for tid in smol_tokenizer().encode("[[[[[[", add_special_tokens=False):
        m.advance(tid)
    mask = m.allowed_mask().numpy()
    assert not any(grammar.vocab.token_bytes[t][:1] == b"[" for t in np.flatnonzero(mask))


class TickingClock:
    """A clock that advances a fixed step per reading: deadlines without wall-clock flakiness."""

    def __init__(self, step: float):
        self.now, self.step, self.reads = 0.0, step, 0

    def __call__(self) -> float:
        self.now += self.step
        self.reads += 1
        return self.now


def test_compile_deadline_refuses_in_time():
    """A schema whose compile needs many steps is refused once the (injected) clock passes the
    deadline, with a one-line message naming the place; the same schema compiles without it."""
    schema = {"type": "object", "properties": {f"p{i}": {"type": "string", "pattern": f"^[a-z]{{{i}}}x$"}
                                               for i in range(1, 40)}}
    clock = TickingClock(0.01)
    with pytest.raises(UnsupportedSchema, match=r"compile deadline of 1 s passed") as err:
        compile_program(schema, deadline=Deadline(1.0, clock=clock))
    assert "\n" not in str(err.value) and " at /" in str(err.value)
    assert 100 <= clock.reads <= 110  # it stopped at the first check past the deadline
    assert compile_program(schema).program.num_states > 0
    with pytest.raises(UnsupportedSchema, match="deadline"):
        compile_program({"type": "array"}, deadline=Deadline(-1.0))


def test_the_deadline_is_looked_at_between_enum_members(monkeypatch):
    """Each enum member is a jsonschema verdict per piece: cloudify's 204 node types against its many
    negated pieces ran 0.4 s between two looks at the deadline (refused at 0.98 s, the limit 1 s)."""
    from kvx.grammar.schema.scalars import Scalars

    verdicts, reads = [0], []  # verdicts so far, at each read of the clock
    judge = Scalars.valid

    def counted(self, *args):
        verdicts[0] += 1
        return judge(self, *args)

    monkeypatch.setattr(Scalars, "valid", counted)
    schema = {"type": "string", "enum": [f"v{i}" for i in range(300)], "not": {"const": "v3"}}
    compile_program(schema, deadline=Deadline(10.0, clock=lambda: reads.append(verdicts[0]) or 0.0))
    assert verdicts[0] >= 300
    assert max(b - a for a, b in zip(reads, reads[1:])) <= 8


def test_a_deadline_passing_before_the_walk_is_a_refusal(monkeypatch):
    """The passes over the whole document before the walk (indexing it, its dynamic references)
    took 0.4 s on a 2 MB schema: they look at the deadline too, and refuse in one line."""
    from kvx.grammar.schema.rules import RuleBuilder

    walked = []
    monkeypatch.setattr(RuleBuilder, "value", lambda self, *args: walked.append(args))
    schema = {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(5000)}}
    clock = TickingClock(1.0)
    with pytest.raises(UnsupportedSchema, match=r"^schema too large for the automaton at / \(compile deadline of 1.5 s"):
        compile_program(schema, deadline=Deadline(1.5, clock=clock))
    assert walked == [] and clock.reads <= 4


def test_the_unevaluated_scan_looks_at_the_deadline():
    """Whether a document uses unevaluated* is a walk over all of it (44 ms on a 2 MB schema): it
    looks at the deadline as it goes, and still finds the keyword however deep it sits."""
    from kvx.grammar.automata import deadline as deadlines
    from kvx.grammar.errors import DeadlinePassed
    from kvx.grammar.schema.applicators import uses_unevaluated

    wide = {"properties": {f"p{i}": {"type": "integer", "enum": [1, [2, {"x": 3}]]} for i in range(5000)}}
    deep = {"type": "object"}
    for _ in range(2000):  # deeper than Python's recursion limit
        deep = {"items": [deep]}
    deep["items"][0]["unevaluatedItems"] = False
    with deadlines.within(Deadline(10.0)):
        assert uses_unevaluated(deep) and not uses_unevaluated(wide)
    clock = TickingClock(1.0)
    with deadlines.within(Deadline(2.5, clock=clock)), pytest.raises(DeadlinePassed):
        uses_unevaluated(wide)
    assert clock.reads == 4  # one at the deadline's start, then every 4,096 values read


def test_a_word_boundarys_marker_removal_looks_at_the_deadline():
    """A `\\b` pattern's marked automaton, under the state cap, is read back as a graph by a loop
    over its [states, 256] table (24,507 states for a URL pattern: 0.5 s, and that pattern was
    refused 0.3 s past the deadline): the loop looks at the deadline every 1,024 states."""
    from kvx.grammar.automata import deadline as deadlines
    from kvx.grammar.automata.dfa import DFA
    from kvx.grammar.errors import DeadlinePassed
    from kvx.grammar.schema.word_bounds import _without_markers

    n = 5000
    trans = np.full((n, 256), -1, dtype=np.int32)
    trans[np.arange(n - 1), ord("a")] = np.arange(1, n)
    chain = DFA(trans, np.arange(n) == n - 1, 0)
    with deadlines.within(Deadline(10.0)):
        graph = _without_markers(chain)
    assert graph.num_states == n + 1 and len(graph.edges) == n and graph.finals == (n,)
    clock = TickingClock(1.0)
    with deadlines.within(Deadline(2.5, clock=clock)), pytest.raises(DeadlinePassed):
        _without_markers(chain)
    assert clock.reads == 4  # one at the deadline's start, then one every 1,024 states: the third is past it


def test_a_deadline_passing_under_a_cap_handler_is_said_as_the_deadline(monkeypatch):
    """Where a cap's refusal is caught (multipleOf's automaton, a length beside a pattern), a
    deadline that passed meanwhile still refuses as the deadline, not as that keyword's cap."""
    from kvx.grammar.automata import deadline as deadlines
    from kvx.grammar.errors import TooLarge
    from kvx.grammar.schema import numbers

    def capped(*args):
        deadlines.active().end = float("-inf")  # the deadline passes while the multiples are built
        raise TooLarge("more than 10 DFA states")

    monkeypatch.setattr(numbers, "multiple_of", capped)
    with pytest.raises(UnsupportedSchema, match=r"\(compile deadline of 5 s passed; compile_deadline allows longer\)$"):
        compile_program({"type": "integer", "multipleOf": 7}, deadline=Deadline(5.0))


def test_object_shapes_each_their_own_rule_agree_with_jsonschema(cache):
    """The slot of SHAPES calls one rule per object shape; byte and token walks of these texts
    agree with jsonschema, nested shapes included (members in kvx's order: `kids` is listed before
    `x` across the shapes)."""
    tok = smol_tokenizer()
    grammar = compile_schema(SHAPES, tok)
    check = jsonschema.Draft202012Validator(SHAPES)
    texts = ['{"kind":"a","n":1,"zz":2}', '{"kind":"a","zz":"s"}', '{"kind":"b","s":"abcd","zz":"abc"}',
             '{"kind":"b","zz":"abcd"}', '{"kids":[{"kind":"a"},{"y":null,"q":false}],"x":true}',
             '{"kids":[{"x":1}],"x":true}', '{"x":false,"q":1}', '{"y":null,"q":true}', '{}', '3', '"s"',
             '{"kind":"c"}', '{"kids":[{"kids":[{"kind":"b","s":"ok"}],"x":true}],"x":true}']
    for text in texts:
        ok = check.is_valid(json.loads(text))
        assert grammar.accepts_text(text) == ok, text
        m = grammar.matcher()
        walked = True
        for tid in tok.encode(text, add_special_tokens=False):
            if not m.is_allowed(tid):
                walked = False
                break
            m.advance(tid)
        assert (walked and m.is_accepting()) == ok, text


def test_the_cpu_deadline_reads_its_clock_only_once_the_wall_clock_could_pass_it(monkeypatch):
    """A thread's CPU time grows no faster than the wall clock: until that much wall time has gone by
    the deadline cannot have passed, and its CPU clock (a system call) is not read; once it has, the
    CPU clock decides."""
    import time as time_module

    wall = [100.0]
    monkeypatch.setattr(time_module, "perf_counter", lambda: wall[0])
    deadline = Deadline(1.0)
    reads = []
    deadline.clock = lambda: reads.append(1) or deadline._since + 2.0  # CPU time says: passed
    assert not deadline.passed() and reads == []  # no wall time yet: cannot have passed
    wall[0] += 1.5
    assert deadline.passed() and reads == [1]
    deadline.clock = lambda: deadline._since + 0.5  # CPU time says: not yet (the thread waited)
    assert not deadline.passed()
