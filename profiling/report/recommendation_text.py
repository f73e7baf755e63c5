"""The Recommendation section of ``report.md`` and ``recommendation.json`` (pure: records in,
text / JSON-ready dict out).

``recommendation.json`` fields (units as in the CSVs; null: not available):

* ``schema_version`` (1), ``objective`` {name, column, higher_is_better, label, unit},
  ``baseline``, ``winner`` (the speculative variant the config is for; null: serve without
  speculation), ``winner_reason``, ``answer`` (the one-line answer).
* ``tiers``: per measured tier {tier, concurrency, best, value, runner_up, over_baseline,
  excluded, interference (variants of the tier measured while other processes used the
  host)}; a margin is {over, ratio (> 1: better), low, high (interval bounds), significant
  (null: no interval), basis (the design behind the interval), rounds (the pairs),
  decision (better / worse / equivalent / open), level (the interval's confidence: 0.95,
  or above for a look of ``rounds: auto``), equivalence_margin, resolution (an open one:
  the difference its interval could not tell apart; null when decided)}.
* ``crossovers``: per speculative variant {variant, pays_up_to, stops_at, estimate, low,
  high, basis, significant_up_to} (concurrencies) and significant_at (tier labels).
* ``memory``: per variant {extra_weights_bytes, extra_peak_bytes, peak_source,
  kv_blocks_speculation, kv_pool_speculation_bytes, max_concurrency_unqueued, queue_note}.
* ``excluded``: tiers not used (partial, failed, interrupted), with their reason.
* ``policy``: {variant, mode, draft_len, max_concurrency, schedule [[batch, K], …], notes}.
* ``snippets``: {target, language, text, config, notes} for the trtbench variant, each
  TensorRT-LLM LLM-API version, vLLM and the engine path.
* ``categories`` (only when the prompts had categories, ``loadtest.datasets``): {mix
  {category: share of requests}, winners {tier: {category: variant or null}}, differs}
  (``trtbench.profiling.report.category_section.category_advice``).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Any

from trtbench.core import methods
from trtbench.core.units import format_bytes
from trtbench.profiling.loadtest.stats.decisions import (
    DECIDED,
    EQUIVALENT,
    resolution_text,
)
from trtbench.profiling.report.recommendation import (
    Crossover,
    Margin,
    Recommendation,
    TierChoice,
)
from trtbench.profiling.report.recommendation_config import Policy, Snippet

SCHEMA_VERSION = 1


def _c(v: float | None) -> str:
    return "-" if v is None else f"{v:g}"


def _pct(m: Margin) -> str:
    """``+14.2 % [-3.8, +35.7]`` (the margin as a change, with its interval)."""
    text = f"{(m.ratio - 1) * 100:+.1f} %"
    if m.low is not None and m.high is not None:
        text += f" [{(m.low - 1) * 100:+.1f}, {(m.high - 1) * 100:+.1f}]"
    return text


def _verdict(m: Margin) -> str:
    """significant / significantly worse / equivalent within ±m / undecided with what it
    could not tell apart (the margin's decision, ``stats/decisions.py``)."""
    if m.significant is None:
        return "no interval"
    if m.significant:
        return "significant"
    if m.high is not None and m.high < 1.0:
        return "significantly worse"
    if m.decision == EQUIVALENT:
        return f"equivalent within ±{100 * m.equivalence_margin:g} %"
    if m.level > 0.95 + 1e-9:  # a race's look (rounds: auto) ended open
        return f"undecided at budget: {resolution_text(m.low, m.high)}"
    return f"not significant, undecided: {resolution_text(m.low, m.high)}"


def _margin(m: Margin | None, name: bool = False) -> str:
    """A margin cell: change, interval, verdict (and the variant it is over)."""
    if m is None or m.ratio != m.ratio:  # no margin, or a zero figure (NaN ratio)
        return "-"
    over = f" over `{m.over}`" if name else ""
    return f"{_pct(m)}{over}, {_verdict(m)}"


def _evidence(t: TierChoice, named: bool = True) -> str:
    rounds = max(
        (m.rounds for m in (t.over_baseline, t.runner_up) if m is not None), default=0
    )
    basis = next((m.basis for m in (t.over_baseline, t.runner_up) if m is not None), "")
    design = next(
        (d for d in ("interleaved", "rounds", "sequential") if d in basis), ""
    )
    text = f"{rounds} {design} rounds" if rounds else (basis or "-")
    if t.interference and named:
        text += "; interference: " + ", ".join(f"`{v}`" for v in t.interference)
    return text


def _unjudged(rec: Recommendation) -> list[str]:
    """How the margins were judged, once per basis (the table's cells say only the verdict)."""
    bases = [
        m.basis
        for t in rec.tiers
        for m in (t.over_baseline, t.runner_up)
        if m is not None
    ]
    return [f"Intervals: {b}." for b in dict.fromkeys(bases)]


def _tier_list(tiers: list[str]) -> str:
    return ", ".join(tiers) if tiers else "none"


def answer(rec: Recommendation, policy: Policy | None) -> str:
    """The answer: which variant, up to which concurrency, how sure; then what it could
    not use (:func:`_not_used`): missing evidence makes it say less, never more."""
    return _answer(rec, policy) + _not_used(rec)


def _not_used(rec: Recommendation) -> str:
    """`` Not used, not complete: `ngram-k4` at c1 (failed), c2 (partial).`` from the
    recommendation's excluded rows; empty when every row was complete."""
    by: dict[str, list[str]] = {}
    for row in rec.excluded:
        if m := re.match(r"`([^`]+)` (\S+): (\w+)", row):
            by.setdefault(m[1], []).append(f"{m[2]} ({m[3]})")
    text = "; ".join(f"`{v}` at {', '.join(tiers)}" for v, tiers in by.items())
    return f" Not used, not complete: {text}." if text else ""


def _answer(rec: Recommendation, policy: Policy | None) -> str:
    if policy is None:
        return f"Serve without speculation: {rec.winner_reason}."
    how = methods.label(policy.mode) if policy.mode else "its method not recorded"
    served = f"`{policy.variant}` ({how})"
    cross = next((c for c in rec.crossovers if c.variant == policy.variant), None)
    mine = [
        t for t in rec.tiers if t.best == policy.variant and t.over_baseline is not None
    ]
    sure = [t.tier for t in mine if t.over_baseline and t.over_baseline.significant]
    if mine and not sure and all(t.over_baseline.significant is False for t in mine):
        # best by point value only: say so rather than claim it pays everywhere
        return (
            f"Serve {served} where the per-tier table of the report names it best, by point "
            f"value only: {rec.winner_reason}; at none of those tiers is its margin "
            "over the baseline significant (its intervals over rounds): measure "
            "more rounds before acting on it."
        )
    where = "at every measured concurrency"
    if policy.max_concurrency is not None:
        where = f"up to concurrency {policy.max_concurrency}, speculation off above"
        if cross is not None and cross.stops_at is not None:
            where += f" (at {cross.stops_at:g} it no longer beats the baseline)"
    how = ""
    if any(t.over_baseline.significant is not None for t in mine):
        how = (
            f"; its margin over the baseline is significant at {_tier_list(sure)} "
            f"(of the {len(mine)} tiers it wins)"
        )
    return f"Serve {served} {where}: {rec.winner_reason}{how}{_ties(mine)}."


def _ties(mine: Sequence[TierChoice]) -> str:
    """Where the runner-up is decided equivalent to the winner: ``; `a` or `medusa`:
    within ±5 % at c4, c8`` (either serves there); empty when nowhere."""
    tied: dict[tuple[str, str, float], list[str]] = {}
    for t in mine:
        m = t.runner_up
        if m is not None and m.decision == EQUIVALENT:
            tied.setdefault((t.best, m.over, m.equivalence_margin), []).append(t.tier)
    return "".join(
        f"; `{best}` or `{other}`: within ±{100 * margin:g} % at {_tier_list(tiers)}"
        for (best, other, margin), tiers in tied.items()
    )


def _resolved(margin: dict[str, Any] | None) -> dict[str, Any] | None:
    """A margin of recommendation.json with its ``resolution``: for an open one, what its
    interval could not tell apart (``stats/decisions.py``); None when decided."""
    if margin is None:
        return None
    open_ = margin.get("decision") not in DECIDED
    text = resolution_text(margin.get("low"), margin.get("high")) if open_ else None
    return {**margin, "resolution": text}


def _crossover_line(c: Crossover) -> str:
    if c.pays_up_to is None:
        run = "its point margin over the baseline is below 1 at the lowest tier"
    else:
        run = f"beats the baseline by point value from the lowest tier up to {_c(c.pays_up_to)}"
        if c.stops_at is not None:
            run += f", not at {_c(c.stops_at)}"
        else:
            run += " (every measured tier: measure higher concurrencies to find where it stops)"
    if c.basis.startswith("no interval"):
        sure = f"no interval ({c.basis.removeprefix('no interval: ')})"
    elif c.significant_at:
        sure = f"significantly better at {_tier_list(list(c.significant_at))}"
    else:
        sure = "significantly better at no tier"
    cross = ""
    if c.estimate is not None:
        again = " again, after rising above it," if c.pays_up_to is None else ""
        cross = f"; its point margin falls below 1{again} at ≈ {c.estimate:.1f}"
        if c.low is not None or c.high is not None:
            hi = _c(c.high) if c.high else "above the top tier"
            cross += (
                f", interval [{_c(c.low) if c.low else 'below the lowest tier'}, {hi}]"
            )
    return f"- `{c.variant}`: {run}; {sure}{cross}."


def _bytes(v: float | None) -> str:
    return "not measured" if v is None else format_bytes(v, signed=True)


def _mem(rec: Recommendation) -> list[str]:
    out = []
    for m in rec.memory:
        if m.variant == rec.baseline:
            continue
        w = _bytes(m.extra_weights_bytes)
        p = _bytes(m.extra_peak_bytes) + (
            f" ({m.peak_source})" if m.peak_source else ""
        )
        pool = m.kv_pool_speculation_bytes
        if m.kv_blocks_speculation is not None:
            kv = f"{m.kv_blocks_speculation:g} draft KV blocks"
            kv += f" ({format_bytes(pool)})" if pool is not None else ""
        elif pool is not None:
            kv = f"{format_bytes(pool)}, its share of the target's blocks"
        else:
            kv = "no draft-model KV pool"
        unq = (
            _c(m.max_concurrency_unqueued)
            if m.max_concurrency_unqueued
            else m.queue_note
        )
        out.append(
            f"- `{m.variant}`: extra weights {w}, extra peak {p}; "
            f"draft-model KV: {kv} (verification blocks: the KV section); "
            f"largest concurrency without queueing: {unq}."
        )
    return out or ["- memory not measured (no memory_breakdown.csv)"]


def recommendation_lines(
    rec: Recommendation,
    policy: Policy | None,
    snippets: Sequence[Snippet],
    everywhere: str | None = None,
) -> list[str]:
    """Markdown lines of the Recommendation section (heading included): the answer in one
    sentence, then per tier the winner, its margins over the baseline and the runner-up with
    their intervals and the rounds behind them; crossovers, memory, the config (the first
    snippet; the others: :func:`other_snippet_lines`, in the appendix). ``everywhere``:
    the sentence saying every (variant, tier) was measured under interference
    (``design_section.whole_run_interference``), said once instead of per tier."""
    o = rec.objective
    lines = [
        "## Recommendation",
        "",
        f"**{answer(rec, policy)}**",
        "",
        f"| tier | best by {o.label} | {o.unit} | vs baseline | vs runner-up | "
        "evidence |",
        "|---|---|---|---|---|---|",
    ]
    for t in rec.tiers:
        lines.append(
            f"| {t.tier} | `{t.best}` | {t.value:.4g} | "
            f"{_margin(t.over_baseline)} | {_margin(t.runner_up, name=True)} | "
            f"{_evidence(t, named=everywhere is None)} |"
        )
    lines += [
        "",
        f"Objective: {o.label} ({'higher' if o.higher_is_better else 'lower'} is "
        "better; spec `report.objective`, or `trtbench report RUN --objective`). "
        "Margins: the best variant's advantage, its interval in brackets (95 %, or "
        "above for a look of rounds: auto: see Intervals); significant: the interval "
        "excludes 0; equivalent: it lies within the equivalence margin "
        "(report.equivalence_margin); undecided: neither, and the interval is what could "
        "not be told apart.",
        *_unjudged(rec),
    ]
    if everywhere is not None:
        lines += ["", everywhere]
    elif any(t.interference for t in rec.tiers):
        lines += [
            "",
            "Some of this evidence was measured while other processes used the "
            "host (the evidence column names them): re-run on a quiet machine "
            "before relying on those tiers.",
        ]
    if rec.crossovers:
        lines += ["", "Where each speculative variant stops paying:", ""]
        lines += [_crossover_line(c) for c in rec.crossovers]
    lines += ["", "Memory each choice costs (vs the baseline):", "", *_mem(rec)]
    if rec.excluded:
        lines += ["", "Not used (not complete tiers): " + "; ".join(rec.excluded) + "."]
    if policy is not None:
        lines += ["", "### The config that implements it", ""]
        lines += [f"- {n}" for n in policy.notes]
        lines += _snippet_lines(snippets[:1])
        if len(snippets) > 1:
            targets = ", ".join(s.target for s in snippets[1:])
            lines += [
                "",
                f'The same config for {targets}: the appendix, "{OTHER_SERVERS}".',
            ]
    return lines


OTHER_SERVERS = "The config for each server"
"""The appendix section that holds every snippet after the first."""


def _snippet_lines(snippets: Sequence[Snippet]) -> list[str]:
    out = []
    for s in snippets:
        out += ["", f"{s.target}:", "", f"```{s.language}", s.text, "```"]
        out += [f"- {n}" for n in s.notes]
    return out


def other_snippet_lines(
    policy: Policy | None, snippets: Sequence[Snippet]
) -> list[str]:
    """The appendix section with every snippet after the first (the Recommendation shows
    that one and points here); [] when there is none."""
    if policy is None or len(snippets) < 2:
        return []
    return [f"## {OTHER_SERVERS}", *_snippet_lines(snippets[1:])]


def _clean(v: Any) -> Any:
    """NaN → None, recursively (JSON has no NaN)."""
    if isinstance(v, float) and v != v:
        return None
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    return v


def recommendation_json(
    rec: Recommendation, policy: Policy | None, snippets: Sequence[Snippet]
) -> dict[str, Any]:
    """``recommendation.json`` (module docstring for the fields)."""
    data = dataclasses.asdict(rec)
    obj = data.pop("objective")
    data.pop("ratios"), data.pop("pairs")  # the report's tables, not the answer
    data["tiers"] = [
        {
            **t,
            "over_baseline": _resolved(t["over_baseline"]),
            "runner_up": _resolved(t["runner_up"]),
        }
        for t in data["tiers"]
    ]
    keep = ("name", "column", "higher_is_better", "label", "unit")
    return _clean(
        {
            "schema_version": SCHEMA_VERSION,
            "objective": {k: obj[k] for k in keep},
            "answer": answer(rec, policy),
            **data,
            "policy": None if policy is None else dataclasses.asdict(policy),
            "snippets": [dataclasses.asdict(s) for s in snippets],
        }
    )
