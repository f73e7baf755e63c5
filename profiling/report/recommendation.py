"""The answer of a run: per measured concurrency the best variant by an objective, how sure,
where speculation stops paying, and what each choice costs in memory (pure: frames in,
typed records out).

Definitions:

* Objective, margin of A over B and its interval: :mod:`trtbench.profiling.report.margins`
  (the objective's per-round figure, round r of A over round r of B, from rounds.csv).
* Significant: the margin's 95 % interval lies above 1. Without an interval (fewer than 3
  rounds): ``significant`` is None and the basis says why.
* Interference: a tier whose best, runner-up or baseline was measured while other processes
  took a share of the host (summary.csv ``interference_flag``) names them in
  ``interference``: the evidence there may read slow.
* Crossover of a speculative variant: going up the complete tiers where it and the baseline
  are measured, ``pays_up_to`` is the largest concurrency of the leading run of tiers where
  its point margin over the baseline is at least 1; ``stops_at`` the first tier where it is
  below 1. The point value decides, not significance: a tier whose margin is near 1 costs
  little either way, while capping speculation at the last *significant* tier would turn it
  off wherever a noisy tier's interval happens to reach 1. ``significant_up_to``: the
  largest concurrency of the leading run where it is significantly better (None: not at the
  lowest tier, or no interval); ``significant_at``: every tier where it is (the labels).
  ``estimate``: where the margin crosses 1, linear in
  log2(concurrency) between the last tier with margin ≥ 1 and the next (as
  ``comparison.crossovers``); interval ``[low, high]`` = [last tier significantly better,
  first tier significantly worse] (None: not bounded by a measured tier).
* Only ``tier_status == complete`` rows are used; the others are named in ``excluded``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np
import pandas as pd

from trtbench.core import methods
from trtbench.profiling.loadtest.stats.decisions import (
    DEFAULT_EQUIVALENCE_MARGIN,
    LookSchedule,
)
from trtbench.profiling.loadtest.workload.repeats import repeat_columns
from trtbench.profiling.report.comparison import first_fall
from trtbench.profiling.report.margins import (
    OBJECTIVE_INFO,
    Margin,
    ObjectiveInfo,
    as_float,
    margin_of,
)
from trtbench.profiling.report.ratios import (
    MarginOf,
    TierRatio,
    pair_ratios,
    ratios_over,
)


@dataclass(frozen=True)
class TierChoice:
    """The best variant at one tier: its objective value, margins, variants left out."""

    tier: str
    concurrency: float | None
    best: str
    value: float
    runner_up: Margin | None
    over_baseline: Margin | None
    excluded: tuple[str, ...] = ()
    interference: tuple[str, ...] = ()


@dataclass(frozen=True)
class Crossover:
    """Where a speculative variant stops paying (concurrencies; module docstring)."""

    variant: str
    pays_up_to: float | None
    stops_at: float | None
    estimate: float | None
    low: float | None
    high: float | None
    basis: str
    significant_up_to: float | None = None
    significant_at: tuple[str, ...] = ()


@dataclass(frozen=True)
class MemoryCost:
    """What serving a variant costs beyond the baseline (bytes; None: not measured).

    Attributes:
        kv_blocks_speculation: KV blocks of the draft model's pool (memory_breakdown.csv
            ``draft_kv_max_blocks``): blocks spent on speculation.
        max_concurrency_unqueued: largest concurrency served without queueing; None with
            ``queue_note`` saying why it is not measured.
    """

    variant: str
    extra_weights_bytes: float | None
    extra_peak_bytes: float | None
    peak_source: str
    kv_blocks_speculation: float | None
    kv_pool_speculation_bytes: float | None
    max_concurrency_unqueued: float | None
    queue_note: str


@dataclass(frozen=True)
class Recommendation:
    """Everything the Recommendation section says (``winner``: the speculative variant the
    config snippet is for; None when no speculative variant wins a tier); ``ratios``: every
    variant over the baseline at every tier, ``pairs``: each pair of speculative variants
    (``ratios.py``), the margins the rest of the report shows."""

    objective: ObjectiveInfo
    baseline: str | None
    tiers: tuple[TierChoice, ...]
    crossovers: tuple[Crossover, ...]
    memory: tuple[MemoryCost, ...]
    excluded: tuple[str, ...]
    winner: str | None
    winner_reason: str
    ratios: tuple[TierRatio, ...] = ()
    pairs: tuple[TierRatio, ...] = ()


def objective_frame(
    tiers: pd.DataFrame, summary: pd.DataFrame, objective: str
) -> pd.DataFrame:
    """``tiers`` (``comparison.tier_table``) plus ``value``, ``value_low``/``value_high`` (the
    variant's interval) and ``ratio_low``/``ratio_high`` (its margin interval over the
    baseline) of ``objective``, joined from ``summary`` on (variant, tier)."""
    info = OBJECTIVE_INFO[objective]
    keys = ["variant", "tier"]
    extra = summary[keys].astype(str).copy()
    cols: dict[str, str] = {}
    if info.column not in tiers:
        cols[info.column] = "value"
    if info.ratio_interval:
        _, low, high = repeat_columns(info.ratio_interval)
        cols.update({low: "ratio_low", high: "ratio_high"})
    if "interference_flag" in summary:
        extra["interference_flag"] = summary["interference_flag"].map(
            lambda v: str(v).strip().lower() == "true"
        )
    for src, dst in cols.items():
        raw = summary[src] if src in summary else pd.Series(np.nan, index=summary.index)
        extra[dst] = pd.to_numeric(raw, errors="coerce").astype(float)
    out = tiers.merge(extra, on=keys, how="left")
    if info.column in tiers:
        out["value"] = pd.to_numeric(out[info.column], errors="coerce")
    for side in ("low", "high"):
        src = f"{info.value_interval}_ci95_{side}" if info.value_interval else None
        out[f"value_{side}"] = out[src] if src and src in out else np.nan
        out[f"ratio_{side}"] = out.get(f"ratio_{side}", np.nan)
    return out  # both speedup ratios are oriented "> 1: the variant is better"


def excluded_rows(frame: pd.DataFrame) -> list[str]:
    """``variant tier: status (reason)`` for every row that is not a complete tier."""
    bad = frame[frame["tier_status"] != "complete"]
    return [
        f"`{r.variant}` {r.tier}: {r.tier_status}"
        + (f" ({r.tier_status_reason})" if r.tier_status_reason else "")
        for r in bad.itertuples()
    ]


def _flagged(*rows: pd.Series | None) -> tuple[str, ...]:
    """The variants of ``rows`` measured under interference (summary.csv flag)."""
    out = []
    for r in rows:
        flag = None if r is None else r.get("interference_flag")
        if flag is not None and not pd.isna(flag) and bool(flag):
            out.append(str(r["variant"]))  # type: ignore[index]
    return tuple(out)


def best_per_tier(
    frame: pd.DataFrame,
    info: ObjectiveInfo,
    baseline: str | None,
    margin: MarginOf = margin_of,
) -> list[TierChoice]:
    """One :class:`TierChoice` per tier label with a complete, valued row (``frame``:
    :func:`objective_frame`), in order of concurrency; ``margin`` computes each margin
    (:func:`~trtbench.profiling.report.margins.margin_of` with the run's rounds)."""
    out = []
    order = frame.sort_values(["concurrency", "request_rate_per_s", "tier"])
    for tier, g in order.groupby("tier", sort=False):
        ok = g[(g["tier_status"] == "complete") & g["value"].notna()]
        excluded = tuple(excluded_rows(g))
        if ok.empty:
            continue
        ranked = ok.sort_values(
            ["value", "variant"], ascending=[not info.higher_is_better, True]
        )
        best = ranked.iloc[0]
        second = ranked.iloc[1] if len(ranked) > 1 else None
        runner = margin(best, second, info, False) if second is not None else None
        base = ranked[ranked["variant"] == baseline]
        over_base = base_row = None
        if baseline is not None and not base.empty and best["variant"] != baseline:
            base_row = base.iloc[0]
            over_base = margin(best, base_row, info, True)
        flagged = tuple(dict.fromkeys(_flagged(best, second, base_row)))
        out.append(
            TierChoice(
                str(tier),
                as_float(best["concurrency"]),
                str(best["variant"]),
                float(best["value"]),
                runner,
                over_base,
                excluded,
                flagged,
            )
        )
    return out


def crossover_of(
    frame: pd.DataFrame,
    variant: str,
    info: ObjectiveInfo,
    baseline: str,
    margin: MarginOf = margin_of,
) -> Crossover:
    """:class:`Crossover` of ``variant`` against ``baseline`` on the concurrency tiers where
    both are complete (module docstring)."""

    def rows(name: str) -> pd.DataFrame:
        g = frame[(frame["variant"] == name) & (frame["tier_status"] == "complete")]
        return g[g["concurrency"].notna() & g["value"].notna()].set_index("tier")

    mine, base = rows(variant), rows(baseline)
    common = mine.index.intersection(base.index)
    mine = mine.loc[common].sort_values("concurrency")
    points, labels = [], []
    for tier, r in mine.iterrows():
        m = margin(r, base.loc[tier], info, True)
        points.append((float(r["concurrency"]), m))
        labels.append(str(tier))
    has_interval = bool(points) and all(m.significant is not None for _, m in points)
    missing = [m.basis for _, m in points if m.significant is None]
    basis = (
        points[0][1].basis
        if has_interval
        else (missing[0] if missing else "no tier where both are measured")
    )
    pays = stops = low = high = surely = None
    for c, m in points:
        if not m.ratio >= 1.0:  # NaN (a zero figure) ends the run too
            stops = c
            break
        pays = c
    for c, m in points if has_interval else []:
        if not m.significant:
            break
        surely = c
    estimate = first_fall([(c, m.ratio) for c, m in points])
    if has_interval:
        low = surely
        after = [
            c
            for c, m in points
            if (surely is None or c > surely) and m.high is not None and m.high < 1.0
        ]
        high = after[0] if after else None
    sure = tuple(t for t, (_, m) in zip(labels, points, strict=True) if m.significant)
    return Crossover(variant, pays, stops, estimate, low, high, basis, surely, sure)


QUEUE_NOTE = (
    "not measured: the report has no per-tier KV-usage or queue figure (server_metrics.csv "
    "is a timeline, not split by tier)"
)


UNQUEUED_NOTE = (
    "largest closed-loop tier with no KV wait, no preemption and no more requests than batch "
    "slots (server_metrics.csv, per tier)"
)


def memory_costs(
    memory: pd.DataFrame | None,
    breakdown: pd.DataFrame | None,
    unqueued: pd.Series | None = None,
) -> list[MemoryCost]:
    """One :class:`MemoryCost` per variant of ``memory`` (``comparison.memory_extra``),
    with the draft's KV pool from ``breakdown`` (memory_breakdown.csv ``draft_kv_max_blocks``,
    ``draft_kv_pool_bytes``, else ``eagle3_kv_pool_bytes``: the draft's share of the target's
    blocks; None where absent). The largest concurrency without queueing
    comes from ``unqueued`` (variant → concurrency,
    :func:`trtbench.profiling.memory.kv_pressure.largest_unqueued_concurrency`); where it
    has none, None with :data:`QUEUE_NOTE`."""
    if memory is None or memory.empty:
        return []
    kv = breakdown.set_index("variant") if breakdown is not None else None
    out = []
    for r in memory.itertuples():
        blocks = pool = None
        if kv is not None and r.variant in kv.index:
            k = kv.loc[r.variant]
            blocks = as_float(k.get("draft_kv_max_blocks"))
            pool = as_float(k.get("draft_kv_pool_bytes"))
            pool = pool if pool is not None else as_float(k.get("eagle3_kv_pool_bytes"))
        calm = as_float(unqueued.get(r.variant)) if unqueued is not None else None
        out.append(
            MemoryCost(
                str(r.variant),
                as_float(r.extra_weights_bytes),
                as_float(r.extra_peak_bytes),
                str(r.peak_source or ""),
                blocks,
                pool,
                calm,
                UNQUEUED_NOTE if calm is not None else QUEUE_NOTE,
            )
        )
    return out


def recommend(
    tiers: pd.DataFrame,
    summary: pd.DataFrame,
    objective: str,
    baseline: str | None,
    memory: pd.DataFrame | None = None,
    breakdown: pd.DataFrame | None = None,
    unqueued: pd.Series | None = None,
    rounds: pd.DataFrame | None = None,
    design: str = "sequential",
    schedule: LookSchedule | None = None,
    equivalence: float = DEFAULT_EQUIVALENCE_MARGIN,
) -> Recommendation:
    """The recommendation of one run (module docstring for every definition).

    Args:
        tiers: ``comparison.tier_table`` output (every tier, any status).
        summary: summary.csv rows (goodput and the paired ratio intervals).
        objective: a key of :data:`OBJECTIVE_INFO`.
        baseline: the baseline variant (None: no margins over it, no crossover).
        memory: ``comparison.memory_extra`` output (None: not measured).
        breakdown: memory_breakdown.csv (the draft's KV pool).
        unqueued: variant → largest concurrency served without queueing (None: the server
            reported no KV / queue metrics).
        rounds: rounds.csv rows, the margins' paired intervals (None: a run written
            before rounds.csv; the summary's intervals stand in).
        design: the run's design (run.json ``design.name``; runs before it: sequential).
        schedule: the run's looks (run.json ``design.stopping``; default: fixed rounds).
        equivalence: the equivalence margin (``report.equivalence_margin``).

    Raises:
        KeyError: ``objective`` is not a key of :data:`OBJECTIVE_INFO`.
    """
    info = OBJECTIVE_INFO[objective]
    frame = objective_frame(tiers, summary, objective)
    margin = partial(
        margin_of,
        rounds=rounds,
        design=design,
        schedule=schedule,
        equivalence=equivalence,
    )
    chosen = best_per_tier(frame, info, baseline, margin)
    # a variant whose method was not recorded (a server trtbench did not build: `trtbench
    # loadtest --variant`) competes too; only the baseline's method and name are out
    speculative = frame["mode"].isna() | ~frame["mode"].isin(methods.NON_DRAFTING)
    spec = sorted(set(frame.loc[speculative, "variant"].astype(str)))
    if baseline is not None:
        spec = [v for v in spec if v != baseline]
    cross = [crossover_of(frame, v, info, baseline, margin) for v in spec if baseline]
    wins = {v: sum(c.best == v for c in chosen) for v in spec}
    reach = {c.variant: c.pays_up_to or 0.0 for c in cross}
    ranked = sorted(spec, key=lambda v: (-wins[v], -reach.get(v, 0.0), v))
    winner = ranked[0] if ranked and wins[ranked[0]] > 0 else None
    if winner is None:
        reason = (
            "no speculative variant is best by "
            f"{info.label} at any complete tier: serve without speculation"
        )
    else:
        reason = (
            f"best by {info.label} at {wins[winner]} of {len(chosen)} complete tiers"
            + (", the most of any speculative variant" if len(spec) > 1 else "")
        )
    return Recommendation(
        info,
        baseline,
        tuple(chosen),
        tuple(cross),
        tuple(memory_costs(memory, breakdown, unqueued)),
        tuple(excluded_rows(frame)),
        winner,
        reason,
        tuple(ratios_over(frame, info, baseline, margin) if baseline else ()),
        tuple(pair_ratios(frame, info, spec, margin)),
    )
