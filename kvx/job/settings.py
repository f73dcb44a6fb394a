"""How a job makes records of model output: output budget, retries, ranked choices, truncation, guards.
Light (no torch), so the command line declares its defaults from here."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from kvx.engine.api import SamplingParams
from kvx.cut_text import CutText
from kvx.grounding import Ungrounded
from kvx.prompts import Truncate
from kvx.repeat_guard import NO_REPEAT_NGRAM

ChoiceMode = Literal["greedy", "rank", "calibrated", "channel"]  # how closed choices are made (--choices)
CHOICE_MODES: tuple[ChoiceMode, ...] = get_args(ChoiceMode)


@dataclass
class JobSettings:
    max_tokens: int = SamplingParams.max_tokens  # output tokens a record may take (the engine's default)
    retries: int = 2
    retry_temperature: float = 0.7
    retry_top_p: float = 0.95
    seed: int = 0
    choices: ChoiceMode = "channel"
    mentions: bool = True  # with calibrated or channel: values the text keeps naming gain (kvx/mentions.py)
    truncate: Truncate = "none"
    copy_guard: bool = True  # with --examples: veto values copied from them (kvx/copy_check.py)
    ungrounded: Ungrounded = "null"  # a nullable field's value its text lacks (kvx/grounding.py)
    no_repeat_ngram: int = NO_REPEAT_NGRAM  # tokens; no n-gram twice in one string (kvx/repeat_guard.py; 0 = off)
    cut_text: CutText = "sentence"  # free text cut at its maxLength ends at its last full sentence (kvx/cut_text.py)
    copy_codes: bool = True  # a string field with a pattern writes a span of its text (kvx/code_spans.py)
    copy_digits: bool = True  # a string value's runs of digits are runs of its text (kvx/digit_guard.py)

    @property
    def uses_mentions(self) -> bool:
        """Whether ranked enum choices weigh the values a record's text names (kvx/mentions.py)."""
        return self.mentions and self.choices in ("calibrated", "channel")
