"""Noisy-channel scores for a schema's enum fields (`--choices channel`).

A small model asked "which product is this complaint about?" leans to a few labels whatever the
text says (contextual calibration, kvx/engine/calibration.py, takes out the lean it shows on an
empty text). The channel direction asks the other way round: how likely is the record's text after
a line naming each value, log p(text | "{field}: {value}")? Every value then has to explain the
whole text, not win one token (Min et al. 2022, "Noisy Channel Language Model Prompting"). Each
record costs one scoring request per value (its first CHANNEL_TOKENS text tokens, teacher-forced:
SamplingParams.score_from), run before the record is decoded; at the field's ranked choice the
value's score adds CHANNEL_WEIGHT x its channel log-probability (normalised over the values) to
the calibrated one. With `--mentions` (the default) the hook also adds MENTION_WEIGHT x how much the
record's text names each value's words (kvx/mentions.py): no model call, the whole text; under
`--choices calibrated` a record's hook holds those alone.

Fields scored: the schema's top-level properties whose `enum` (directly or through a local `$ref`)
lists 2 to MAX_VALUES strings, in schema order while the record's scoring requests stay within
MAX_SCORED. An optional enum (null among its values, or Pydantic's `anyOf` of an enum and null)
is scored with null as one more value: the line "{field}: null" before the text.
A choice point is matched to its field by where the content-free runs met it (`point_owners`: the
top-level key before the value in their output); a point they never met, by its values (the
spellings the grammar offers there), unless two scored fields share them: then the calibrated score
decides alone.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, Protocol

from kvx.engine.api import ChoiceHook, Request, SamplingParams
from kvx.mentions import MENTION_WEIGHT, value_mentions
from kvx.schema_text import Resolve, optional_branch, resolver, top_level_properties

CHANNEL_TOKENS = 64  # text tokens scored per value: the start of a text names its subject (96: no better)
CHANNEL_WEIGHT = 0.25  # channel log-probability against the calibrated score (tuned on ../shared/eval)
MAX_VALUES = 16  # enums longer than this cost too many scoring requests per record
MAX_SCORED = 32  # values scored per record at most (fields in schema order; the rest: calibrated only)
TEMPLATE = "{name}: {value}\n"  # the line before the record text, per value (the field's own words)


@dataclass(frozen=True)
class EnumField:
    name: str
    values: tuple[str | None, ...]  # None: the field's null (an optional enum)

    @cached_property
    def spellings(self) -> dict[bytes, int]:
        """Each value's bytes as a choice point may offer them (a string inside its quotes, or with them)."""
        out: dict[bytes, int] = {}
        for i, v in enumerate(self.values):
            quoted = json.dumps(v, ensure_ascii=False)
            out[quoted.encode()] = i
            if v is not None:
                out[quoted[1:-1].encode()] = i
        return out

    def line(self, i: int) -> str:
        """The scoring prompt's line before the text for value i."""
        v = self.values[i]
        return TEMPLATE.format(name=self.name, value="null" if v is None else v)


def _enum_values(node: Any, resolve: Resolve) -> list | None:
    """The values an enum field takes: its `enum`, or for Pydantic's Optional (an `anyOf` of an
    enum and null) the enum and None; else None."""
    if not isinstance(node, dict):
        return None
    if isinstance(node.get("enum"), list):
        return node["enum"]
    branch = optional_branch(node, resolve)
    if branch is not None and isinstance(branch[0].get("enum"), list):
        return [*branch[0]["enum"], None]
    return None


def enum_fields(schema: object) -> list[EnumField]:
    """The top-level properties the channel scores (see the module docstring); an enum behind a
    local `$ref` (Pydantic's `$defs`) counts."""
    if not isinstance(schema, dict):
        return []
    resolve, out = resolver(schema), []
    for name, sub in top_level_properties(schema, resolve).items():
        values = _enum_values(sub, resolve)
        if (isinstance(values, list) and 2 <= len(values) <= MAX_VALUES
                and all(isinstance(v, str) for v in values if v is not None) and len(set(values)) == len(values)
                and sum(len(f.values) for f in out) + len(values) <= MAX_SCORED):
            out.append(EnumField(name, tuple(values)))
    return out


class Encoder(Protocol):  # what the channel needs of a tokenizer
    def encode(self, text: str) -> list[int]: ...


@dataclass
class ChannelScores:
    """One record's log p(text | value) per field and value (a field missing: not scored), and its
    text's mention score of each value (kvx/mentions.py; empty: --no-mentions)."""

    fields: dict[str, list[float]] = field(default_factory=dict)
    mentions: dict[str, list[float]] = field(default_factory=dict)

    def with_mentions(self, enum: list[EnumField], text: str) -> ChannelScores:
        return ChannelScores(self.fields, {f.name: value_mentions(f.values, text) for f in enum})


