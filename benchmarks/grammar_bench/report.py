"""Figures per engine over a set of schemas, the table, and the per-schema failure notes."""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from benchmarks.grammar_bench.corpus import Entry
from benchmarks.grammar_bench.workers import Outcome

OVER_S = 1.0
POST = " (kvx: grammar / with post-check)"


@dataclass
class Failure:
    entry: str
    kind: str  # refused, crash, killed, over-1s, valid-rejected, invalid-accepted, walk-error, ...
    detail: str


@dataclass
class Verdicts:
    """Instance and schema counts under one acceptance rule (the grammar alone, or with post-check)."""
    passing: int = 0  # schemas with instances, every one answered right
    valid_rejected: int = 0
    invalid_accepted: int = 0


@dataclass
class Figures:
    post_check: bool = False  # kvx: a jsonschema check follows the grammar
    # compiled / refused / crash (of refused: not the engine's own refusal type) / killed / failed
    statuses: Counter = field(default_factory=Counter)
    counts: Counter = field(default_factory=Counter)  # schemas, with_tests, over, valid, invalid
    raw: Verdicts = field(default_factory=Verdicts)
    post: Verdicts = field(default_factory=Verdicts)
    cpu_ms: list = field(default_factory=list)
    failures: list = field(default_factory=list)


def first_text(entry: Entry, index: int, texts: list[list[str]]) -> str:
    text = texts[index][0]
    return (text if len(text) <= 300 else text[:300] + "...") + f"  ({entry.tests[index]['how']})"


def _judge(f: Figures, entry: Entry, walks: list, texts: list[list[str]]) -> None:
    """Count one compiled schema's instances; note the first instance of each kind of miss."""
    firsts: dict[str, int] = {}
    wrong = Counter()
    for i, ((raw, post), test) in enumerate(zip(walks, entry.tests)):
        accepted = {"raw": raw, "post": raw and post is not False}
        f.counts["valid" if test["valid"] else "invalid"] += 1
        for rule, verdicts in (("raw", f.raw), ("post", f.post)):
            miss = accepted[rule] != test["valid"]
            wrong[rule] += miss
            if test["valid"]:
                verdicts.valid_rejected += miss
            else:
                verdicts.invalid_accepted += miss
        if test["valid"] and not raw:
            firsts.setdefault("valid-rejected", i)
        elif test["valid"] and not accepted["post"]:
            firsts.setdefault("valid-rejected-by-post-check", i)
        elif not test["valid"] and accepted["post"]:
            firsts.setdefault("invalid-accepted-after-post-check" if f.post_check else "invalid-accepted", i)
        elif not test["valid"] and raw:
            firsts.setdefault("invalid-accepted-by-grammar", i)
    if entry.tests:
        f.raw.passing += wrong["raw"] == 0
        f.post.passing += wrong["post"] == 0
    for kind, i in firsts.items():
        f.failures.append(Failure(entry.id, kind, first_text(entry, i, texts)))


def figures(entries: list[Entry], outcomes: dict[str, Outcome], texts: dict[str, list[list[str]]],
            has_post_check: bool) -> Figures:
    f = Figures(post_check=has_post_check)
    for entry in entries:
        out = outcomes.get(entry.id)
        if out is None:
            continue
        f.counts["schemas"] += 1
        f.counts["with_tests"] += bool(entry.tests)
        f.cpu_ms.append(out.cpu_ms)
        if out.wall_ms > OVER_S * 1e3:
            f.counts["over"] += 1
            f.failures.append(Failure(entry.id, "over-1s", f"{out.wall_ms:.0f} ms wall, {out.cpu_ms:.0f} ms CPU"))
        f.statuses[out.status] += 1
        if out.status != "compiled":
            f.statuses["crash"] += out.crash
            kind = "crash" if out.crash else out.status
            f.failures.append(Failure(entry.id, kind, out.error))
        elif out.walks is None:
            f.failures.append(Failure(entry.id, "walk-error", out.walk_error))
        else:
            _judge(f, entry, out.walks, texts[entry.id])
    return f


def _pcts(xs) -> str:
    if not xs:
        return "-"
    a = np.array(xs)
    return f"{np.percentile(a, 50):,.1f} / {np.percentile(a, 90):,.1f} / {a.max():,.0f}"


def table(title: str, figs: dict[str, Figures], kill_after_s: float) -> str:
    names = list(figs)
    any_f = next(iter(figs.values()))
    rows = [
        ("compiled / refused / over 1 s", _statuses(kill_after_s)),
        (f"schemas passing (of {any_f.counts['with_tests']} with instances){POST}", lambda f: _two(f, "passing")),
        (f"valid instances rejected{POST}", lambda f: _two(f, "valid_rejected")),
        (f"invalid instances accepted{POST}", lambda f: _two(f, "invalid_accepted")),
        ("instances walked (valid / invalid)", lambda f: f"{f.counts['valid']} / {f.counts['invalid']}"),
        ("compile CPU ms p50 / p90 / max", lambda f: _pcts(f.cpu_ms)),
    ]
    out = [f"{title}", "", "| | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for label, cell in rows:
        out.append(f"| {label} | " + " | ".join(cell(figs[n]) for n in names) + " |")
    return "\n".join(out)


def _two(f: Figures, name: str) -> str:
    """kvx: grammar alone / with its jsonschema post-check; peers have no post-check."""
    raw, post = getattr(f.raw, name), getattr(f.post, name)
    return f"{raw} / {post}" if f.post_check else str(raw)


def _statuses(kill_after_s: float):
    def cell(f: Figures) -> str:
        s = f.statuses
        text = f"{s['compiled']} / {s['refused'] + s['killed'] + s['failed']} / {f.counts['over']}"
        extra = [f"{s['killed']} killed at {kill_after_s:g} s"] if s["killed"] else []
        extra += [f"{s['crash']} crashed"] if s["crash"] else []
        extra += [f"{s['failed']} worker deaths"] if s["failed"] else []
        return text + (f" ({', '.join(extra)})" if extra else "")
    return cell


QUOTED = re.compile(r"'([^']*)'|\"([^\"]*)\"")
KEYWORD = re.compile(r"[$A-Za-z][A-Za-z]{0,30}")


def fold(message: str) -> str:
    """A refusal message with its place and values folded, keyword-like names kept."""
    text = QUOTED.sub(lambda m: m.group(0) if KEYWORD.fullmatch(m.group(1) or m.group(2) or "") else "'…'", message)
    text = re.sub(r"(at|pointer) /\S*", r"\1 /...", text)
    return re.sub(r"\d+", "N", text)[:160]


def refusal_reasons(f: Figures, top: int = 40) -> list[tuple[str, int]]:
    """Folded refusal messages, most common first."""
    return Counter(fold(x.detail) for x in f.failures if x.kind in ("refused", "crash", "killed")).most_common(top)


def notes(engine: str, build: str, f: Figures, header: str) -> str:
    lines = [f"# grammar coverage failures: {engine} ({build})", header, "",
             "# refusal reasons (folded), count", *[f"{n:5d}  {r}" for r, n in refusal_reasons(f)], "",
             "# schema id\tkind\tfirst failing instance / error"]
    order = ["invalid-accepted-after-post-check", "invalid-accepted", "valid-rejected", "valid-rejected-by-post-check",
             "crash", "killed", "over-1s", "walk-error", "failed", "invalid-accepted-by-grammar", "refused"]
    for kind in order:
        lines += [f"{x.entry}\t{x.kind}\t{x.detail}" for x in f.failures if x.kind == kind]
    return "\n".join(lines) + "\n"
