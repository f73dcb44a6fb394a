"""Contextual calibration of ranked choices (Zhao et al. 2021, "Calibrate Before Use").

A small model leans to some values whatever the text says (the default model answers `credit card`
for most complaints). The lean is measured once per job: the same prompt with a content-free text
("N/A", "", "[MASK]") is decoded with ranked choices, and at each decision point the values'
probabilities, normalised over the values offered there, are kept (averaged over the content-free
texts). A record's choice then ranks each value by log p(value | text) - log p(value | no text):
what the text adds, not what the model always says.

Decision points are the grammar states of the choices (the same field of the schema is the same
state in every record), so the table is filled once and read by every record. A point the
content-free runs never reached, or where a record is offered other values, is ranked uncalibrated.
"""
from __future__ import annotations

import math
from typing import Iterable, Iterator, Protocol

from kvx.engine.api import Request, Result

CONTENT_FREE_TEXTS = ("N/A", "", "[MASK]")  # the paper's three content-free inputs


class Generator(Protocol):
    def generate(self, requests: Iterable[Request], reset_metrics: bool = True) -> Iterator[Result]: ...


class ContextualCalibration:
    """A ChoiceHook: scores = log-probabilities minus the content-free ones, where known."""

    def __init__(self) -> None:
        self.seen: dict[tuple, dict[bytes, list[float]]] = {}  # point -> value -> normalised probabilities
        self.calibrated = 0  # decisions adjusted
        self.uncalibrated = 0  # decisions at points the content-free runs did not cover

    def scores(self, key: tuple, labels: list[bytes], logprobs: list[float]) -> list[float]:
        seen = self.seen.get(key)
        if seen is None or any(label not in seen for label in labels):
            self.uncalibrated += 1
            return logprobs
        self.calibrated += 1
        return [lp - math.log(max(sum(seen[label]) / len(seen[label]), 1e-30)) for label, lp in zip(labels, logprobs)]

    @property
    def num_points(self) -> int:
        return len(self.seen)

    def record(self, key: tuple, labels: list[bytes], logprobs: list[float]) -> None:
        """One content-free choice: keep the values' normalised probabilities."""
        top = max(logprobs)
        total = sum(math.exp(lp - top) for lp in logprobs)
        point = self.seen.setdefault(key, {})
        for label, lp in zip(labels, logprobs):
            point.setdefault(label, []).append(math.exp(lp - top) / total)

    def learn(self, engine: Generator, requests: Iterable[Request]) -> list[Result]:
        """Run the content-free requests (rank_choices on, uncalibrated) through `engine` (local or a
        fleet: the choices come back in the results), recording every choice; returns the results."""
        reqs = []
        for r in requests:
            r.sampling.rank_choices, r.choice_hook = True, None
            reqs.append(r)
        results = list(engine.generate(reqs))
        for result in results:
            for made in result.choices:
                self.record(made.key, made.labels, made.logprobs)
        return results
