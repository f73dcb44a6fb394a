"""Speculative decoding by prompt lookup: drafts copied from the sequence's own tokens, checked in one step.

A draft is what followed the latest earlier occurrence of the sequence's last token, in the prompt
or in the output so far: extraction copies names and ids from the input, and small models repeat
themselves, so such drafts are often right. The drafted tokens join the next step like a
jump-forward append, and that step's logits at each drafted position say whether greedy decoding
would have chosen the token there. The engine keeps the agreeing prefix plus the model's own
choice where they part, so the output is token for token what plain greedy decoding gives, in
fewer steps. Grammar-forced tokens inside a draft are placed by the matcher, never looked up, so a
draft spells the very token sequence plain decoding would build (jump-forward included), and it
stops before a token the request's TokenVeto refuses, which plain decoding would not write either.

Only greedy requests draft, and only while steps are small: on a CPU a step costs a fixed part
(reading every weight, per-layer overhead) plus a part per token, so in a step of a few sequences
a few more rows are nearly free, while in a full step they would only add work.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from kvx.engine.sequence import Sequence, common_prefix


@dataclass
class SpeculationConfig:
    max_draft: int = 4  # drafted tokens per sequence and step at most (0 = off)
    max_rows: int = 48  # draft only while running sequences x (1 + draft) stays within this


def draft_length(cfg: SpeculationConfig, num_running: int) -> int:
    """How many tokens each sequence may draft for the next step."""
    if cfg.max_draft <= 0 or num_running <= 0:
        return 0
    return max(0, min(cfg.max_draft, cfg.max_rows // num_running - 1))


def _latest_positions(seq: Sequence) -> dict[int, int]:
    """token -> its latest position before the last one (kept incrementally: real tokens never change)."""
    end = seq.num_tokens - 1
    for p in range(seq.lookup_upto, end):
        seq.lookup[seq.token_ids[p]] = p
    seq.lookup_upto = max(seq.lookup_upto, end)
    return seq.lookup


def propose(seq: Sequence, k: int, max_model_len: int) -> int:
    """Append up to k drafted tokens (plus the forced runs they lead to) to seq; returns how many."""
    if seq.draft or seq.request.sampling.temperature > 0:
        return 0
    k = min(k, seq.max_new - seq.num_generated, max_model_len - seq.num_tokens)
    if k <= 0:
        return 0
    matcher = seq.matcher.fork() if seq.matcher is not None else None
    if seq.matcher is not None and matcher is None:
        return 0  # a constraint that cannot be copied cannot walk a draft
    index = _latest_positions(seq)
    tokens, base = seq.token_ids, seq.num_tokens
    drafted: list[int] = []
    checked: list[bool] = []
    masks: list[torch.Tensor] = []  # the walk's mask before each checked token: the next step's rows

    def at(i: int) -> int:
        return tokens[i] if i < base else drafted[i - base]

    ranks = seq.request.sampling.rank_choices
    veto = seq.request.token_veto
    output = seq.output_ids if veto is not None else []  # what the veto sees before each drafted token
    src = index.get(tokens[-1])  # the draft copies what followed tokens[src]
    while src is not None and len(drafted) < k:
        src += 1
        tok = at(src)
        if tok in seq.stop_ids:
            break
        if matcher is not None:
            if ranks and matcher.complete_values() is not None:
                break  # a ranked choice is made on the row after the draft, never by a draft check
            allowed = matcher.allowed_mask()
            if not (tok < allowed.shape[0] and bool(allowed[tok])):
                break
        if veto is not None and veto.vetoes(output + drafted, tok):
            break  # plain decoding would not write it: the row after the draft chooses instead
        if matcher is not None:
            masks.append(allowed)
        drafted.append(tok)
        checked.append(True)
        if matcher is None:
            continue
        matcher.advance(tok)
        for forced in matcher.forced_tokens():  # placed whole; the lookup follows along or re-anchors
            src = src + 1 if src is not None and at(src + 1) == forced else index.get(forced)
            matcher.advance(forced)
            drafted.append(forced)
            checked.append(False)
    if drafted and matcher is not None:
        masks.append(matcher.allowed_mask())  # after the draft: the last row
    tokens.extend(drafted)  # a forced run may take it past k: it is kept whole
    seq.draft, seq.draft_masks = checked, masks
    return len(drafted)


def row_masks(seq: Sequence, num_rows: int) -> list[torch.Tensor | None]:
    """The grammar's allowed tokens at each of seq's logits rows (None: unconstrained).

    With a draft, row j is the position before the j-th checked drafted token and the last row the
    position after the draft: the masks propose() met on its walk (the real matcher advances only
    through tokens the engine keeps, so they still hold)."""
    if seq.matcher is None:
        return [None] * num_rows
    return seq.draft_masks if seq.draft else [seq.matcher.allowed_mask()]


def checked_choices(drafted: list[int], checked: list[bool], preds: list[int]) -> tuple[list[int], int | None]:
    """The sampled-type drafted tokens the model agrees with, and the row whose choice comes next.

    preds[j] is the model's choice at row j (see row_masks). Returns (agreed tokens in order, row
    of the next choice, or None when every check agreed: the caller then takes the last row only if
    the sequence ends exactly at the draft's end)."""
    agreed = []
    for tok in (t for t, c in zip(drafted, checked) if c):
        if preds[len(agreed)] != tok:
            return agreed, len(agreed)
        agreed.append(tok)
    return agreed, None


def settle_draft(seq: Sequence, drafted: list[int], base: int, computed: int) -> int:
    """After the step appended its tokens to seq (whose draft started at `base`, with `computed`
    positions computed before): how many drafted tokens were kept; KV past them is stale."""
    kept = common_prefix(seq.token_ids[base:], drafted, len(drafted))
    # the last token stays uncomputed even when it is a drafted one (a veto's next best can be):
    # the next step feeds it to get the logits that choose its successor
    seq.num_computed = min(computed, base + kept, seq.num_tokens - 1)
    return kept
