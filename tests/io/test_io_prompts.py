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
