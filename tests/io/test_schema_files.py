"""A schema split over local files (kvx/job/schema_files.py): bundled into one document whose record
check, grammar and prompt agree with `jsonschema` reading the files themselves (a referencing
registry of the real files is the reference); missing or broken files are one-line errors."""
import json
from pathlib import Path

import jsonschema
import pytest
import referencing
from referencing.jsonschema import DRAFT7, DRAFT202012

from kvx.errors import ConfigError
from kvx.grammar import GrammarOptions
from kvx.grammar.errors import UnsupportedSchema
from kvx.grammar.schema.compiler import compile_program
from kvx.job.validation import RecordChecker, load_schema
from kvx.prompts import PromptBuilder, PromptSpec

ROOT = {"type": "object", "properties": {"who": {"$ref": "common/person.json"},
                                         "where": {"$ref": "common/defs.json#/$defs/place"}},
        "required": ["who"], "additionalProperties": False}
PERSON = {"type": "object", "properties": {"name": {"type": "string"}, "home": {"$ref": "defs.json#/$defs/place"},
                                           "friend": {"$ref": "person.json"}},
          "required": ["name"], "additionalProperties": False}
DEFS = {"$defs": {"place": {"type": "object", "properties": {"city": {"type": "string"},
                                                             "zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
                            "required": ["city"], "additionalProperties": False}}}
CASES = ['{"who":{"name":"Ann"}}', '{"who":{"name":"Ann","home":{"city":"Oslo","zip":"12345"}}}',
         '{"who":{"name":"Ann","home":{"zip":"12345"}}}', '{"who":{"name":"Ann","home":{"city":"Oslo","zip":"1234"}}}',
         '{"who":{"name":"A","friend":{"name":"B","friend":{"name":"C"}}}}', '{"who":{"name":"A","friend":{}}}',
         '{"who":{"name":"A"},"where":{"city":"Rome"}}', '{"where":{"city":"Rome"}}', '{"who":{"name":1}}']


def _write(folder: Path, files: dict) -> Path:
    for name, doc in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(json.dumps(doc))
    return folder / next(iter(files))


def _reference(root_path: Path, spec=DRAFT202012):
    """jsonschema over the real files: each one a resource under its file URI, the root entered by
    a $ref to its URI (so its own refs resolve from there)."""
    resources = [(p.resolve().as_uri(), spec.create_resource(json.loads(p.read_text())))
                 for p in root_path.parent.rglob("*.json")]
    registry = referencing.Registry().with_resources(resources)
    cls = jsonschema.validators.validator_for(json.loads(root_path.read_text()))
    return cls({"$ref": root_path.resolve().as_uri()}, registry=registry)


def test_files_are_bundled_and_agree_with_jsonschema_on_the_files(tmp_path):
    path = _write(tmp_path, {"root.json": ROOT, "common/person.json": PERSON, "common/defs.json": DEFS})
    bundled = load_schema(str(path))
    assert sorted(bundled["$defs"]) == ["kvx:file:common/defs.json", "kvx:file:common/person.json"]
    reference, checker = _reference(path), RecordChecker(bundled)
    program = compile_program(bundled, GrammarOptions()).program
    verdicts = [reference.is_valid(json.loads(c)) for c in CASES]
    assert verdicts.count(True) == 4 and verdicts.count(False) == 5  # the cases test both ways
    for case, want in zip(CASES, verdicts):
        assert (checker.problem(json.loads(case)) is None) == want, case
        assert program.accepts(case.encode()) == want, case


def test_the_prompt_describes_fields_from_other_files(tmp_path):
    from kvx.models import load_tokenizer

    path = _write(tmp_path, {"root.json": ROOT, "common/person.json": PERSON, "common/defs.json": DEFS})
    text = PromptBuilder(PromptSpec(), load_schema(str(path)), load_tokenizer("smollm2-135m")).system
    assert "- name: text" in text and "zip: text, matching ^[0-9]{5}$" in text


def test_a_draft7_root_that_is_only_a_ref_to_a_file(tmp_path):
    # before 2019-09 a $ref hides its siblings: the bundle's $id and definitions must not sit beside it
    root = {"$schema": "http://json-schema.org/draft-07/schema#", "$ref": "item.json"}
    item = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    path = _write(tmp_path, {"root.json": root, "item.json": item})
    bundled = load_schema(str(path))
    reference, checker = _reference(path, DRAFT7), RecordChecker(bundled)
    program = compile_program(bundled, GrammarOptions()).program
    for case in ['{"n":1}', '{"n":"x"}', '{}']:
        want = reference.is_valid(json.loads(case))
        assert (checker.problem(json.loads(case)) is None) == want
        assert program.accepts(case.encode()) == want


def test_a_file_in_another_draft_is_read_as_the_check_reads_it(tmp_path):
    """A draft-04 file bundled into a draft-07 schema is embedded under draft 4's `id` (with `$id`,
    jsonschema's draft-4 reading found no resource there, and the file's own `#/definitions/n`
    resolved in the root). jsonschema reads the file's root in draft 4 (it names its $schema), its
    boolean exclusiveMinimum too, but a definition reached by pointer from the draft-07 root in draft
    7: `maximum` beside the $ref ignored. The grammar reads each as the check does; a boolean
    exclusiveMinimum read in draft 7 (the check takes true for the number 1) is refused."""
    root = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
            "properties": {"a": {"$ref": "old.json#/definitions/pos"}, "b": {"$ref": "old.json"}}, "required": ["a"]}
    old = {"$schema": "http://json-schema.org/draft-04/schema#", "type": ["integer", "object"],
           "properties": {"c": {"type": "number", "minimum": 0, "exclusiveMinimum": True}},
           "definitions": {"pos": {"$ref": "#/definitions/n", "maximum": 5},
                           "n": {"type": "integer", "minimum": 0}}}
    path = _write(tmp_path, {"root.json": root, "old.json": old})
    bundled = load_schema(str(path))
    assert bundled["definitions"]["kvx:file:old.json"]["id"].endswith("old.json")
    resources = [(p.resolve().as_uri(), referencing.Resource.from_contents(json.loads(p.read_text())))
                 for p in tmp_path.glob("*.json")]
    reference = jsonschema.Draft7Validator({"$ref": path.resolve().as_uri()},
                                           registry=referencing.Registry().with_resources(resources))
    checker, program = RecordChecker(bundled), compile_program(bundled, GrammarOptions()).program
    cases = ['{"a":3}', '{"a":9}', '{"a":0}', '{"a":-1}', '{"a":"x"}', '{"a":2,"b":{"c":1}}', '{"a":2,"b":{"c":0}}']
    verdicts = {case: reference.is_valid(json.loads(case)) for case in cases}
    assert list(verdicts.values()) == [True, True, True, False, False, True, False]
    for case, want in verdicts.items():
        assert (checker.problem(json.loads(case)) is None) == want, case
        assert program.accepts(case.encode()) == want, case
    old["definitions"]["n"]["exclusiveMinimum"] = True
    _write(tmp_path, {"old.json": old})
    with pytest.raises(UnsupportedSchema, match=r"'exclusiveMinimum' must be a number in draft7 \(a boolean is draft "
                                                r"4's\) at old.json#/definitions/n"):
        compile_program(load_schema(str(path)), GrammarOptions())


