"""Speedups of each variant over the baseline at the same tier (pure), honest about gaps.

A speedup is computed only between two ``complete`` tiers and never divides by zero; every
empty speedup says why in ``speedup_note``, so a failed baseline tier can never show up as
``inf`` or as a number measured against a dead server.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

COMPLETE = "complete"


def _speedup_note(row: pd.Series, base: pd.DataFrame, baseline: str) -> str:
    """Why a row has no speedup ('' when it has one)."""
    if row["tier_status"] != COMPLETE:
        return f"tier is {row['tier_status']}"
    if row["variant"] == baseline:
        return ""
    if row["tier"] not in base.index:
        return f"the baseline ({baseline}) has no tier {row['tier']}"
    status = base.at[row["tier"], "tier_status"]
    if status != COMPLETE:
        return f"the baseline ({baseline}) {row['tier']} is {status}"
    return ""


def add_speedups(summary: pd.DataFrame, baseline: str | None) -> pd.DataFrame:
    """Add TPOT and output-throughput speedups against ``baseline`` at the same tier.

    ``tpot_speedup_ratio`` = baseline mean TPOT / variant mean TPOT;
    ``output_token_throughput_speedup_ratio`` = variant tok/s / baseline tok/s. Both > 1
    mean the variant is faster. They are computed only between two ``complete`` tiers
    (a missing ``tier_status`` column, as in files written before it existed, counts as
    complete) and never divide by zero: otherwise they are NaN and ``speedup_note`` says
    why (a partial or failed tier, a baseline without that tier or without tokens).
    """
    out = summary.copy()
    if "tier_status" not in out.columns:
        out["tier_status"] = COMPLETE
    out["tier_status"] = out["tier_status"].fillna(COMPLETE)
    tpot = "time_per_output_token_mean_ms"
    tput = "output_token_throughput_tokens_per_s"
    nan = float("nan")
    out["tpot_speedup_ratio"] = nan
    out["output_token_throughput_speedup_ratio"] = nan
    out["speedup_note"] = ""
    if baseline is None or out.empty:
        return out
    base = out[out["variant"] == baseline].set_index("tier")
    notes = out.apply(_speedup_note, axis=1, args=(base, baseline))
    usable = notes == ""
    mapped = out["tier"].where(usable).map(base[tpot]) if tpot in base else nan
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio_tpot = mapped / out.get(tpot, nan)
        ratio_tput = out.get(tput, nan) / out["tier"].where(usable).map(base[tput])
    ratio_tpot = ratio_tpot.where(np.isfinite(ratio_tpot) & (ratio_tpot > 0))
    ratio_tput = ratio_tput.where(np.isfinite(ratio_tput) & (ratio_tput > 0))
    zero = usable & (out["variant"] != baseline) & ratio_tpot.isna() & ratio_tput.isna()
    notes = notes.where(~zero, "baseline or variant has no output tokens at this tier")
    out["tpot_speedup_ratio"] = ratio_tpot
    out["output_token_throughput_speedup_ratio"] = ratio_tput
    out["speedup_note"] = notes
    return out
