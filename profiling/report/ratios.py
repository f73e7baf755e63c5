"""Every variant's ratio over the baseline, and each pair of speculative variants', by the
run's objective at every tier (pure: the recommendation's frame in, typed records, frames and
Markdown out).

One speedup story: a ratio here is the Recommendation's margin
(:func:`~trtbench.profiling.report.margins.margin_of`: the objective's per-round figure,
round r of A over round r of B, its geometric mean and its interval), so the comparison
table, the per-tier table, the crossover lines and ``plots/speedup.png`` state the figure
the answer rests on, with the same interval. The load test's TPOT mean ratio
(``tpot_speedup_ratio``) stays in the per-tier table under its own name.

Verdict of a ratio (:func:`verdict`), read off its interval alone: ``significantly better``
(it lies above 1), ``significantly worse`` (below 1), ``equivalent (±m)`` (it holds 1 and lies
within the equivalence margin, ``stats/decisions.py``), else ``not significant`` (it holds 1);
no verdict without an interval.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from trtbench.profiling.loadtest.stats.decisions import EQUIVALENT
from trtbench.profiling.report.margins import Margin, ObjectiveInfo, as_float

MarginOf = Callable[[pd.Series, pd.Series, ObjectiveInfo, bool], Margin]
BETTER_WORDS = "significantly better"
WORSE_WORDS = "significantly worse"
OPEN_WORDS = "not significant"


@dataclass(frozen=True)
class TierRatio:
    """``variant`` over ``margin.over`` at ``tier`` by the objective (> 1: better)."""

    variant: str
    tier: str
    concurrency: float | None
    margin: Margin


def _complete(frame: pd.DataFrame) -> pd.DataFrame:
    ok = frame[(frame["tier_status"] == "complete") & frame["value"].notna()]
    return ok.sort_values(["variant", "concurrency", "request_rate_per_s", "tier"])


def ratios_over(
    frame: pd.DataFrame, info: ObjectiveInfo, baseline: str, margin: MarginOf
) -> list[TierRatio]:
    """Each other variant over ``baseline`` at every complete tier where both have a value.

    Args:
        frame: ``recommendation.objective_frame`` output.
        info: the objective.
        baseline: the baseline variant.
        margin: the run's margin (``margin_of`` with its rounds, design and looks).
    """
    ok = _complete(frame)
    base = ok[ok["variant"] == baseline].set_index("tier")
    out = []
    for _, row in ok[ok["variant"] != baseline].iterrows():
        if row["tier"] in base.index:
            m = margin(row, base.loc[row["tier"]], info, True)
            out.append(_ratio(row, m))
    return out


def pair_ratios(
    frame: pd.DataFrame, info: ObjectiveInfo, variants: Sequence[str], margin: MarginOf
) -> list[TierRatio]:
    """Each pair (A, B) of ``variants`` (A before B by name) at every complete tier where
    both have a value: A over B, paired by round where the run has rounds."""
    ok = _complete(frame)
    out = []
    for a, b in itertools.combinations(sorted(variants), 2):
        mine, other = (ok[ok["variant"] == v].set_index("tier") for v in (a, b))
        for tier, row in mine.iterrows():
            if tier in other.index:
                out.append(_ratio(row, margin(row, other.loc[tier], info, False)))
    return out


def _ratio(row: pd.Series, m: Margin) -> TierRatio:
    tier = row.get("tier", row.name)  # a row indexed by tier: its name
    return TierRatio(str(row["variant"]), str(tier), as_float(row["concurrency"]), m)


def verdict(m: Margin) -> str:
    """The claim a ratio's interval supports (module docstring); '' without one."""
    if m.low is None or m.high is None:
        return ""
    if m.low > 1.0:
        return BETTER_WORDS
    if m.high < 1.0:
        return WORSE_WORDS
    if m.decision == EQUIVALENT:
        return f"equivalent (±{100 * m.equivalence_margin:g} %)"
    return OPEN_WORDS


def ratio_text(m: Margin | None) -> str:
    """``1.27x [1.08, 1.49], significantly better``; ``1.27x`` without an interval; ``-``
    without a ratio."""
    if m is None or m.ratio != m.ratio:  # NaN: a zero figure, no ratio
        return "-"
    if m.low is None or m.high is None:
        return f"{m.ratio:.2f}x"
    return f"{m.ratio:.2f}x [{m.low:.2f}, {m.high:.2f}], {verdict(m)}"


