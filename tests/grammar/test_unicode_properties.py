r"""Unicode property escapes in patterns (`\p{Letter}`, `\P{Lu}`, `\p{Script=Greek}`): the grammar,
kvx's record check and the `regex` package, which reads them as ECMA-262's Unicode mode does (the
reference here), agree on every string tried. jsonschema alone refused such a schema ("not a
'regex'": Python's re cannot read them) and the grammar refused the pattern."""
from __future__ import annotations

import json
import random
import re

import pytest
import regex

from kvx.errors import ConfigError
from kvx.grammar.errors import UnsupportedSchema
from kvx.grammar.options import GrammarOptions
from kvx.grammar.schema.charset import ANY
from kvx.grammar.schema.compiler import compile_program
from kvx.grammar.schema.charset import complement as cs_complement
from kvx.grammar.schema.unicode_properties import property_ranges, python_pattern
from kvx.job.validation import RecordChecker, load_schema

SCHEMA_KEYS = GrammarOptions(extra_keys="schema")
PATTERNS = [r"^\p{Letter}+$", r"^\p{Lu}\p{Ll}*$", r"^[\p{L}0-9_-]{1,4}$", r"^\P{L}+$", r"^[^\p{N}\s]+$",
            r"\p{Script=Greek}", r"^\p{gc=Nd}{2}$", r"^a\\p{L}$", r"(?i)^\p{Lu}+$", r"^[\P{Ll}]x$"]
STRINGS = ["Hello", "π", "123", "", "a1", "ΔΔ", "É9", "_-", "日本", "١٢", "😀", "Ⅻ", "ǅ", "abc", "ABC", "a\\p",
           "ẞx", "Zx", "zx", "ab cd", "αβγδε", "12"]


def _strings() -> list[str]:
    rng = random.Random(7)
    scalars = [cp for lo, hi in ANY for cp in (lo, hi, (lo + hi) // 2)]
    return STRINGS + ["".join(chr(rng.choice([rng.randrange(0x20, 0x3000), rng.randrange(0x10000, 0x1F700),
                                               rng.choice(scalars)])) for _ in range(rng.randrange(1, 4)))
                      for _ in range(150)]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_a_property_pattern_reads_as_the_regex_package_reads_it(pattern):
    schema = {"type": "string", "pattern": pattern}
    program = compile_program(schema, SCHEMA_KEYS).program
    check = RecordChecker(schema)
    for text in _strings():
        if text and 0xD800 <= ord(text[0]) <= 0xDFFF:
            continue
        expected = regex.search(pattern, text) is not None
        assert (check.problem(text) is None) == expected, (pattern, text)
        written = json.dumps(text, ensure_ascii=False).encode("utf-8", "surrogatepass")
        assert program.accepts(written) == expected, (pattern, text)


@pytest.mark.parametrize("name", ["L", "Letter", "Lu", "Nd", "P", "Script=Han", "sc=Greek", "White_Space",
                                  "ASCII", "Emoji"])
def test_python_spelling_of_a_property_holds_every_scalar_the_property_does(name):
    """Over every Unicode scalar value at once: what Python's re finds of the respelt class is
    what `regex` finds of the escape, inside a class and negated too."""
    every = "".join(chr(lo) + chr(hi) for lo, hi in ANY) + "".join(map(chr, range(0x20, 0x3400)))
    every += "".join(map(chr, range(0x1F000, 0x1FB00)))
    for pattern in (rf"\p{{{name}}}", rf"\P{{{name}}}", rf"[\p{{{name}}}_]", rf"[^\p{{{name}}}]"):
        assert re.findall(python_pattern(pattern), every) == regex.findall(pattern, every), pattern


def test_pattern_properties_sort_keys_by_a_property():
    """The suite's `patternProperties` group and more: a letter key takes its schema's value, the
    others stay open (JSON Schema's additionalProperties default)."""
    schema = {"type": "object", "patternProperties": {r"^\p{Letter}+$": {"type": "number"}},
              "additionalProperties": {"type": "boolean"}}
    program = compile_program(schema, SCHEMA_KEYS).program
    check = RecordChecker(schema)
    for value in ({"π": 1}, {"123": 1}, {"π": "x"}, {"ab": 2, "1": True}, {"日本": 3}, {"x1": 2}, {"x1": False}):
        letters = [k for k in value if regex.fullmatch(r"\p{Letter}+", k)]
        expected = all(isinstance(value[k], int) for k in letters) and \
            all(isinstance(v, bool) for k, v in value.items() if k not in letters)
        assert (check.problem(value) is None) == expected, value
        assert program.accepts(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()) == expected, value


def test_the_check_names_the_pattern_as_the_schema_writes_it():
    problem = RecordChecker({"properties": {"name": {"pattern": r"^\p{Lu}"}}}).problem({"name": "lower"})
    assert problem == r"schema: 'lower' does not match '^\\p{Lu}' at /name"


def test_a_schema_file_with_a_property_escape_loads_and_an_unknown_one_is_refused_in_one_line(tmp_path):
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"type": "object", "properties": {"name": {"type": "string", "pattern": r"^\p{L}+$"}},
                                "patternProperties": {r"^\P{L}": {"type": "integer"}}}))
    assert load_schema(str(good))["properties"]["name"]["pattern"] == r"^\p{L}+$"  # as written
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"type": "string", "pattern": r"^\p{NoSuchProperty}$"}))
    with pytest.raises(ConfigError, match=r"not a valid JSON Schema .* is not a 'regex' at /pattern\)$"):
        load_schema(str(bad))
    other = tmp_path / "other.json"  # a known property beside what Python's re cannot read: named as written
    other.write_text(json.dumps({"type": "string", "pattern": r"^\p{L}+(?<n>x)$"}))
    with pytest.raises(ConfigError) as refused:
        load_schema(str(other))
    assert str(refused.value).endswith(r"not a valid JSON Schema ('^\\p{L}+(?<n>x)$' is not a 'regex' at /pattern)")
    with pytest.raises(UnsupportedSchema, match=r"Unicode property 'NoSuchProperty'") as err:
        compile_program({"type": "string", "pattern": r"^\p{NoSuchProperty}$"})
    assert "\n" not in str(err.value)
    with pytest.raises(UnsupportedSchema, match="without its '}'"):
        compile_program({"type": "string", "pattern": r"^\p{L+$"})