def test_each_file_is_held_to_its_own_drafts_meta_schema(tmp_path):
    root = {"$schema": "http://json-schema.org/draft-07/schema#", "properties": {"a": {"$ref": "old.json"}}}
    old = {"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer", "exclusiveMinimum": 3}
    path = _write(tmp_path, {"root.json": root, "old.json": old})
    with pytest.raises(ConfigError, match=r"not a valid JSON Schema \(3 is not of type 'boolean' at "
                                          r"/definitions/kvx:file:old.json/exclusiveMinimum\)"):
        load_schema(str(path))


def test_an_http_id_reads_the_neighbours_from_the_root_folder(tmp_path):
    root = {"$id": "https://example.com/schemas/root.json", "type": "object",
            "properties": {"p": {"$ref": "https://example.com/schemas/defs.json#/$defs/place"}}}
    path = _write(tmp_path, {"root.json": root, "defs.json": DEFS})
    checker = RecordChecker(load_schema(str(path)))
    assert checker.problem({"p": {"city": "Oslo"}}) is None
    assert "city" in checker.problem({"p": {}})


def test_a_schema_naming_no_file_is_returned_as_it_was(tmp_path):
    schema = {"type": "object", "properties": {"a": {"$ref": "#/$defs/a"}}, "$defs": {"a": {"type": "string"}}}
    path = _write(tmp_path, {"root.json": schema})
    assert load_schema(str(path)) == schema


