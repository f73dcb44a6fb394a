"""Prompt building: system text + schema + few-shot examples + the record, through the chat template.

The part shared by every record (system message, schema, examples, the user turn's header) comes
first and is tokenized once, so the engine's radix prefix cache serves it to all records; only the
record's own text and the closing assistant header are tokenized per record.
"""
from __future__ import annotations

import json
import re
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Literal, get_args

from kvx.errors import ConfigError, KvxError
from kvx.io.json_values import decode_problem
from kvx.schema_fit import FieldList, fitted_field_list

DEFAULT_SYSTEM = (
    "You are a careful data extraction assistant. Read the user's text and reply with one JSON "
    "object and nothing else. Use only facts stated in the text; use null where a value is unknown."
)
SchemaStyle = Literal["fields", "json"]  # the schema in the system message: a readable field list, or its JSON
SCHEMA_STYLES: tuple[SchemaStyle, ...] = get_args(SchemaStyle)
Truncate = Literal["none", "head", "tail", "middle"]  # which part of a too long record text is kept
TRUNCATE_MODES: tuple[Truncate, ...] = get_args(Truncate)
PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_.-]*)\}")
BRACES = re.compile(r"\{\{|\}\}|\{[^{}\n]*\}|[{}]")  # every use of a brace in a template
FORMAT_SPEC = re.compile(r"\{[A-Za-z_][A-Za-z0-9_.-]*[!:]")  # {text!r}, {text:>10}: str.format habits
MIN_ROOM = 8  # output tokens a prompt must leave in the context to be worth running
SENTINEL = "\u0000KVX-RECORD\u0000"  # marks where the record goes when splitting the template


class PromptError(KvxError):
    """A record cannot be turned into a prompt (missing field, ...): that record gets an error row."""


@dataclass
class Example:
    input: str | dict[str, Any]  # the text itself, or fields rendered like a record
    output: Any  # the record the model should answer with


@dataclass
class PromptSpec:
    field: str = "text"
    template: str | None = None  # text with {field} placeholders
    system: str | None = None  # replaces DEFAULT_SYSTEM
    examples: list[Example] = dataclasses.field(default_factory=list)
    raw: bool = False  # no chat template: plain "Input:/Output:" text
    describe_schema: bool = True
    schema_style: SchemaStyle = "fields"

    def fields_read(self) -> list[str]:
        """The record fields every prompt reads: the template's placeholders, else `field`."""
        if self.template is None:
            return [self.field]
        return list(dict.fromkeys(m.group(1) for m in PLACEHOLDER.finditer(self.template) if m.group(1)))


def read_text_option(value: str | None, option: str) -> str | None:
    """`--system TEXT` or `--system @FILE`."""
    if value is None or not value.startswith("@"):
        return value
    return _read_file(Path(value[1:]), option)


def _read_file(path: Path, option: str) -> str:
    try:
        return path.read_text("utf-8-sig")  # -sig: a byte order mark is not part of the text
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{option} {path}: cannot read ({e.__class__.__name__}: {e})") from None


def load_template(path: str) -> str:
    text = _read_file(Path(path), "--template")
    problem = template_problem(text)
    if problem:
        raise ConfigError(f"--template {path}: {problem}")
    if not any(m.group(1) for m in PLACEHOLDER.finditer(text)):
        raise ConfigError(f"--template {path}: no {{field}} placeholder in the template")
    return text


def template_problem(text: str) -> str | None:
    """Why a template's braces are not `{field}`, `{{` or `}}` (naming line and column), or None."""
    for m in BRACES.finditer(text):
        token = m.group()
        if token in ("{{", "}}") or PLACEHOLDER.fullmatch(token):
            continue
        line = text.count("\n", 0, m.start()) + 1
        where = f"line {line} column {m.start() - text.rfind(chr(10), 0, m.start())}"
        if token in ("{", "}"):
            return f"a lone '{token}' at {where} (write '{token * 2}' for a literal brace)"
        shown = token if len(token) <= 40 else token[:40] + "..."
        if FORMAT_SPEC.match(token):
            return (f"{shown} at {where}: conversions and format specs (!r, :>10) are not supported, "
                    f"only {{field}}")
        return f"{shown} at {where} is not a {{field}} placeholder (write '{{{{' and '}}}}' for literal braces)"
    return None