@pytest.mark.parametrize("ranges", [property_ranges("L"), property_ranges("Lu"), cs_complement(((0x41, 0x5A),))])
def test_a_wide_class_is_one_minimal_automaton_of_the_same_language(ranges):
    """A class of more than WIDE_CLASS ranges is built once and minimised (`\\p{L}`: 3,618 composed
    states, which every pattern holding it composed again, 819 minimal; containerlab's port pattern
    0.78 -> 0.38 s). Its language is every spelling of its characters, as written out: the two
    minimal automata are the same table (breadth-first numbered)."""
    from kvx.grammar.automata import regex_ast as ra
    from kvx.grammar.automata.compose import fast_compile
    from kvx.grammar.automata.determinize import minimise
    from kvx.grammar.schema import strings

    built = strings.json_char(ranges)
    written = fast_compile(strings._spellings(ranges))
    if len(ranges) <= strings.WIDE_CLASS:
        assert not isinstance(built, ra.Embed)
        return
    assert isinstance(built, ra.Embed) and built.dfa.num_states < written.num_states
    ours, theirs = minimise(built.dfa.trans, built.dfa.accepting, built.dfa.start), \
        minimise(written.trans, written.accepting, written.start)
    assert ours[0].shape == theirs[0].shape and (ours[0] == theirs[0]).all() and (ours[1] == theirs[1]).all()


def test_a_wide_class_is_kept_on_disk_and_a_later_process_loads_the_same_automaton(tmp_path, monkeypatch):
    """Built once a machine (stored_automata.py): a fresh process compiling a `\\p{L}` pattern spent
    178 of its 0.55 s deadline building the class. The entry loads as the table that was built; an
    unreadable entry is rebuilt. (json_char.__wrapped__: the call without the process's memo.)"""
    from kvx.grammar.schema import strings
    from kvx.grammar.schema.charset import subtract

    monkeypatch.setenv("KVX_CACHE", str(tmp_path))
    ranges = subtract(property_ranges("Ll"), ((0x61, 0x61),))  # a class no other test builds
    assert len(ranges) > strings.WIDE_CLASS
    build = strings._wide_class
    built = strings.json_char(ranges).dfa
    (entry,) = (tmp_path / "grammar" / "classes").iterdir()

    def never(_ranges):
        raise AssertionError("built again")

    monkeypatch.setattr(strings, "_wide_class", never)
    loaded = strings.json_char.__wrapped__(ranges).dfa
    assert (loaded.trans == built.trans).all() and (loaded.accepting == built.accepting).all()
    entry.write_bytes(b"not an npz")
    monkeypatch.setattr(strings, "_wide_class", build)
    rebuilt = strings.json_char.__wrapped__(ranges).dfa
    assert (rebuilt.trans == built.trans).all() and entry.stat().st_size > 100