@pytest.mark.parametrize("files, message", [
    ({"root.json": {"properties": {"a": {"$ref": "gone.json"}}}},
     "$ref 'gone.json' at /properties/a: no such schema file"),
    ({"root.json": {"properties": {"a": {"$ref": "bad.json"}}}, "bad.json": "not json"},
     "$ref 'bad.json' at /properties/a: cannot read"),
    ({"root.json": {"$ref": "list.json"}, "list.json": [1, 2]}, "is not a JSON Schema"),
    ({"root.json": {"$ref": "a.json"}, "a.json": {"properties": {"x": {"$ref": "nope.json"}}}},
     "$ref 'nope.json' at a.json#/properties/x: no such schema file"),
])
def test_a_missing_or_broken_file_is_one_line_naming_the_ref(tmp_path, files, message):
    path = _write(tmp_path, {k: v for k, v in files.items() if v != "not json"})
    if "bad.json" in files:
        (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ConfigError) as err:
        load_schema(str(path))
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_refusal_inside_a_file_names_that_file(tmp_path):
    path = _write(tmp_path, {"root.json": {"$ref": "part.json"},
                             "part.json": {"type": "object", "properties": {"x": {"$ref": "https://x.test/y"}}}})
    with pytest.raises(UnsupportedSchema) as err:
        compile_program(load_schema(str(path)), GrammarOptions())
    assert "at part.json#/properties/x/$ref" in str(err.value)


def test_parquet_columns_follow_refs_into_files_as_if_inlined(tmp_path):
    from kvx.io.arrow_schema import column_for

    path = _write(tmp_path, {"root.json": {"type": "object", "properties": {
        "where": {"$ref": "common/defs.json#/$defs/place"}, "when": {"type": "string"}}}, "common/defs.json": DEFS})
    inlined = {"type": "object", "properties": {"where": DEFS["$defs"]["place"], "when": {"type": "string"}}}
    assert column_for(load_schema(str(path))).type == column_for(inlined).type
    assert str(column_for(inlined).type.field("where").type).startswith("struct<city: string")


def test_the_root_named_by_its_file_name_is_the_root_not_a_copy(tmp_path):
    root = {"type": "object", "properties": {"a": {"$ref": "root.json#/$defs/n"}, "b": {"$ref": "sub/b.json"}},
            "$defs": {"n": {"type": "integer"}}}
    path = _write(tmp_path, {"root.json": root, "sub/b.json": {"$ref": "../root.json#/$defs/n"}})
    bundled = load_schema(str(path))
    assert sorted(bundled["$defs"]) == ["kvx:file:sub/b.json", "n"]  # no copy of the root
    reference, checker = _reference(path), RecordChecker(bundled)
    program = compile_program(bundled, GrammarOptions()).program
    for case in ['{"a":1,"b":2}', '{"a":"x"}', '{"b":"y"}', '{}']:
        want = reference.is_valid(json.loads(case))
        assert (checker.problem(json.loads(case)) is None) == want, case
        assert program.accepts(case.encode()) == want, case


