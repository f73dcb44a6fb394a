"""Typed requests and results of the offline engine (the contract the CLI builds on).

    engine = Engine(loaded_model_or_spec, EngineConfig(...))
    for result in engine.generate(requests):   # yields as sequences finish, not at the end
        ...
    engine.metrics.snapshot()                  # readable at any time

`generate` consumes its iterable lazily, holding at most `EngineConfig.max_queued` waiting
requests, so a 10 GB input streams through.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Literal, Protocol

if TYPE_CHECKING:  # typing only: the engine's contract loads without the grammar (and torch)
    import torch

    from kvx.grammar.tokens.choices import PointKey, ValueChoice


class Constraint(Protocol):
    """What the engine asks of a grammar (kvx.grammar's Matcher) while a sequence decodes: it masks
    each logits row with allowed_mask, advances on every kept token, appends forced runs whole
    (jump-forward), walks drafts on a fork, and ranks whole values where complete_values finds them."""

    def allowed_mask(self) -> torch.Tensor: ...  # bool [vocab]: the tokens allowed next

    def advance(self, token_id: int) -> None: ...

    def forced_tokens(self) -> list[int]: ...  # the only continuation the grammar allows here (may be [])

    def fork(self) -> Constraint | None: ...  # an independent copy to check a draft on; None: the sequence does not draft

    def complete_values(self) -> ValueChoice | None: ...  # a closed set of whole values allowed here (ranked choices)


class TokenVeto(Protocol):
    """Refuses a greedy token given the output so far (e.g. kvx.copy_check.CopyGuard,
    kvx.repeat_guard.RepeatGuard); the engine then takes the next best. A draft stops before a
    token its request vetoes, so drafting never changes what the veto lets through.

    Where a veto lets only a few tokens through (kvx.code_spans.CodeGuard: the spans of a text),
    `allowed` names them and the engine takes the likeliest of them the grammar allows (if the
    grammar allows none, the veto steps aside); None: no such list here."""

    def vetoes(self, output_ids: list[int], token: int) -> bool: ...

    def allowed(self, output_ids: list[int]) -> list[int] | None: ...


@dataclass
class AnyVeto:
    """A TokenVeto refusing what any of its members refuses (a record's guards); the tokens it
    allows are those every member that names a list allows."""

    members: list[TokenVeto]

    def vetoes(self, output_ids: list[int], token: int) -> bool:
        return any(m.vetoes(output_ids, token) for m in self.members)

    def allowed(self, output_ids: list[int]) -> list[int] | None:
        lists = [set(a) for m in self.members if (a := m.allowed(output_ids)) is not None]
        return sorted(set.intersection(*lists)) if lists else None


class ChoiceHook(Protocol):
    """Turns the options' log-probabilities at one ranked-choice point (kvx/engine/choices.py)
    into the scores ranked by (e.g. contextual calibration, kvx/engine/calibration.py)."""

    def scores(self, key: PointKey, labels: list[bytes], logprobs: list[float]) -> list[float]: ...


class Pause:
    """Yielded by a request source that has nothing now but is not finished (a replica waiting
    for its next group): the engine runs a step with what it holds and asks again. A source must
    block rather than pause while the engine holds nothing, or the engine spins asking."""

    def __repr__(self) -> str:
        return "PAUSE"


PAUSE = Pause()


@dataclass
class SamplingParams:
    max_tokens: int = 256
    temperature: float = 0.0  # 0 = greedy, the default for extraction
    top_p: float = 1.0
    top_k: int = 0  # 0 = off
    seed: int | None = None  # per-request seed; same seed, same output
    stop_token_ids: list[int] | None = None  # None = the model's EOS ids
    ignore_eos: bool = False
    # greedy only: at a closed set of values the grammar allows, score each whole value and append
    # the best (kvx/engine/choices.py); needs a constraint with complete_values()
    rank_choices: bool = False
    # a scoring request (vLLM's prompt_logprobs, summed): nothing is generated; the result's
    # prompt_logprob is the sum of log p(prompt[i] | prompt[:i]) for i >= score_from (unmasked model)
    score_from: int | None = None


@dataclass
class Request:
    id: str
    prompt_ids: list[int]
    sampling: SamplingParams = field(default_factory=SamplingParams)
    priority: int = 0  # higher runs first and is preempted last
    # Called once when the sequence starts decoding; returns its Constraint (a kvx.grammar Matcher).
    # A factory (not a constraint) so a preempted, recomputed sequence can start a fresh one.
    constraint: Callable[[], Constraint] | None = None
    choice_hook: ChoiceHook | None = None  # adjusts ranked choices' scores (e.g. contextual calibration)
    token_veto: TokenVeto | None = None  # greedy only: tokens it vetoes give way to the next best
    user_data: Any = None  # carried through to the Result untouched


@dataclass
class Usage:
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0  # prompt tokens served from the radix cache
    generated_tokens: int = 0
    forced_tokens: int = 0  # generated tokens appended by jump-forward without sampling


@dataclass
class ChoiceTrace:
    """One ranked choice a sequence made: where (a grammar point, the same in every record and
    process), the values offered (b"" = the open rest) and their log-probabilities."""

    key: tuple
    labels: list[bytes]
    logprobs: list[float]
    at: int = 0  # output tokens before the chosen value (where in the text the point was)


@dataclass
class Result:
    id: str
    token_ids: list[int]
    text: str
    finish_reason: str  # "stop" | "length" | "error"
    usage: Usage
    error: str | None = None  # one-line message when finish_reason == "error"
    user_data: Any = None
    choices: list[ChoiceTrace] = field(default_factory=list)  # ranked choices made, in order
    prompt_logprob: float | None = None  # a scoring request's (SamplingParams.score_from)


Dtype = Literal["auto", "float32", "bfloat16"]  # the weights' dtype; auto: bfloat16 where it is fast
KVDtype = Literal["auto", "float32", "bfloat16", "float16", "int8"]  # the KV pool's; auto: the weights'
Attention = Literal["auto", "torch", "triton"]  # attention kernels; auto: triton on CUDA, else the CPU backend


@dataclass
class EngineConfig:
    block_size: int = 16
    kv_memory: int | None = None  # bytes for the KV pool; None = kv_memory_fraction of free memory
    kv_memory_fraction: float = 0.3
    kv_dtype: KVDtype = "auto"
    batch_tokens: int = 8192  # token budget of one step (decode tokens + prefill chunks)
    max_seqs: int = 128  # running sequences at most
    max_queued: int = 65536  # waiting requests pulled from the input iterable at most
    attention: Attention = "auto"
    dtype: Dtype = "auto"
    enable_prefix_cache: bool = True
    max_model_len: int | None = None  # None = the model's context length
    speculative_tokens: int = 4  # prompt-lookup draft per greedy sequence and step (0 = off)
    speculative_rows: int = 48  # draft only while running sequences x (1 + draft) fit in this
    cuda_graphs: bool = True  # on CUDA with Triton attention: decode steps replayed from captured graphs
