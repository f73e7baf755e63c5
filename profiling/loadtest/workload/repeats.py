"""Repeated passes over the tiers (``loadtest.repeats``): pass order, merged tier outcomes,
and each tier's mean and 95 % confidence interval over its passes (pure).

* Pass order: pass 0 runs the tiers in the given order; pass r > 0 in a permutation drawn
  with ``numpy.random.default_rng(seed + r)`` (rotated by one place when it equals the
  previous pass's order), so a slow drift of the host (heat, a
  neighbour) does not always land on the same tier. Prompts keep their order in every pass.
* Outcome of a tier over its passes: the worst status (interrupted > failed > partial >
  complete) with that pass's reason; request counts add up.
* Interval: Student t over the per-pass values, ``mean ± t(0.975, n − 1) · s / √n`` with
  ``s`` the sample standard deviation (ddof 1) and ``t`` from ``scipy.stats.t.ppf``
  (e.g. NIST/SEMATECH e-Handbook §7.2.2.1). A pass's value is computed with the same code as
  the pooled one (:func:`trtbench.profiling.loadtest.stats.metrics.summarize` on that pass's
  records), so pass r of a variant is compared with pass r of the baseline at the same tier.
* Every repeated quantity is positive (latencies, throughputs, speedup ratios), so its mean
  and interval are taken on ``log(value)`` and mapped back (``exp``): the geometric mean with
  a t-interval on the log scale. The bounds stay positive and the interval of 1/x is the
  reciprocal of x's (a plain t-interval on three noisy passes reached -0.18x for a speedup
  and -7 ms for a TTFT p50).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from scipy import stats

from trtbench.profiling.loadtest.records.loop_lag import worst_lag
from trtbench.profiling.loadtest.records.outcome import (
    TIER_COMPLETE,
    TIER_FAILED,
    TIER_INTERRUPTED,
    TIER_PARTIAL,
    LoadResult,
    TierOutcome,
    cpu_sum,
)
from trtbench.profiling.loadtest.workload.schedule import Tier

CONFIDENCE = 0.95
SEVERITY = {TIER_COMPLETE: 0, TIER_PARTIAL: 1, TIER_FAILED: 2, TIER_INTERRUPTED: 3}
"""How bad a pass's status is; a tier's status over its passes is its worst pass's."""
REPEATED = (
    "time_to_first_token_p50_ms",
    "time_per_output_token_mean_ms",
    "output_token_throughput_tokens_per_s",
    "tpot_speedup_ratio",
    "output_token_throughput_speedup_ratio",
)
"""summary.csv columns that get a mean and a 95 % interval over the passes."""
SPEEDUPS = ("tpot_speedup_ratio", "output_token_throughput_speedup_ratio")
ONE_PASS_NOTE = "one pass (loadtest.repeats = 1): no interval; run --repeats 3 or more"


@dataclass(frozen=True)
class TierPass:
    """One pass over one tier: ``repeat`` (0-based), ``index`` (position in the given
    tier list, which seeds its arrival schedule) and the tier."""

    repeat: int
    index: int
    tier: Tier