def test_schema_check_names_the_files_it_bundled(tmp_path, capsys, monkeypatch):
    from kvx.cli.schema import run_schema_check
    from kvx.models import load_tokenizer

    monkeypatch.setenv("KVX_CACHE", str(tmp_path / "cache"))

    path = _write(tmp_path, {"root.json": ROOT, "common/person.json": PERSON, "common/defs.json": DEFS})
    assert run_schema_check(str(path), None, True, tokenizer=load_tokenizer("smollm2-135m")) == 0
    assert json.loads(capsys.readouterr().out)["files"] == ["common/defs.json", "common/person.json"]


# ---- http(s) references read from saved schemas (--schema-dir) --------------------------------
REMOTE_ROOT = {"type": "object", "properties": {"who": {"$ref": "https://schemas.acme.test/person.json"},
                                                "where": {"$ref": "https://example.org/s/defs.json#/$defs/place"}},
               "required": ["who"], "additionalProperties": False}
SAVED = {"anywhere/person.json": {**PERSON, "$id": "https://schemas.acme.test/person.json"},  # found by its $id
         "anywhere/defs.json": {**DEFS, "$id": "https://schemas.acme.test/defs.json"},  # its relative ref's target
         "example.org/s/defs.json": DEFS}  # no $id: found at host/path, as a mirror keeps it


def _saved_reference(root: dict):
    """jsonschema over the saved files, each a resource under the URI the references use."""
    resources = [(uri, DRAFT202012.create_resource(doc)) for uri, doc in [
        ("https://schemas.acme.test/person.json", SAVED["anywhere/person.json"]),
        ("https://schemas.acme.test/defs.json", SAVED["anywhere/defs.json"]),
        ("https://example.org/s/defs.json", DEFS)]]
    return jsonschema.Draft202012Validator(root, registry=referencing.Registry().with_resources(resources))


def test_saved_schemas_resolve_http_refs_by_id_or_mirror_path(tmp_path):
    path = _write(tmp_path / "job", {"root.json": REMOTE_ROOT})
    saved = _write(tmp_path / "saved", SAVED).parent.parent
    with pytest.raises(UnsupportedSchema, match="remote reference 'https://schemas.acme.test/person.json'"):
        compile_program(load_schema(str(path)), GrammarOptions())  # without the folder: refused, as before
    bundled = load_schema(str(path), (str(saved),))
    assert sorted(bundled["$defs"]) == ["kvx:file:https://example.org/s/defs.json",  # named by URI, not by path
                                        "kvx:file:https://schemas.acme.test/defs.json",
                                        "kvx:file:https://schemas.acme.test/person.json"]
    reference, checker = _saved_reference(REMOTE_ROOT), RecordChecker(bundled)
    program = compile_program(bundled, GrammarOptions()).program
    verdicts = [reference.is_valid(json.loads(c)) for c in CASES]
    assert verdicts.count(True) == 4 and verdicts.count(False) == 5
    for case, want in zip(CASES, verdicts):
        assert (checker.problem(json.loads(case)) is None) == want, case
        assert program.accepts(case.encode()) == want, case


def test_the_bundle_does_not_depend_on_where_the_saved_folder_lies(tmp_path):
    path = _write(tmp_path / "job", {"root.json": REMOTE_ROOT})
    one = _write(tmp_path / "a" / "saved", SAVED).parent.parent
    two = _write(tmp_path / "b" / "deeper" / "saved", SAVED).parent.parent
    assert load_schema(str(path), (str(one),)) == load_schema(str(path), (str(two),))


@pytest.mark.parametrize("saved, message", [
    ({}, "no schema in schema_dir"),
    ({"x.json": {"$id": "https://schemas.acme.test/person.json"}, "y.json": {"$id": "https://schemas.acme.test/person.json"}},
     "both declare the $id 'https://schemas.acme.test/person.json'"),
])
def test_a_saved_schema_missing_or_declared_twice_is_one_line(tmp_path, saved, message):
    path = _write(tmp_path / "job", {"root.json": REMOTE_ROOT})
    folder = tmp_path / "saved"
    folder.mkdir()
    if saved:
        _write(folder, saved)
    with pytest.raises(ConfigError) as err:
        load_schema(str(path), (str(folder),))
    assert message in str(err.value) and "$ref 'https://schemas.acme.test/person.json' at /properties/who" in str(err.value)
    assert "\n" not in str(err.value)


