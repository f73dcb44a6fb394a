"""Prompt building against the real tokenizer: the chat template is the model's own (compared with
transformers' apply_chat_template) and the once-tokenized shared prefix gives the same ids as
tokenizing each whole prompt."""
import json
from pathlib import Path

import pytest

from kvx.prompts import Example, PromptBuilder, PromptError, PromptSpec

REPO = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((REPO / "schemas" / "ticket.json").read_text())
RECORDS = [json.loads(line) for line in (REPO / "samples" / "tickets.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def tok():
    from kvx.models import load_tokenizer

    return load_tokenizer("smollm2-135m")


EXAMPLE = Example("Where is ORD-1?", {"category": "shipping", "priority": "low", "sentiment": "neutral",
                                       "summary": "asks for order status", "requires_refund": False})


@pytest.mark.parametrize("spec", [PromptSpec(), PromptSpec(examples=[EXAMPLE]), PromptSpec(raw=True),
                                  PromptSpec(template="[{channel}] {text}", system="Triage.")])
def test_prefix_split_matches_whole_prompt_tokenization(tok, spec):
    b = PromptBuilder(spec, SCHEMA, tok)
    assert b.shared_prefix_tokens() > 50
    for rec in RECORDS[:12]:
        assert b.prompt_ids(rec) == tok.encode(b.prompt_text(rec))


def test_chat_template_is_the_models(tok):
    b = PromptBuilder(PromptSpec(examples=[EXAMPLE]), SCHEMA, tok)
    rec = RECORDS[6]
    messages = [{"role": "system", "content": b.system},
                {"role": "user", "content": EXAMPLE.input},
                {"role": "assistant", "content": json.dumps(EXAMPLE.output, ensure_ascii=False)},
                {"role": "user", "content": rec["text"]}]
    expected = tok.hf.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert b.prompt_text(rec) == expected
    # the schema is described as a field list by default, as its JSON on request
    assert '\n- priority: one of "low", "medium", "high", "urgent"\n' in b.system
    assert "- order_id: text or null, matching ^[A-Z0-9-]{4,20}$ (optional)\n" in b.system
    as_json = PromptBuilder(PromptSpec(schema_style="json"), SCHEMA, tok).system
    assert json.dumps(SCHEMA, separators=(",", ":")) in as_json and "- priority" not in as_json


def test_missing_fields_and_escapes(tok):
    b = PromptBuilder(PromptSpec(template="{{not}} {a.b} / {c}"), SCHEMA, tok)
    assert b.user_text({"a": {"b": 1}, "c": ["x"]}) == '{not} 1 / ["x"]'
    with pytest.raises(PromptError, match="missing field 'c'"):
        b.user_text({"a": {"b": 1}})
    with pytest.raises(PromptError, match="missing field 'text'"):
        PromptBuilder(PromptSpec(), SCHEMA, tok).user_text({"text": None})


def test_fields_follow_refs_nesting_bounds_and_descriptions():
    from kvx.schema_text import describe_fields

    invoice = json.loads((REPO / "schemas" / "invoice.json").read_text())
    lines = describe_fields(invoice).splitlines()
    assert "- due_date: a date YYYY-MM-DD or null" in lines
    assert "- seller: object with the fields below" in lines and "  - vat_id: text or null, matching ^[A-Z]{2}[A-Z0-9]{2,12}$" in lines
    assert "- line_items: list of objects with the fields below, at most 10 items" in lines
    assert "  - quantity: integer, from 1 to 100000" in lines  # items of a $ref'd list, one level in
    recursive = {"$defs": {"node": {"type": "object", "description": "A tree node.",
                                    "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}},
                 "type": "object", "properties": {"root": {"$ref": "#/$defs/node"}}, "required": ["root"]}
    text = describe_fields(recursive)
    assert text.startswith("- root: object with the fields below — A tree node.\n  - kids: list of")
    assert len(text.splitlines()) < 10  # recursion stops
    assert describe_fields({"enum": ["a", "b"]}) == '- the value: one of "a", "b"'
    # a minLength of 1 is said by "text" itself: "1 to 240 characters" was echoed into summaries
    assert describe_fields({"type": "string", "minLength": 1, "maxLength": 240}) == "- the value: text, at most 240 characters"
    assert describe_fields({"type": "string", "minLength": 5, "maxLength": 9}) == "- the value: text, 5 to 9 characters"
    pydantic_v1 = {"definitions": {"Kind": {"title": "Kind", "enum": ["a", "b"], "type": "string"}},
                   "type": "object", "required": ["kind"],
                   "properties": {"kind": {"allOf": [{"$ref": "#/definitions/Kind"}], "description": "Its kind."}}}
    assert describe_fields(pydantic_v1) == '- kind: one of "a", "b" — Its kind.'  # a lone allOf member is read


def test_boolean_schemas_behind_refs_are_read():
    """`true` allows any value, `false` none (the key must be absent); a `$ref` to either used to
    raise TypeError (a traceback from `kvx schema check`, a refused schema from `kvx extract`)."""
    from kvx.channel import enum_fields
    from kvx.cut_text import TextCut
    from kvx.grounding import grounded_fields
    from kvx.schema_text import describe_fields

    schema = {"type": "object", "$defs": {"any": True, "no": False},
              "properties": {"a": {"$ref": "#/$defs/any", "description": "Anything."}, "b": {"$ref": "#/$defs/no"},
                             "c": {"$ref": "#/$defs/any", "type": ["string", "null"]}, "d": False}}
    assert describe_fields(schema).splitlines() == ["- a: any value (optional) — Anything.", "- c: text or null (optional)"]
    assert list(grounded_fields(schema).values()) == ["string"]  # /c, the $ref's siblings kept
    assert not TextCut.of(schema).fields and enum_fields(schema) == []


@pytest.mark.parametrize("keep", ["head", "tail", "middle"])
def test_truncated_prompts_keep_the_shared_part_and_cut_only_the_text(tok, keep):
    from kvx.prompts import cut_tokens

    b = PromptBuilder(PromptSpec(), SCHEMA, tok)
    rec = {"text": " ".join(f"word{i}" for i in range(400))}
    whole = b.prompt_ids(rec)
    body = tok.encode(rec["text"])
    limit = len(whole) - 100
    ids, cut = b.truncated_ids(rec, limit, keep)
    assert len(ids) <= limit
    assert cut == len(body) - (limit - (len(whole) - len(body)))
    assert ids[: b.shared_prefix_tokens()] == whole[: b.shared_prefix_tokens()]
    assert ids[-5:] == whole[-5:]  # the assistant turn's header stays
    kept = ids[b.shared_prefix_tokens(): len(ids) - (len(whole) - b.shared_prefix_tokens() - len(body))]
    assert kept == cut_tokens(body, len(body) - cut, keep)
    assert cut_tokens([1, 2, 3, 4, 5], 3, keep) == {"head": [1, 2, 3], "tail": [3, 4, 5], "middle": [1, 2, 5]}[keep]
    with pytest.raises(PromptError, match="without the record text"):
        b.truncated_ids(rec, b.shared_prefix_tokens() - 1, keep)


def test_content_free_prompt_fills_every_field(tok):
    b = PromptBuilder(PromptSpec(template="[{channel}] {text}"), SCHEMA, tok)
    assert b.content_free_ids("N/A") == b.prompt_ids({"channel": "N/A", "text": "N/A"})
    plain = PromptBuilder(PromptSpec(), SCHEMA, tok)
    assert tok.decode(plain.content_free_ids("")).endswith("<|im_start|>user\n<|im_end|>\n<|im_start|>assistant\n")


def test_a_record_with_no_text_is_refused(tok):
    """An empty or blank text gives the model nothing to extract (the calibration's content-free
    input): its row is an error, not an invented record; with a template, only when every field
    it reads is blank."""
    b = PromptBuilder(PromptSpec(), SCHEMA, tok)
    for blank in ("", " ", "\n\t "):
        with pytest.raises(PromptError, match="field 'text' is empty"):
            b.user_text({"text": blank})
    assert b.user_text({"text": " x "}) == " x "
    t = PromptBuilder(PromptSpec(template="[{channel}] {text}"), SCHEMA, tok)
    assert t.user_text({"channel": "email", "text": ""}) == "[email] "
    with pytest.raises(PromptError, match="fields 'channel', 'text' are empty"):
        t.user_text({"channel": " ", "text": ""})


def _big_schema(n_fields: int, about: int, nested: bool = True) -> dict:
    """n_fields properties, each with an `about`-word description and an enum of 30 values, and (when
    nested) n_fields // 4 groups holding objects four levels deep, every field described."""
    words = " ".join(f"word{i}" for i in range(about))

    def level(depth: int) -> dict:
        if depth == 3:
            return {"type": "string", "description": words}
        return {"type": "object", "description": words, "properties": {f"sub{depth}_{j}": level(depth + 1) for j in range(2)}}

    props = {f"field{i}": {"type": "string", "enum": [f"value{v}" for v in range(30)], "description": words}
             for i in range(n_fields)}
    if nested:
        props.update({f"group{i}": level(0) for i in range(n_fields // 4)})
    return {"type": "object", "properties": props, "required": ["field0"]}


def test_a_field_list_within_budget_is_the_whole_one(tok):
    from kvx.schema_text import describe_fields

    b = PromptBuilder(PromptSpec(), SCHEMA, tok, field_budget=3840)
    assert b.field_list.shortened is None
    assert b.system.endswith("The JSON object has these fields:\n" + describe_fields(SCHEMA))
    assert b.shared_prefix_tokens() == PromptBuilder(PromptSpec(), SCHEMA, tok).shared_prefix_tokens()


@pytest.mark.parametrize("budget,step,levels", [
    (25_000, "descriptions cut to 160 characters", 4),
    (4_600, "no descriptions, 12 enum values", 4),
    (4_000, "no descriptions, 12 enum values, 3 levels", 3),
    (2_500, "no descriptions, 6 enum values, 2 levels", 2),
    (1_800, "top-level fields only", 1),
])
def test_a_long_field_list_is_shortened_to_its_budget(tok, budget, step, levels):
    from kvx.schema_text import describe_fields

    schema = _big_schema(40, 60)
    assert len(tok.encode(describe_fields(schema))) > budget  # the whole list would not fit
    fields = PromptBuilder(PromptSpec(), schema, tok, field_budget=budget).field_list
    assert fields.shortened == step
    assert fields.tokens == len(tok.encode(fields.text)) <= budget
    lines = fields.text.splitlines()
    listed = {line.split(":")[0].strip("- ") for line in lines}
    assert set(schema["properties"]) <= listed  # every top-level field is still named
    assert {f"sub{d}_1" for d in range(levels - 1)} <= listed and f"sub{levels - 1}_1" not in listed
    described = sum(" — word0" in line for line in lines)
    assert described == (len(lines) if step.startswith("descriptions") else 0)
    enum = next(line for line in lines if line.startswith("- field0:"))
    assert ("value29" in enum) == step.startswith("descriptions") and ("(30 values)" in enum) != ("value29" in enum)


def test_past_every_step_the_first_fields_are_listed_and_the_rest_counted(tok):
    schema = _big_schema(400, 0, nested=False)
    fields = PromptBuilder(PromptSpec(), schema, tok, field_budget=1200).field_list
    lines = fields.text.splitlines()
    assert fields.tokens == len(tok.encode(fields.text)) <= 1200
    shown = len(lines) - 1
    assert 0 < shown < 400 and fields.fields_left_out == 400 - shown
    assert lines[-1] == f"- ... and {400 - shown} more fields, not listed here"
    assert [line.split(":")[0] for line in lines[:-1]] == [f"- field{i}" for i in range(shown)]
    assert fields.shortened == f"the first {shown} of 400 top-level fields"
    whole = PromptBuilder(PromptSpec(), schema, tok).field_list.text.splitlines()  # one field more would not fit
    assert len(tok.encode("\n".join(whole[:shown + 1] + [f"- ... and {399 - shown} more fields, not listed here"]))) > 1200


def test_a_list_exploding_through_refs_is_given_up_early(tok):
    """Each level refers to the next twice: the whole list doubles per level (2^18 lines); the
    capped writer stops at the budget instead of writing it all."""
    defs = {f"d{i}": {"type": "object", "description": "x " * 20,
                      "properties": {"a": {"$ref": f"#/$defs/d{i + 1}"}, "b": {"$ref": f"#/$defs/d{i + 1}"}}}
            for i in range(18)}
    defs["d18"] = {"type": "string"}
    schema = {"$defs": defs, "$ref": "#/$defs/d0"}
    from kvx.schema_text import Detail, TooLong, describe_fields

    with pytest.raises(TooLong):
        describe_fields(schema, Detail(depth=64), max_chars=10_000)
    fields = PromptBuilder(PromptSpec(), schema, tok, field_budget=500).field_list
    assert fields.tokens <= 500 and fields.text.startswith("- a: object with the fields below")