def shared_prompt_problem(shared_tokens: int, context: int, describe_schema: bool) -> str | None:
    """Why no record can fit when the part every prompt shares is this long, or None."""
    if shared_tokens + MIN_ROOM <= context:
        return None
    hint = ("add --no-schema-prompt (the grammar still enforces the schema; the prompt then does not "
            "describe it), or shorten --system/--examples") if describe_schema else "shorten --system/--examples"
    return (f"the prompt part every record shares (system text{', schema' if describe_schema else ''}, examples) "
            f"is {shared_tokens:,} tokens, past the model's context of {context:,} tokens: {hint}")


def load_examples(path: str, validate) -> list[Example]:
    """Few-shot pairs, one JSON object a line: {"input": TEXT or {fields}, "output": RECORD}.

    `validate(record) -> str | None` checks each output against the schema (message or None)."""
    pairs = []
    for lineno, line in enumerate(_read_file(Path(path), "--examples").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"--examples {path} line {lineno}"
        try:
            pair = json.loads(line)
        except json.JSONDecodeError as e:
            raise ConfigError(f"{where}: {decode_problem(e)}") from None
        if not isinstance(pair, dict) or "input" not in pair or "output" not in pair:
            raise ConfigError(f'{where}: expected {{"input": ..., "output": ...}}')
        problem = validate(pair["output"])
        if problem:
            raise ConfigError(f"{where}: output does not match the schema ({problem})")
        if not isinstance(pair["input"], (str, dict)):
            raise ConfigError(f"{where}: input must be a text or an object of fields")
        pairs.append(Example(pair["input"], pair["output"]))
    if not pairs:
        raise ConfigError(f"--examples {path}: no examples in the file")
    return pairs


def field_value(fields: dict[str, Any], name: str) -> str:
    """A record field as prompt text; dotted names reach into nested objects."""
    value: Any = fields
    for part in name.split("."):
        if not isinstance(value, dict) or value.get(part) is None:
            raise PromptError(f"missing field '{name}'")
        value = value[part]
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            raise PromptError(f"field '{name}' is not valid UTF-8") from None
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def field_list_budget(context: int) -> int:
    """Tokens the schema's field list may take: half the context, so the record's text and its
    output keep the other half. The model alone sets it: a resumed job (whose fingerprint holds
    the model, not --max-tokens) gets the same prompt."""
    return context // 2


class PromptBuilder:
    def __init__(self, spec: PromptSpec, schema: dict, tokenizer: Any, field_budget: int | None = None):
        """`field_budget`: tokens the schema's field list may take (it is shortened to fit; None: whole)."""
        self.spec = spec
        self.tokenizer = tokenizer
        self.system = spec.system if spec.system is not None else DEFAULT_SYSTEM
        self.field_list: FieldList | None = None
        if spec.describe_schema and spec.schema_style == "json":
            schema_text = json.dumps(schema, ensure_ascii=False, separators=(",", ":"))
            self.system = f"{self.system}\n\nThe JSON object must match this JSON Schema:\n{schema_text}"
        elif spec.describe_schema:
            self.field_list = fitted_field_list(schema, lambda text: len(tokenizer.encode(text)), field_budget)
            self.system = f"{self.system}\n\nThe JSON object has these fields:\n{self.field_list.text}"
        self._prefix, self._suffix = self._split()
        self._prefix_ids = tokenizer.encode(self._prefix) if self._prefix is not None else None
        self._reads = spec.fields_read()

    def user_text(self, fields: dict[str, Any]) -> str:
        """The record's part of the prompt; PromptError where it is missing or holds no text (whatever
        the model wrote for an empty text would be invented: the calibration's content-free input)."""
        values = {name: field_value(fields, name) for name in self._reads}
        if not any(v.strip() for v in values.values()):
            listed = ", ".join(f"'{n}'" for n in values)
            raise PromptError(f"field {listed} is empty" if len(values) == 1 else f"fields {listed} are empty")
        if self.spec.template is None:
            return values[self.spec.field]
        return _render(self.spec.template, values.__getitem__)

    def prompt_text(self, fields: dict[str, Any]) -> str:
        return self._render(self.user_text(fields))

    def prompt_ids(self, fields: dict[str, Any]) -> list[int]:
        return self.user_ids(self.user_text(fields))

    def content_free_ids(self, text: str) -> list[int]:
        """The prompt with every record field replaced by a content-free text ("N/A", ""), for
        contextual calibration (kvx/engine/calibration.py)."""
        user = text if self.spec.template is None else _render(self.spec.template, lambda _: text)
        return self.user_ids(user)

    def user_ids(self, user: str) -> list[int]:
        """The prompt around one user message: the shared prefix's ids reused where it is one."""
        if self._prefix_ids is None:
            return self.tokenizer.encode(self._render(user))
        return self._prefix_ids + self.tokenizer.encode(user + self._suffix)

    def truncated_ids(self, fields: dict[str, Any], max_len: int, keep: Truncate) -> tuple[list[int], int]:
        """(prompt ids of at most max_len tokens, how many of the record text's tokens were cut):
        `head` keeps the text's start, `tail` its end, `middle` both ends. The shared part is never
        cut; PromptError if it alone does not fit."""
        text = self.user_text(fields)
        if self._prefix_ids is None:
            raise PromptError("this template cannot be truncated (the record text is not in one place)")
        body, suffix = self.tokenizer.encode(text), self.tokenizer.encode(self._suffix)
        room = max_len - len(self._prefix_ids) - len(suffix)
        if room < 0:
            raise PromptError(f"the prompt without the record text is {max_len - room} tokens, more than {max_len}")
        cut = max(len(body) - room, 0)
        if cut:
            body = cut_tokens(body, room, keep)
        return self._prefix_ids + body + suffix, cut

    def _example_text(self, ex: Example) -> str:
        return ex.input if isinstance(ex.input, str) else self.user_text(ex.input)

    def shared_prefix_tokens(self) -> int:
        return len(self._prefix_ids or [])

    def _render(self, user: str) -> str:
        examples = [(self._example_text(ex), json.dumps(ex.output, ensure_ascii=False)) for ex in self.spec.examples]
        if self.spec.raw:
            shots = "".join(f"Input:\n{i}\nOutput:\n{o}\n\n" for i, o in examples)
            return f"{self.system}\n\n{shots}Input:\n{user}\nOutput:\n"
        messages = [{"role": "system", "content": self.system}]
        for i, o in examples:
            messages += [{"role": "user", "content": i}, {"role": "assistant", "content": o}]
        messages.append({"role": "user", "content": user})
        return self.tokenizer.chat_prompt(messages, add_generation_prompt=True)

    def _split(self) -> tuple[str | None, str]:
        """(shared prefix, per-record suffix) around the record text; (None, "") if the template
        does not keep the record verbatim (then each prompt is rendered whole)."""
        full = self._render(SENTINEL)
        if full.count(SENTINEL) != 1:
            return None, ""
        prefix, suffix = full.split(SENTINEL)
        return prefix, suffix


def cut_tokens(ids: list[int], keep_n: int, keep: Truncate) -> list[int]:
    """keep_n of ids: the first (head), the last (tail), or the first and last halves (middle)."""
    if keep == "head":
        return ids[:keep_n]
    if keep == "tail":
        return ids[len(ids) - keep_n:] if keep_n else []
    front = (keep_n + 1) // 2
    return ids[:front] + (ids[len(ids) - (keep_n - front):] if keep_n - front else [])


def _render(template: str, value_of: Callable[[str], str]) -> str:
    """The template with each {field} replaced by value_of(field), and {{ / }} by { / }."""
    return PLACEHOLDER.sub(lambda m: value_of(m.group(1)) if m.group(1) else m.group(0)[0], template)