def test_the_command_line_names_the_flag(tmp_path, capsys):
    from kvx.cli.main import main

    path = _write(tmp_path, {"root.json": REMOTE_ROOT})
    assert main(["schema", "check", str(path), "--schema-dir", str(tmp_path / "nope")]) == 2
    assert "--schema-dir" in capsys.readouterr().err
    with pytest.raises(UnsupportedSchema) as err:
        compile_program(load_schema(str(path)), GrammarOptions())
    assert err.value.naming("--schema-dir").endswith("name its folder with --schema-dir")


def test_a_file_ref_inside_a_group_of_definitions_is_bundled_and_data_is_not_read(tmp_path):
    """A `$ref` under a key no keyword walks (a group of definitions, reached by pointer) names a file
    as any other does; a "$ref" key inside `examples` or `default` is data, not a file to read; a
    property that happens to be called `default` is a schema."""
    root = {"type": "object", "properties": {"x": {"$ref": "#/$defs/group/a"}, "default": {"$ref": "b.json"}},
            "$defs": {"group": {"a": {"$ref": "a.json"}}},
            "examples": [{"$ref": "not-a-file.json"}], "default": {"$ref": "nor-this.json"}}
    path = _write(tmp_path, {"root.json": root, "a.json": {"type": "integer"}, "b.json": {"type": "boolean"}})
    bundled = load_schema(str(path))
    assert sorted(bundled["$defs"]) == ["group", "kvx:file:a.json", "kvx:file:b.json"]
    reference, checker = _reference(path), RecordChecker(bundled)
    program = compile_program(bundled, GrammarOptions()).program
    cases = ['{"x":1}', '{"x":"1"}', '{"default":true}', '{"default":1}', '{}']
    verdicts = [reference.is_valid(json.loads(c)) for c in cases]
    assert verdicts == [True, False, True, False, True]
    for case, want in zip(cases, verdicts):
        assert (checker.problem(json.loads(case)) is None) == want, case
        assert program.accepts(case.encode()) == want, case


def test_a_mirror_path_never_leaves_the_saved_folder(tmp_path):
    root = {"type": "object", "properties": {"a": {"$ref": "https://h/../../outside.json"}}}
    path = _write(tmp_path / "job", {"root.json": root})
    _write(tmp_path, {"outside.json": {"type": "integer"}})  # where h/../../ would lead from the folder
    (tmp_path / "saved" / "h").mkdir(parents=True)
    with pytest.raises(ConfigError, match="no schema in schema_dir"):
        load_schema(str(path), (str(tmp_path / "saved"),))


def test_a_value_the_check_recurses_on_forever_gets_a_row_error():
    """`then: {$ref: "#"}` under an `if` the value meets: jsonschema recursed without end and the
    RecursionError escaped as a traceback; the value gets a one-line problem, others are judged."""
    checker = RecordChecker({"if": {"const": 1}, "then": {"$ref": "#"}, "type": "integer"})
    assert checker.problem(2) is None and "type" in checker.problem("a")
    problem = checker.problem(1)
    assert problem.startswith("schema: the check recurses without end") and "\n" not in problem


def test_a_schema_the_check_recurses_on_for_every_value_stops_before_work(tmp_path):
    """`not: {if: {not: {$ref: "#"}}}` compiles (an `if` alone changes nothing) but jsonschema walks
    the cycle on every value: a one-line ConfigError (exit 2) at load, not a failed row each."""
    schema = {"not": {"if": {"not": {"$ref": "#"}}, "type": "string"}}
    compile_program(schema, GrammarOptions())  # the grammar takes it
    path = _write(tmp_path, {"loop.json": schema})
    with pytest.raises(ConfigError, match="recurses without end"):
        load_schema(str(path))
    path = _write(tmp_path, {"ok.json": {"if": {"const": 1}, "then": {"$ref": "#"}}})
    assert load_schema(str(path))["then"] == {"$ref": "#"}  # a cycle only some values walk: their rows say so
