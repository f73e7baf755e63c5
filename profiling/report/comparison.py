"""Side-by-side analysis of a run (pure: DataFrames in, DataFrames out; no I/O, no plotting).

Inputs are the run directory's tables as read: ``loadtest/summary.csv``
(:data:`trtbench.profiling.loadtest.files.schemas.SUMMARY_SCHEMA`), ``memory_breakdown.csv``
(:data:`trtbench.profiling.memory.breakdown.MEMORY_BREAKDOWN_SCHEMA`), ``traces/**/steps.csv``
(:data:`trtbench.profiling.traces.schemas.STEP_SCHEMA`, plus a ``trace`` column naming the
folder) and a variants table (``variant``, ``mode``, ``cuda_graphs``, ``streaming``).

Definitions:

* tokens per step: the server-reported acceptance length (pooled over the tier's verify steps,
  else its per-request mean), else the client's tokens per response (mean; one response per
  decode step when streaming), 1 for a baseline.
* speedup: ``tpot_speedup_ratio`` = baseline mean TPOT / variant mean TPOT at the same tier
  (``speedups.add_speedups``); where a variant has no TPOT (it does not stream: one response,
  TTFT = E2E) the output-throughput ratio is used and ``speedup_basis`` says so.
* crossover: the first measured concurrency where the speedup drops below 1, and the point
  where the speedup curve crosses 1 by linear interpolation in log2(concurrency) between the
  last tier at or above 1 and the first below it.
* extra memory: a variant's peak memory minus the baseline's, from the best source both
  have (server tree's device memory, device memory used, else process-tree RSS).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from trtbench.core import methods
from trtbench.profiling.loadtest.stats.metrics import METRICS, stat_column
from trtbench.profiling.loadtest.stats.speedups import add_speedups
from trtbench.profiling.report.uncertainty import tier_intervals

_METRIC = {m.name: m for m in METRICS}
TPOT_SPEEDUP = "tpot_speedup_ratio"
TPUT_SPEEDUP = "output_token_throughput_speedup_ratio"
TPUT = "output_token_throughput_tokens_per_s"
PEAK_SOURCES = ("peak_proc_used_bytes", "peak_device_used_bytes", "peak_rss_bytes")
# The per-tier columns every table and plot below uses (display units in the names).
TIER_COLUMNS = (
    "variant",
    "mode",
    "tier",
    "concurrency",
    "request_rate_per_s",
    "ttft_p50_ms",
    "ttft_p95_ms",
    "tpot_mean_ms",
    "tpot_p50_ms",
    "e2e_p50_ms",
    "output_tokens_per_s",
    "tokens_per_step",
    "speedup_ratio",
    "speedup_basis",
    "request_count",
    "error_count",
    "tier_status",
    "tier_status_reason",
    "speedup_note",
)


def summary_column(metric: str, stat: str = "mean") -> str:
    """Name of a summary.csv statistic column, e.g. ``("time_per_output_token", "p50")``."""
    return stat_column(_METRIC[metric], stat)


def _numeric(frame: pd.DataFrame, column: str) -> pd.Series:
    if column not in frame:
        return pd.Series(np.nan, index=frame.index, dtype=float)
    return pd.to_numeric(frame[column], errors="coerce").astype(float)


def tokens_per_step(summary: pd.DataFrame) -> pd.Series:
    """Measured tokens per decode step per row: the pooled acceptance length, else its
    per-request mean, else tokens/response."""
    accept = _numeric(summary, "acceptance_length_tokens")
    accept = accept.fillna(
        _numeric(summary, summary_column("acceptance_length_per_request"))
    )
    return accept.fillna(_numeric(summary, summary_column("tokens_per_response")))


def tier_table(
    summary: pd.DataFrame, variants: pd.DataFrame, baseline: str | None
) -> pd.DataFrame:
    """One row per (variant, tier) in :data:`TIER_COLUMNS` (module doc for definitions),
    plus the interval and thin-percentile columns of
    :func:`~trtbench.profiling.report.uncertainty.tier_intervals`.

    Args:
        summary: summary.csv rows.
        variants: columns ``variant`` and ``mode`` (others ignored).
        baseline: the variant speedups are relative to (None: speedups NaN).
    """
    s = add_speedups(summary, baseline)
    modes = dict(zip(variants["variant"], variants["mode"], strict=True))
    mode = s["variant"].map(modes)
    steps = tokens_per_step(s)
    steps = steps.where(~mode.isin(methods.NON_DRAFTING) | steps.notna(), 1.0)
    tpot_speedup, tput_speedup = _numeric(s, TPOT_SPEEDUP), _numeric(s, TPUT_SPEEDUP)
    out = pd.DataFrame(
        {
            "variant": s["variant"].astype(str),
            "mode": mode,
            "tier": s["tier"].astype(str),
            "concurrency": _numeric(s, "concurrency"),
            "request_rate_per_s": _numeric(s, "request_rate_per_s"),
            "ttft_p50_ms": _numeric(s, summary_column("time_to_first_token", "p50")),
            "ttft_p95_ms": _numeric(s, summary_column("time_to_first_token", "p95")),
            "tpot_mean_ms": _numeric(s, summary_column("time_per_output_token")),
            "tpot_p50_ms": _numeric(s, summary_column("time_per_output_token", "p50")),
            "e2e_p50_ms": _numeric(s, summary_column("request_latency", "p50")),
            "output_tokens_per_s": _numeric(s, TPUT),
            "tokens_per_step": steps,
            "speedup_ratio": tpot_speedup.fillna(tput_speedup),
            "speedup_basis": np.where(
                tpot_speedup.notna(),
                "tpot",
                np.where(tput_speedup.notna(), "throughput", ""),
            ),
            "request_count": _numeric(s, "request_count"),
            "error_count": _numeric(s, "error_count"),
            "tier_status": s["tier_status"].astype(str),
            "tier_status_reason": s.get(
                "tier_status_reason", pd.Series("", index=s.index)
            )
            .fillna("")
            .astype(str),
            "speedup_note": s["speedup_note"].fillna("").astype(str),
        }
    )
    out = pd.concat([out, tier_intervals(s, out["speedup_basis"])], axis=1)  # repeats
    return out.sort_values(
        ["variant", "concurrency", "request_rate_per_s"]
    ).reset_index(drop=True)


def first_fall(points: Sequence[tuple[float, float]]) -> float | None:
    """Where a ratio first falls from ≥ 1 to < 1: the concurrency at which the line through
    (log2 c0, r0), (log2 c1, r1) reaches 1, for the first neighbours ``(c0, r0), (c1, r1)``
    of ``points`` (concurrency, ratio; ascending concurrency) with r0 ≥ 1 > r1. None: the
    ratio never does (a NaN ratio is neither). The crossover of the comparison matrix and of
    the Recommendation (``recommendation.crossover_of``)."""
    for (c0, r0), (c1, r1) in zip(points, points[1:], strict=False):
        if r0 >= 1.0 > r1:
            l0, l1 = math.log2(c0), math.log2(c1)
            return 2 ** (l0 + (r0 - 1.0) / (r0 - r1) * (l1 - l0))
    return None


def crossovers(tiers: pd.DataFrame) -> pd.DataFrame:
    """Per non-baseline variant: ``crossover_concurrency`` (first measured tier with speedup
    < 1; NaN: never) and ``crossover_interpolated`` (the log2-linear point where the speedup
    first falls from ≥ 1 at one tier to < 1 at the next, as the Recommendation's crossover
    (``recommendation.crossover_of``); NaN: it never does — a variant slower at the lowest
    tier gets one only if it pays at a later tier and then falls below 1)."""
    rows = []
    spec = tiers[
        ~tiers["mode"].isin(methods.NON_DRAFTING) & tiers["concurrency"].notna()
    ]
    for variant, group in spec.groupby("variant", sort=True):
        g = group.dropna(subset=["speedup_ratio"]).sort_values("concurrency")
        below = g.loc[g["speedup_ratio"] < 1.0, "concurrency"]
        first = below.iloc[0] if len(below) else float("nan")
        fall = first_fall(list(zip(g["concurrency"], g["speedup_ratio"], strict=True)))
        interp = float("nan") if fall is None else fall
        rows.append(
            {
                "variant": variant,
                "crossover_concurrency": first,
                "crossover_interpolated": interp,
            }
        )
    return pd.DataFrame(
        rows, columns=["variant", "crossover_concurrency", "crossover_interpolated"]
    )


def peak_memory(breakdown: pd.DataFrame) -> pd.DataFrame:
    """Per variant: ``peak_bytes`` from the first of :data:`PEAK_SOURCES` present in every row
    that has one, and ``peak_source`` naming it (empty where none)."""
    rows = []
    for _, row in breakdown.iterrows():
        src = next((c for c in PEAK_SOURCES if c in row and pd.notna(row[c])), "")
        rows.append(
            {
                "variant": str(row["variant"]),
                "peak_source": src,
                "peak_bytes": float(row[src]) if src else float("nan"),
            }
        )
    return pd.DataFrame(rows, columns=["variant", "peak_source", "peak_bytes"])


def memory_extra(breakdown: pd.DataFrame, baseline: str | None) -> pd.DataFrame:
    """Per variant: weights, peak memory and both minus the baseline's (bytes).

    Columns: variant, weights_bytes, extra_weights_bytes, peak_bytes, peak_source,
    extra_peak_bytes (NaN when the baseline's peak comes from another source).
    """
    peaks = peak_memory(breakdown).set_index("variant")
    weights = _numeric(breakdown, "weights_total_bytes")
    out = pd.DataFrame(
        {"variant": breakdown["variant"].astype(str), "weights_bytes": weights}
    )
    out = out.join(peaks, on="variant")
    base = out[out["variant"] == baseline]
    if base.empty:
        out["extra_weights_bytes"] = np.nan
        out["extra_peak_bytes"] = np.nan
        return out.reset_index(drop=True)
    b = base.iloc[0]
    out["extra_weights_bytes"] = out["weights_bytes"] - b["weights_bytes"]
    same = out["peak_source"] == b["peak_source"]
    out["extra_peak_bytes"] = (out["peak_bytes"] - b["peak_bytes"]).where(same)
    return out.reset_index(drop=True)


def launch_per_step(steps: pd.DataFrame) -> pd.DataFrame:
    """Per trace folder: steps, mean/p50 launch overhead per step (ms), launch calls, graph
    launches and kernels per step, GPU idle per step (ms), and ``cuda_graphs`` (any graph
    launch). Launch overhead per step is STEP_SCHEMA's ``launch_overhead_ns``."""
    rows = []
    for trace, g in steps.groupby("trace", sort=True):
        ovh = _numeric(g, "launch_overhead_ns") / 1e6
        rows.append(
            {
                "trace": str(trace),
                "steps": len(g),
                "launch_overhead_mean_ms": float(ovh.mean()),
                "launch_overhead_p50_ms": float(ovh.median()),
                "launch_calls_per_step": float(_numeric(g, "launch_calls").mean()),
                "graph_launches_per_step": float(_numeric(g, "graph_launches").mean()),
                "kernels_per_step": float(_numeric(g, "kernels").mean()),
                "gpu_idle_per_step_ms": float(_numeric(g, "gpu_idle_ns").mean() / 1e6),
                "cuda_graphs": bool((_numeric(g, "graph_launches") > 0).any()),
            }
        )
    return pd.DataFrame(rows)


MATRIX_COLUMNS = (
    "variant",
    "mode",
    "cuda_graphs",
    "streaming",
    "extra_memory_bytes",
    "extra_memory_basis",
    "tokens_per_step",
    "low_concurrency",
    "speedup_low_ratio",
    "high_concurrency",
    "speedup_high_ratio",
    "crossover_concurrency",
    "crossover_interpolated",
    "ttft_p50_ms",
    "ttft_p95_ms",
    "tpot_mean_ms",
    "output_tokens_per_s_high",
    "speedup_low_text",
    "speedup_high_text",
)


def _matrix_row(group: pd.DataFrame) -> dict[str, float]:
    """Low/high-tier figures of one variant's concurrency tiers (rate tiers if none)."""
    conc = group[group["concurrency"].notna()].sort_values("concurrency")
    g = conc if len(conc) else group
    low, high = g.iloc[0], g.iloc[-1]
    return {
        "low_concurrency": low["concurrency"],
        "high_concurrency": high["concurrency"],
        "speedup_low_ratio": low["speedup_ratio"],
        "speedup_high_ratio": high["speedup_ratio"],
        "speedup_low_text": low.get("speedup_text"),
        "speedup_high_text": high.get("speedup_text"),
        "ttft_p50_ms": low["ttft_p50_ms"],
        "ttft_p95_ms": low["ttft_p95_ms"],
        "tpot_mean_ms": low["tpot_mean_ms"],
        "output_tokens_per_s_high": high["output_tokens_per_s"],
        "tokens_per_step": float(g["tokens_per_step"].mean()),
    }


def comparison_matrix(
    tiers: pd.DataFrame,
    variants: pd.DataFrame,
    memory: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """One row per variant in :data:`MATRIX_COLUMNS`.

    TTFT p50/p95 and TPOT are at the lowest concurrency, output tok/s at the highest; tokens
    per step is the mean over tiers. Extra memory is the peak over baseline
    (``extra_memory_basis`` = the peak source) or, without peaks, the extra weights.

    Args:
        tiers: :func:`tier_table` output.
        variants: ``variant``, ``mode``, ``cuda_graphs``, ``streaming``.
        memory: :func:`memory_extra` output (None: memory not measured).
    """
    cross = crossovers(tiers).set_index("variant")
    mem = memory.set_index("variant") if memory is not None and len(memory) else None
    info = variants.set_index("variant")
    rows = []
    for variant, group in tiers.groupby("variant", sort=False):
        row: dict[str, object] = {"variant": variant, **_matrix_row(group)}
        row["mode"] = info.at[variant, "mode"] if variant in info.index else None
        for col in ("cuda_graphs", "streaming"):
            row[col] = info.at[variant, col] if variant in info.index else None
        for col in ("crossover_concurrency", "crossover_interpolated"):
            row[col] = cross.at[variant, col] if variant in cross.index else np.nan
        extra, basis = np.nan, ""
        if mem is not None and variant in mem.index:
            m = mem.loc[variant]
            if pd.notna(m["extra_peak_bytes"]):
                extra, basis = m["extra_peak_bytes"], str(m["peak_source"])
            elif pd.notna(m["extra_weights_bytes"]):
                extra, basis = m["extra_weights_bytes"], "weights_total_bytes"
        row.update(extra_memory_bytes=extra, extra_memory_basis=basis)
        rows.append(row)
    return pd.DataFrame(rows, columns=list(MATRIX_COLUMNS))


COMPARED_METRICS = (
    "ttft_p50_ms",
    "ttft_p95_ms",
    "tpot_mean_ms",
    "e2e_p50_ms",
    "output_tokens_per_s",
    "tokens_per_step",
    "speedup_ratio",
)


def compare_tiers(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """Join two :func:`tier_table` outputs on (variant, tier): for each of
    :data:`COMPARED_METRICS` the A value, the B value and ``<metric>_b_over_a`` (B / A).

    Rows present in only one run keep NaN on the other side.
    """
    keys = ["variant", "tier"]
    left = a[[*keys, "concurrency", *COMPARED_METRICS]]
    right = b[[*keys, "concurrency", *COMPARED_METRICS]]
    out = left.merge(right, on=keys, how="outer", suffixes=("_a", "_b"))
    out["concurrency"] = out.pop("concurrency_a").fillna(out.pop("concurrency_b"))
    for m in COMPARED_METRICS:
        out[f"{m}_b_over_a"] = out[f"{m}_b"] / out[f"{m}_a"]
    ordered = [*keys, "concurrency"]
    for m in COMPARED_METRICS:
        ordered += [f"{m}_a", f"{m}_b", f"{m}_b_over_a"]
    return out[ordered].sort_values(["variant", "concurrency"]).reset_index(drop=True)


def compare_keyed(
    a: pd.DataFrame, b: pd.DataFrame, key: str, metrics: tuple[str, ...]
) -> pd.DataFrame:
    """Generic side-by-side of two per-``key`` tables (memory per variant, launches per
    trace): ``<m>_a``, ``<m>_b`` and ``<m>_b_over_a`` for each metric."""
    out = a[[key, *metrics]].merge(
        b[[key, *metrics]], on=key, how="outer", suffixes=("_a", "_b")
    )
    for m in metrics:
        out[f"{m}_b_over_a"] = pd.to_numeric(
            out[f"{m}_b"], errors="coerce"
        ) / pd.to_numeric(out[f"{m}_a"], errors="coerce")
    return out.sort_values(key).reset_index(drop=True)
