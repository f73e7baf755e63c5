"""How sure the figures are, as the report and the terminal show them (pure: frames in, frames
and text out).

* A speedup with repeated passes prints as ``1.21x [1.10, 1.32]``: the geometric mean over
  passes and its 95 % Student-t interval on the log scale (summary.csv ``*_repeat_mean`` / ``*_ci95_low`` /
  ``*_ci95_high``, from ``profiling/loadtest/workload/repeats.py``); with one pass, the pooled ratio.
* A percentile resting on fewer samples than ``profiling/loadtest/stats/sample_checks.py``
  asks (p95: 20, p99: 100) prints as ``41.2 (n=12, thin)``.
* Whether a speedup is significant is read off the objective's paired ratio
  (``ratios.py``), not off these intervals: the per-tier table prints the TPOT one beside
  it under its own name.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from trtbench.profiling.loadtest.stats.sample_checks import MIN_SAMPLES
from trtbench.profiling.loadtest.workload.repeats import repeat_columns

INTERVAL_LEGEND = (
    "'TPOT speedup': the load test's baseline mean TPOT / variant mean TPOT, a second "
    "figure beside the objective's ratio (not the one the answer rests on): with several "
    "rounds the geometric mean over rounds with its 95 % interval, `mean [low, high]` "
    "(Student t on the log scale; round r of the variant against round r of the baseline), "
    "with one round the ratio of the pooled figures; `-` where the variant does not "
    "stream. 'thin': a percentile resting on fewer samples than it needs (p95: 20, p99: "
    "100)."
)
TPOT_SPEEDUP = "tpot_speedup_ratio"
TPUT_SPEEDUP = "output_token_throughput_speedup_ratio"
TIER_INTERVALS = {
    "ttft_p50_ms": "time_to_first_token_p50_ms",
    "tpot_mean_ms": "time_per_output_token_mean_ms",
    "output_tokens_per_s": "output_token_throughput_tokens_per_s",
}
"""tier-table column → the summary.csv column whose passes give its interval."""


def _num(frame: pd.DataFrame, column: str) -> pd.Series:
    if column not in frame:
        return pd.Series(np.nan, index=frame.index, dtype=float)
    return pd.to_numeric(frame[column], errors="coerce").astype(float)


def interval_text(
    value: object, low: object, high: object, spec: str = ".2f", suffix: str = "x"
) -> str:
    """``1.21x [1.10, 1.32]``; ``1.21x`` without an interval; ``-`` without a value."""
    if value is None or pd.isna(value):
        return "-"
    text = f"{float(value):{spec}}{suffix}"
    if low is None or high is None or pd.isna(low) or pd.isna(high):
        return text
    return f"{text} [{float(low):{spec}}, {float(high):{spec}}]"


def thin_text(value: object, n: object, least: int, spec: str = ".1f") -> str:
    """``41.2``, or ``41.2 (n=12, thin)`` when ``n`` < ``least``; ``-`` without a value."""
    if value is None or pd.isna(value):
        return "-"
    text = f"{float(value):{spec}}"
    if n is not None and not pd.isna(n) and int(n) < least:
        text += f" (n={int(n)}, thin)"
    return text


def _speedup_interval(summary: pd.DataFrame, name: str) -> tuple[pd.Series, ...]:
    mean, low, high = (_num(summary, c) for c in repeat_columns(name))
    return mean, low, high


def speedup_cells(summary: pd.DataFrame, name: str) -> pd.Series:
    """Text of speedup ``name`` per summary row: mean over passes with its interval where
    there is one, else the pooled ratio (``-`` where none)."""
    mean, low, high = _speedup_interval(summary, name)
    pooled = _num(summary, name)
    has = low.notna() & high.notna() & mean.notna()
    return pd.Series(
        [
            interval_text(m if ok else p, lo if ok else None, hi if ok else None)
            for ok, m, lo, hi, p in zip(has, mean, low, high, pooled, strict=True)
        ],
        index=summary.index,
        dtype=object,
    )


def with_speedup_text(summary: pd.DataFrame) -> pd.DataFrame:
    """``summary`` plus ``tpot_speedup_text`` and ``output_token_throughput_speedup_text``
    (for the terminal table)."""
    out = summary.copy()
    out["tpot_speedup_text"] = speedup_cells(summary, TPOT_SPEEDUP)
    out["output_token_throughput_speedup_text"] = speedup_cells(summary, TPUT_SPEEDUP)
    return out


def tier_intervals(summary: pd.DataFrame, basis: pd.Series) -> pd.DataFrame:
    """Interval columns of the report's per-tier table (same index as ``summary``).

    Columns: ``<col>_repeat_mean`` (geometric mean over passes) and ``<col>_ci95_low`` /
    ``<col>_ci95_high`` for TTFT p50, TPOT mean, output tok/s and ``speedup_ratio`` (the TPOT or throughput speedup, as ``basis`` says),
    ``speedup_repeat_mean``, ``repeats_count``, ``ttft_p95_n`` (samples under TTFT p95),
    and the display texts ``speedup_text`` and ``ttft_p95_text``.
    """
    out = pd.DataFrame(index=summary.index)
    for col, name in TIER_INTERVALS.items():
        mean, low, high = repeat_columns(name)
        out[f"{col}_ci95_low"], out[f"{col}_ci95_high"] = (
            _num(summary, low),
            _num(summary, high),
        )
        out[f"{col}_repeat_mean"] = _num(summary, mean)
    tpot, tput = (
        _speedup_interval(summary, TPOT_SPEEDUP),
        _speedup_interval(summary, TPUT_SPEEDUP),
    )
    use_tpot = (basis == "tpot").to_numpy()
    mean, low, high = (
        pd.Series(np.where(use_tpot, a, b), index=summary.index)
        for a, b in zip(tpot, tput, strict=True)
    )
    out["speedup_repeat_mean"], out["speedup_ratio_ci95_low"] = mean, low
    out["speedup_ratio_repeat_mean"] = mean
    out["speedup_ratio_ci95_high"] = high
    out["repeats_count"] = _num(summary, "repeats_count")
    out["ttft_p95_n"] = _num(summary, "time_to_first_token_count")
    pooled = np.where(
        use_tpot, _num(summary, TPOT_SPEEDUP), _num(summary, TPUT_SPEEDUP)
    )
    has = (low.notna() & high.notna() & mean.notna()).to_numpy()
    out["speedup_text"] = [
        interval_text(m, lo, hi) if ok else interval_text(p, None, None)
        for ok, m, lo, hi, p in zip(has, mean, low, high, pooled, strict=True)
    ]
    out["ttft_p95_text"] = [
        thin_text(v, n, MIN_SAMPLES["p95"])
        for v, n in zip(
            _num(summary, "time_to_first_token_p95_ms"), out["ttft_p95_n"], strict=True
        )
    ]
    out["ttft_p99_text"] = [
        thin_text(v, n, MIN_SAMPLES["p99"])
        for v, n in zip(
            _num(summary, "time_to_first_token_p99_ms"), out["ttft_p95_n"], strict=True
        )
    ]
    return out


def interval_of(frame: pd.DataFrame, column: str) -> tuple[np.ndarray, ...] | None:
    """(row positions, low, high) of the rows of ``frame`` with an interval for ``column``;
    None when it has none (for error bars)."""
    low_col, high_col = f"{column}_ci95_low", f"{column}_ci95_high"
    if low_col not in frame or high_col not in frame:
        return None
    low, high = _num(frame, low_col).to_numpy(), _num(frame, high_col).to_numpy()
    keep = ~(np.isnan(low) | np.isnan(high))
    if not keep.any():
        return None
    return np.flatnonzero(keep), low[keep], high[keep]


def thin_notes(tiers: pd.DataFrame) -> list[str]:
    """Sentences naming the tiers whose TTFT p95 rests on fewer than 20 samples and those
    whose TTFT p99 rests on fewer than 100."""
    if "ttft_p95_n" not in tiers:
        return []
    n = pd.to_numeric(tiers["ttft_p95_n"], errors="coerce")
    notes = []
    for stat in ("p95", "p99"):
        least = MIN_SAMPLES[stat]
        thin = tiers[(n < least) & (n > 0)]
        if thin.empty:
            continue
        where = ", ".join(f"`{r.variant}` {r.tier}" for r in thin.itertuples())
        if len(thin) == len(tiers) > 1:  # a list of every row says nothing
            where = f"every (variant, tier) ({len(thin)})"
        notes.append(
            f"TTFT {stat} rests on fewer than {least} requests in {where} (marked 'thin'): "
            f"read it as a rough figure; summary.csv flags every such percentile "
            f"(`*_{stat}_n_ok`)."
        )
    return notes
