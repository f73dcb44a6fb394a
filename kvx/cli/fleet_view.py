"""The fleet's part of the progress line and the summary (`--replicas N`): totals and each replica."""
from __future__ import annotations

SHOWN = 16  # replicas listed one by one in the summary (all of them are in --stats)


def fleet_progress(m: dict) -> str:
    fleet = m.get("fleet")
    if not fleet:
        return ""
    done = " ".join(f"r{r['replica']}:{r['requests_done']}" for r in m.get("replicas", [])[:8])
    return f"  replicas {fleet['live']}/{fleet['replicas']} [{done}] steals {fleet['steals']}"


def fleet_rows(engine: dict) -> list[tuple[str, str]]:
    fleet = engine.get("fleet")
    if not fleet:
        return []
    plans = fleet["plans"]
    planned = (f"{plans[-1]['planned_hit_rate']:.1%} (ideal {plans[-1]['ideal_hit_rate']:.1%}), "
               f"{sum(p['redundant_prefill_tokens'] for p in plans):,} tokens recomputed") if plans else "-"
    rows = [
        ("replicas", f"{fleet['live']}/{fleet['replicas']} live, {fleet['steals']} steals "
                     f"({fleet['stolen_requests']} records), {fleet['requeued_requests']} re-queued"),
        ("plan: hit rate", planned),
        ("busy time max/mean", f"{fleet['busy_max_over_mean']:.2f}"),
    ]
    for r in engine.get("replicas", [])[:SHOWN]:
        rows.append((f"  replica {r['replica']}", f"{r['requests_done']} records, hit {r['cache_hit_rate']:.1%}, "
                                                   f"{r['output_tokens_per_s']:.0f} tok/s busy, {r['busy_s']:.1f} s busy"))
    for r, reason in fleet["lost"]:
        rows.append((f"  replica {r} lost", reason[:80]))
    return rows