def tier_passes(tiers: Sequence[Tier], repeats: int, seed: int) -> list[TierPass]:
    """Every pass in run order: pass 0 in the given order, pass r a fresh permutation.

    Args:
        tiers: the tiers in the order given.
        repeats: passes (≥ 1).
        seed: the load test's seed; pass r > 0 permutes with ``default_rng(seed + r)``,
            rotated by one when that would repeat the previous pass's order.

    Raises:
        ValueError: ``repeats`` < 1.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    out = [TierPass(0, i, t) for i, t in enumerate(tiers)]
    previous = np.arange(len(tiers))
    for r in range(1, repeats):
        order = np.random.default_rng(seed + r).permutation(len(tiers))
        if len(tiers) > 1 and np.array_equal(order, previous):
            order = np.roll(order, 1)  # never the previous pass's order again
        out += [TierPass(r, int(i), tiers[int(i)]) for i in order]
        previous = order
    return out


def merge_passes(outcomes: Sequence[TierOutcome]) -> list[TierOutcome]:
    """One outcome per tier label (first-seen order) from the outcomes of its passes.

    The status is the worst pass's (:data:`SEVERITY`) with that pass's reason; requests,
    failed, unfinished and client CPU add up; the event-loop lag is the worst pass's; the server's
    speculative counts of the passes are kept side by side (``spec_counts``).
    """
    merged: dict[str, TierOutcome] = {}
    for o in outcomes:
        old = merged.get(o.tier)
        if old is None:
            merged[o.tier] = replace(o)
            continue
        worse = SEVERITY.get(o.status, 0) > SEVERITY.get(old.status, 0)
        merged[o.tier] = replace(
            o if worse else old,
            requests=old.requests + o.requests,
            failed=old.failed + o.failed,
            unfinished=old.unfinished + o.unfinished,
            loop_lag=worst_lag(old.loop_lag, o.loop_lag),
            spec_counts=old.spec_counts + o.spec_counts,
            client_cpu_s=cpu_sum(old.client_cpu_s, o.client_cpu_s),
        )
    return list(merged.values())


MIN_ROUNDS = 3
"""Rounds a paired interval needs to be stated (two give t(0.975, 1) = 12.7: no information)."""


def t_interval(
    values: Sequence[float] | np.ndarray, confidence: float = CONFIDENCE
) -> tuple[float, float, float, int]:
    """Mean and two-sided Student-t interval of ``values`` (NaNs dropped) at
    ``confidence`` (default 95 %).

    Returns:
        (mean, low, high, n); low/high are NaN with fewer than 2 values, and equal to the
        mean when every value is the same.
    """
    v = np.asarray(values, dtype=float)
    v = v[~np.isnan(v)]
    n = int(v.size)
    if n == 0:
        return float("nan"), float("nan"), float("nan"), 0
    mean = float(v.mean())
    if n < 2:
        return mean, float("nan"), float("nan"), n
    half = float(stats.t.ppf(0.5 + confidence / 2, n - 1) * v.std(ddof=1) / np.sqrt(n))
    return mean, mean - half, mean + half, n


def log_t_interval(
    ratios: Sequence[float] | np.ndarray, confidence: float = CONFIDENCE
) -> tuple[float, float, float, int]:
    """Geometric mean and t-interval at ``confidence`` (default 95 %) of positive values
    (on ``log``, mapped back).

    Returns:
        (geometric mean, low, high, n) as :func:`t_interval`; a value ≤ 0 or NaN is dropped
        (a latency, throughput or speedup is never ≤ 0; NaN marks a pass without one). A
        bound that would not fit a float (beyond e^±700: a level near 1 over 2 values)
        is NaN, as no bound, never ``inf``.
    """
    v = np.asarray(ratios, dtype=float)
    v = v[~np.isnan(v) & (v > 0)]
    mean, low, high, n = t_interval(np.log(v), confidence)
    if not (abs(low) <= 700.0 and abs(high) <= 700.0):  # NaN too
        return float(np.exp(mean)), math.nan, math.nan, n
    return float(np.exp(mean)), float(np.exp(low)), float(np.exp(high)), n


def instance_interval(
    logs: np.ndarray, instances: np.ndarray, level: float, instance_sd: float
) -> tuple[float, float, float]:
    """Mean and interval at ``level`` of paired log ratios whose rounds ran on server
    instances ``instances`` (``profiling/loadtest/stats/decisions.py``, "Server instances").

    Var(mean) = s² / n + τ² · Σ_b (n_b / n)², with s² the sample variance of the ``n``
    log ratios and n_b the rounds of instance b: the rounds' own spread plus the instance
    component, which averages out only over instances, not over rounds. The Student-t
    quantile takes Satterthwaite's degrees of freedom, ν = V² / ((s² / n)² / (n − 1))
    (Satterthwaite 1946, Biometrics Bulletin 2:110), τ being given, not estimated
    (ν = ∞ when s = 0).

    Args:
        logs: shape (n,), n ≥ 2, the log ratios.
        instances: shape (n,), the instance index of each round.
        level: the confidence level (0.95 …).
        instance_sd: τ (≥ 0, a log ratio's SD between instances).

    Returns:
        (mean, low, high) on the log scale.
    """
    n = logs.size
    mean = float(logs.mean())
    within = float(logs.var(ddof=1)) / n
    _, counts = np.unique(instances, return_counts=True)
    var = within + instance_sd**2 * float(np.sum((counts / n) ** 2))
    df = var**2 / (within**2 / (n - 1)) if within > 0 else math.inf
    q = (
        float(stats.t.ppf(0.5 + level / 2, df))
        if math.isfinite(df)
        else float(stats.norm.ppf(0.5 + level / 2))
    )
    half = q * math.sqrt(var)
    return mean, mean - half, mean + half


CONFIDENCE_CAP = 0.999999
"""The highest level an interval is computed at (a level of 1 has infinite bounds)."""


def repeat_columns(name: str) -> tuple[str, str, str]:
    """``(<name>_repeat_mean, <name>_ci95_low, <name>_ci95_high)``."""
    return f"{name}_repeat_mean", f"{name}_ci95_low", f"{name}_ci95_high"


def repeat_stats(
    summary: pd.DataFrame,
    per_pass: pd.DataFrame,
    level_at: Callable[[int], float] | None = None,
    instance: tuple[float, Callable[[int], int]] | None = None,
    baseline: str | None = None,
) -> pd.DataFrame:
    """Add ``repeats_count``, the mean and interval of each :data:`REPEATED` column, and
    ``repeat_ci_note`` to ``summary`` (one row per variant × tier).

    Args:
        summary: the pooled summary (``variant``, ``tier``, ``tier_status``).
        per_pass: summary rows of single passes with a ``repeat`` column (the same columns,
            speedups computed pass against pass).
        level_at: the confidence level of an interval over ``n`` values (a race's looks,
            ``stats/decisions.py`` ``LookSchedule.level_at``: at least 95 %, so that an
            interval stated after the race stopped keeps 95 % coverage; the ``ci95`` columns
            hold it). Default: 95 % for every ``n``.
        instance: (τ, round → server instance) of the run (``LookSchedule.instance_sd``,
            ``instance_of``): the speedup intervals (a ratio between two variants' servers)
            then carry the instance term (:func:`instance_interval`, over the passes'
            ``repeat`` = round). None or τ = 0: none. The ``baseline`` row's speedups
            (the baseline over itself, one server: exactly 1) never carry it.

    ``repeats_count`` counts the passes with at least one measured request. Speedup
    intervals are given for complete tiers only (the pass speedups are NaN otherwise).
    """
    out = summary.copy()
    keys = ["variant", "tier"]
    groups = (
        dict(iter(per_pass.groupby(keys, sort=False)))
        if len(per_pass) and "repeat" in per_pass
        else {}
    )
    rows = []
    for _, row in out.iterrows():
        g = groups.get((row["variant"], row["tier"]))
        measured = g[g["request_count"].fillna(0) > 0] if g is not None else None
        n = 0 if measured is None else int(measured["repeat"].nunique())
        values: dict[str, object] = {"repeats_count": n}
        for name in REPEATED:
            col = measured[name] if measured is not None and name in measured else []
            v = np.asarray(col, dtype=float)
            k = int(np.sum(~np.isnan(v) & (v > 0)))
            level = CONFIDENCE if level_at is None else max(CONFIDENCE, level_at(k))
            mean, low, high, _ = log_t_interval(v, min(level, CONFIDENCE_CAP))
            between = row["variant"] != baseline  # the baseline over itself: no term
            if instance and instance[0] > 0 and name in SPEEDUPS and k >= 2 and between:
                ok = ~np.isnan(v) & (v > 0)
                blocks = np.array([instance[1](int(r)) for r in measured["repeat"]])
                m, lo, hi = instance_interval(
                    np.log(v[ok]), blocks[ok], min(level, CONFIDENCE_CAP), instance[0]
                )
                mean, low, high = math.exp(m), math.exp(lo), math.exp(hi)
            if level >= 1.0:  # a race states no interval before its first look
                low = high = float("nan")
            values.update(zip(repeat_columns(name), (mean, low, high), strict=True))
        values["repeat_ci_note"] = _note(row, n, values)
        rows.append(values)
    extra = pd.DataFrame(rows, index=out.index)
    return pd.concat([out, extra], axis=1)


def _note(row: pd.Series, n: int, values: dict[str, object]) -> str:
    """Why the intervals of a row are empty ('' when they are all there)."""
    if n == 0:
        return "no measured request in any pass"
    if n == 1:
        return ONE_PASS_NOTE
    if row.get("tier_status", TIER_COMPLETE) != TIER_COMPLETE:
        return f"tier is {row['tier_status']}: no speedup interval"
    if all(pd.isna(values[repeat_columns(s)[1]]) for s in SPEEDUPS):
        note = str(row.get("speedup_note") or "")
        return f"no speedup interval ({note})" if note else "no speedup interval"
    return ""


def combine_results(earlier: LoadResult, later: LoadResult) -> LoadResult:
    """One variant's result over two server starts (the ``rounds`` design serves it once
    per round): tier outcomes merged per tier (:func:`merge_passes`), the first stop signal
    and server failure kept."""
    return LoadResult(
        merge_passes([*earlier.tiers, *later.tiers]),
        earlier.stop_signal or later.stop_signal,
        earlier.server_failure or later.server_failure,
    )