def scoring_requests(fields: list[EnumField], tokenizer: Encoder, text: str, key: str,
                     context: int) -> list[Request]:
    """One scoring request per field and value for the record `key`; user_data = (key, field, value
    index). Prompts that would not fit `context` are left out (their field stays unscored)."""
    text_ids = tokenizer.encode(" " + text)[:CHANNEL_TOKENS]
    if not text_ids:
        return []
    out = []
    for f in fields:
        for i in range(len(f.values)):
            prefix = tokenizer.encode(f.line(i))
            if len(prefix) + len(text_ids) < context:
                out.append(Request(f"{key}/channel/{f.name}/{i}", prefix + text_ids,
                                   SamplingParams(max_tokens=0, score_from=len(prefix)), user_data=(key, f.name, i)))
    return out


def collect(fields: list[EnumField], results) -> dict[str, ChannelScores]:
    """Scoring results -> each record's scores; a field is kept only where every value was scored."""
    sizes = {f.name: len(f.values) for f in fields}
    got: dict[str, dict[str, dict[int, float]]] = {}
    for r in results:
        key, name, i = r.user_data
        if r.prompt_logprob is not None:
            got.setdefault(key, {}).setdefault(name, {})[i] = r.prompt_logprob
    out = {}
    for key, per_field in got.items():
        out[key] = ChannelScores({name: [s[i] for i in range(sizes[name])]
                                  for name, s in per_field.items() if len(s) == sizes[name]})
    return out


def top_level_key(prefix: str) -> str | None:
    """The top-level property whose value starts at the end of `prefix` (a JSON text cut there,
    maybe just inside the value's opening quote); None anywhere else (a nested value, a key)."""
    depth, in_string, escaped, is_value, last, key = 0, False, False, False, "", None
    before = ""  # the last character outside strings that is not whitespace
    chars: list[str] = []
    for ch in prefix:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string, last = False, "".join(chars)
                continue
            chars.append(ch)
            continue
        if ch == '"':
            in_string, is_value, chars = True, before == ":", []
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        elif ch == ":" and depth == 1:
            key = last
        if not ch.isspace():
            before = ch
    at_value = (in_string and is_value and not chars) or (not in_string and before == ":")
    if depth != 1 or not at_value or key is None:
        return None
    try:
        return json.loads(f'"{key}"')
    except ValueError:
        return key


def point_owners(results: list, decode: Callable[[list[int]], str]) -> dict[tuple, str | None]:
    """Choice point -> the top-level field it chose a value for (None: not a top-level field's
    value), from the ranked choices of finished requests (the content-free runs). A point seen for
    two fields is left out (matched by its values instead)."""
    owners: dict[tuple, str | None] = {}
    clashing: set[tuple] = set()
    for r in results:
        for made in r.choices:
            owner = top_level_key(decode(r.token_ids[:made.at]))
            if owners.get(made.key, owner) != owner:
                clashing.add(made.key)
            owners[made.key] = owner
    return {k: v for k, v in owners.items() if k not in clashing}


@dataclass
class ChannelHook:
    """A ChoiceHook: the base hook's scores (calibration, or the log-probabilities as they are),
    plus CHANNEL_WEIGHT x the normalised channel log-probability and MENTION_WEIGHT x the mention
    score where the point is a scored field's.
    Plain data, so it travels to Ray replicas with its request."""

    fields: list[EnumField]
    scores_of: ChannelScores
    base: ChoiceHook | None = None
    owners: dict[tuple, str | None] = field(default_factory=dict)  # point -> its field (point_owners)
    used: int = 0  # decisions the channel took part in

    def scores(self, key: tuple, labels: list[bytes], logprobs: list[float]) -> list[float]:
        out = self.base.scores(key, labels, logprobs) if self.base is not None else list(logprobs)
        f = self._field(key, labels)
        if f is None:
            return out
        values = [f.spellings[label] for label in labels]
        channel, mentions = self.scores_of.fields.get(f.name), self.scores_of.mentions.get(f.name)
        if channel is None and mentions is None:
            return out
        self.used += 1
        if channel is not None:
            raw = [channel[i] for i in values]
            top = max(raw)
            norm = top + math.log(sum(math.exp(x - top) for x in raw))
            out = [s + CHANNEL_WEIGHT * (x - norm) for s, x in zip(out, raw)]
        if mentions is not None:
            out = [s + MENTION_WEIGHT * mentions[i] for s, i in zip(out, values)]
        return out

    def _field(self, key: tuple, labels: list[bytes]) -> EnumField | None:
        """The scored field whose value `labels` choose at the point `key`, or None: its owner
        (point_owners) is another field or none, or, for a point of unknown owner, no scored field
        offers exactly these values (the open rest b"" or an unknown value) or two could (`impact`
        and `urgency` both low/medium/high)."""
        owned = [f for f in self.fields if f.name == self.owners[key]] if key in self.owners else self.fields
        matching = [f for f in owned if all(label in f.spellings for label in labels)]
        return matching[0] if len(matching) == 1 else None