def objective_tiers(
    tiers: pd.DataFrame, ratios: Sequence[TierRatio], baseline: str | None
) -> pd.DataFrame:
    """``tiers`` (``comparison.tier_table``) with its speedup columns on the objective's
    ratios: ``speedup_ratio``, ``speedup_ratio_ci95_low`` / ``_high``, ``speedup_text`` (with
    its verdict) from ``ratios``; the baseline's complete rows 1; NaN / ``-`` where none.
    The TPOT mean ratio moves to ``tpot_speedup_text`` (``-`` where it was the throughput
    ratio of a variant that does not stream)."""
    out = tiers.copy()
    tpot = out["speedup_basis"] == "tpot"
    out["tpot_speedup_text"] = out["speedup_text"].where(tpot, "-")
    by = {(r.variant, r.tier): r.margin for r in ratios}
    ratio, low, high, text = [], [], [], []
    for r in out.itertuples():
        m = by.get((r.variant, r.tier))
        if m is None and r.variant == baseline and r.tier_status == "complete":
            m = Margin(r.variant, 1.0, None, None, None, "the baseline itself")
        ratio.append(np.nan if m is None else m.ratio)
        low.append(np.nan if m is None or m.low is None else m.low)
        high.append(np.nan if m is None or m.high is None else m.high)
        text.append(ratio_text(m))
    out["speedup_ratio"] = ratio
    out["speedup_ratio_ci95_low"], out["speedup_ratio_ci95_high"] = low, high
    out["speedup_ratio_repeat_mean"] = np.nan  # the ratio is the mean over rounds
    out["speedup_text"] = text
    return out


def pair_lines(pairs: Sequence[TierRatio], info: ObjectiveInfo) -> list[str]:
    """One table of every pair of speculative variants (rows) by tier (columns): the ratio
    of the row's first variant over its second with its interval and verdict; [] when
    there is no pair."""
    if not pairs:
        return []
    tiers = list(dict.fromkeys(p.tier for p in sorted(pairs, key=_order)))
    cells: dict[tuple[str, str], dict[str, str]] = {}
    for p in pairs:
        cells.setdefault((p.variant, p.margin.over), {})[p.tier] = ratio_text(p.margin)
    lines = [
        "### Variant against variant",
        "",
        f"Each cell: the {info.label} ratio of the row's first variant over its second at "
        "the tier (> 1: the first is better), paired by round like the margins above, "
        "with its interval and what the interval supports.",
        "",
        "| variants | " + " | ".join(tiers) + " |",
        "|---|" + "---|" * len(tiers),
    ]
    for (a, b), row in cells.items():
        shown = " | ".join(row.get(t, "-") for t in tiers)
        lines.append(f"| `{a}` / `{b}` | {shown} |")
    return lines


def _order(p: TierRatio) -> tuple[float, str]:
    return (p.concurrency if p.concurrency is not None else np.inf, p.tier)


def ratio_name(info: ObjectiveInfo) -> str:
    """The speedup's name in headers and captions: ``output tok/s vs baseline``."""
    return f"{info.label} vs baseline"


def ratio_legend(info: ObjectiveInfo, ratios: Sequence[TierRatio]) -> str:
    """What the speedup columns state (module docstring), and the intervals' basis."""
    way = "variant / baseline" if info.higher_is_better else "baseline / variant"
    bases = dict.fromkeys(r.margin.basis for r in ratios if r.margin.low is not None)
    return (
        f"'{ratio_name(info)}': the Recommendation's objective as a ratio, {way} "
        f"{info.label} at the same tier (> 1: the variant is better), paired by round: "
        "the geometric mean of the round ratios, its interval in brackets and what the "
        "interval supports: significantly better / worse (it lies above / below 1), "
        "equivalent (it holds 1 within the equivalence margin), not significant (it "
        "holds 1)." + "".join(f" Intervals: {b}." for b in bases)
    )


def open_note(ratios: Sequence[TierRatio], by_need: bool = False) -> list[str]:
    """The note on how many ratios over the baseline could not be told from 1 (none when
    every one with an interval is decided, or none has an interval) and what would narrow
    them; ``by_need``: the run raced (``rounds: auto``), which measures each tier's leader
    against the rest and stops measuring a variant once the leader is clearly ahead of it,
    so a dropped variant's ratio over the baseline keeps the rounds it had."""
    shown = [r for r in ratios if verdict(r.margin)]
    held = [r for r in shown if verdict(r.margin) == OPEN_WORDS]
    if not held:
        return []
    head = (
        f"{len(held)} of {len(shown)} ratios over the baseline are {OPEN_WORDS} (their "
        "intervals hold 1; the comparison matrix and the per-tier table show which): "
    )
    if by_need:
        return [
            head
            + "the race spent its rounds on the comparisons the answer rests on and "
            "stopped measuring a variant once a tier's leader was clearly ahead of it, so "
            "its ratio over the baseline keeps the rounds it had; a larger "
            "`loadtest.budget`, or a fixed `loadtest.rounds`, measures every variant "
            "further."
        ]
    return [head + "more rounds (`loadtest.rounds`, or `rounds: auto`) narrow them."]
