"""``loadtest/rounds.csv``: one row per measured cell (variant × tier × round) with its figures,
when it ran and what else used the host meanwhile; and the interference columns of
summary.csv (pure).

A cell's figures are its own pass's (:func:`trtbench.profiling.loadtest.stats.trusted_summary.
per_pass`): the values every paired ratio is formed from (round r of A over round r of B,
:mod:`trtbench.profiling.report.paired`). Its timing and host load come from the run's tier
hooks (:class:`CellTiming`, one per pass, in the order the passes ran).

Interference: a cell is flagged when processes outside trtbench's own tree took more than
:data:`~trtbench.profiling.loadtest.records.host_load.OTHER_SHARE_LIMIT` of the host's CPU during it,
or another process held a GPU (:func:`~trtbench.profiling.loadtest.records.host_load.is_flagged`). A
tier of summary.csv is flagged when any of its rounds is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np
import pandas as pd

from trtbench.core.export import Column
from trtbench.profiling.loadtest.records.host_load import (
    OTHER_SHARE_LIMIT,
    HostLoad,
    is_flagged,
)

ROUNDS_CSV = "rounds.csv"
CELL_FIGURES = {
    "request_count": "request_count",
    "error_count": "error_count",
    "time_to_first_token_p50_ms": "ttft_p50_ms",
    "time_per_output_token_mean_ms": "tpot_mean_ms",
    "time_per_output_token_p50_ms": "tpot_p50_ms",
    "output_token_throughput_tokens_per_s": "output_tokens_per_s",
    "request_goodput_per_s": "request_goodput_per_s",
}
"""summary column of a pass → its rounds.csv name."""
_SHARE = f"{OTHER_SHARE_LIMIT:.0%}"


@dataclass(frozen=True)
class CellTiming:
    """When one pass of one variant over one tier ran, and the host's load meanwhile.

    Attributes:
        variant, tier: the cell's variant and tier label.
        round: 0-based round (the pass's ``repeat``).
        start_ns, end_ns: ``time.perf_counter_ns()`` at the tier hooks (start / end).
        started_unix_s: wall clock at the start (``time.time()``, for the label only).
        host: what the host spent meanwhile (:mod:`~trtbench.profiling.loadtest.records.host_load`).
    """

    variant: str
    tier: str
    round: int
    start_ns: int
    end_ns: int
    started_unix_s: float
    host: HostLoad


ROUNDS_SCHEMA: tuple[Column, ...] = (
    Column("variant", "variant name"),
    Column("tier", "tier label (c<N> or r<rate>)"),
    Column(
        "round", "0-based round (loadtest.repeats); requests.csv `repeat`", True, "int"
    ),
    Column(
        "position",
        "0-based place of the cell in the run's order (by start time)",
        False,
        "int",
    ),
    Column(
        "started_at",
        "wall-clock start, ISO 8601 UTC (a label: durations use the monotonic clock)",
        False,
        "str",
    ),
    Column(
        "start_s", "start, seconds after the run's first cell (monotonic clock)", False
    ),
    Column("duration_s", "from the cell's first send to its last response", False),
    Column("request_count", "requests of this pass in the measurement window"),
    Column("error_count", "of those, failed"),
    Column("ttft_p50_ms", "TTFT median of the pass"),
    Column("tpot_mean_ms", "TPOT mean of the pass"),
    Column("tpot_p50_ms", "TPOT median of the pass"),
    Column("output_tokens_per_s", "output tokens / the pass's span"),
    Column(
        "request_goodput_per_s",
        "requests meeting every SLO / the pass's span (needs loadtest.slo_*)",
        False,
    ),
    Column(
        "host_busy_cores",
        "cores' worth of CPU every process on the host used during the cell (/proc/stat)",
        False,
    ),
    Column(
        "own_cpu_cores",
        "of those, trtbench's own process tree (client, workers, the servers it started)",
        False,
    ),
    Column(
        "host_other_cpu_cores",
        "of those, every other process, kernel thread and interrupt",
        False,
    ),
    Column(
        "host_other_cpu_share", "host_other_cpu_cores / the host's CPUs (0..1)", False
    ),
    Column(
        "gpu_other_processes",
        "compute processes on a GPU that are not trtbench's (NVML; empty without NVML)",
        False,
    ),
    Column("gpu_other_used_bytes", "their device memory (NVML)", False),
    Column(
        "host_load_source",
        "proc, proc+nvml, or unavailable (no /proc: not measured)",
        False,
        "str",
    ),
    Column(
        "interference_flag",
        f"other processes took more than {_SHARE} of the host's CPU, or held a GPU, during the cell",
        False,
        "bool",
    ),
)

INTERFERENCE_COLUMNS: tuple[Column, ...] = (
    Column(
        "host_other_cpu_share_max",
        f"the largest share of the host's CPU other processes took during one round of the tier (flag above {OTHER_SHARE_LIMIT:g}; rounds.csv)",
        False,
    ),
    Column(
        "interference_rounds",
        "rounds of the tier measured while other processes took more than their share or held a GPU",
        False,
    ),
    Column(
        "interference_flag",
        "at least one round of the tier was measured under interference (its figures may read slow)",
        False,
        "bool",
    ),
)
"""summary.csv columns from the cells' host load."""


def _iso(unix_s: float) -> str:
    return datetime.fromtimestamp(unix_s, tz=timezone.utc).isoformat(
        timespec="milliseconds"
    )


def _timing_rows(cells: Sequence[CellTiming]) -> pd.DataFrame:
    if not cells:
        return pd.DataFrame(columns=["variant", "tier", "round"])
    # A cell measured twice under one key (a variant measured again) keeps its last timing.
    last = {(c.variant, c.tier, c.round): c for c in cells}
    ordered = sorted(last.values(), key=lambda c: c.start_ns)
    t0 = ordered[0].start_ns
    rows = []
    for position, c in enumerate(ordered):
        h = c.host
        rows.append(
            {
                "variant": c.variant,
                "tier": c.tier,
                "round": c.round,
                "position": position,
                "started_at": _iso(c.started_unix_s),
                "start_s": (c.start_ns - t0) / 1e9,
                "duration_s": (c.end_ns - c.start_ns) / 1e9,
                "host_busy_cores": h.host_busy_cores,
                "own_cpu_cores": h.own_cores,
                "host_other_cpu_cores": h.other_cores,
                "host_other_cpu_share": h.other_share,
                "gpu_other_processes": h.gpu_other_processes,
                "gpu_other_used_bytes": h.gpu_other_used_bytes,
                "host_load_source": h.source,
                "interference_flag": is_flagged(h),
            }
        )
    return pd.DataFrame(rows)


def rounds_table(passes: pd.DataFrame, cells: Sequence[CellTiming]) -> pd.DataFrame:
    """rounds.csv rows: each pass's figures joined with its cell timing.

    Args:
        passes: summary rows of single passes with ``variant``, ``tier``, ``repeat``
            (``trusted_summary.per_pass``).
        cells: the run's cell timings (may be empty: ``trtbench loadtest`` of a server
            trtbench did not start has no host figures).

    Returns:
        One row per (variant, tier, round) of ``passes`` that was measured — it has a cell
        timing or sent a request (a race's variant that stopped at a tier has empty passes
        for the rounds after: no row) — ordered by ``position`` where known, in
        :data:`ROUNDS_SCHEMA` columns.
    """
    names = [c.name for c in ROUNDS_SCHEMA]
    if passes.empty:
        return pd.DataFrame(columns=names)
    keep = {k: v for k, v in CELL_FIGURES.items() if k in passes}
    cols = ["variant", "tier", "repeat", *keep]
    out = passes[cols].rename(columns={"repeat": "round", **keep})
    out = out.astype({"variant": str, "tier": str, "round": int})
    out = out.merge(_timing_rows(cells), on=["variant", "tier", "round"], how="left")
    if "position" not in out:  # no timings (``trtbench loadtest``): figures only
        out["position"] = np.nan
    count = out["request_count"] if "request_count" in out else pd.Series(0, out.index)
    sent = pd.to_numeric(count, errors="coerce").fillna(0) > 0
    out = out[out["position"].notna() | sent]
    out = out.sort_values(["position", "variant", "tier", "round"], na_position="last")
    return out[[n for n in names if n in out]].reset_index(drop=True)


def interference_summary(summary: pd.DataFrame, rounds: pd.DataFrame) -> pd.DataFrame:
    """``summary`` plus :data:`INTERFERENCE_COLUMNS` from ``rounds`` (rounds.csv rows).

    A tier without host figures gets NaN share, 0 rounds and no flag.
    """
    out = summary.copy()
    if out.empty or "variant" not in out:
        return out
    share = pd.to_numeric(rounds.get("host_other_cpu_share"), errors="coerce")
    flag = rounds.get("interference_flag")
    frame = pd.DataFrame(
        {
            "variant": rounds.get("variant", pd.Series(dtype=str)).astype(str),
            "tier": rounds.get("tier", pd.Series(dtype=str)).astype(str),
            "share": share if share is not None else np.nan,
            "flag": flag.fillna(False).astype(bool) if flag is not None else False,
        }
    )
    grouped = frame.groupby(["variant", "tier"], sort=False).agg(
        host_other_cpu_share_max=("share", "max"), interference_rounds=("flag", "sum")
    )
    keys = pd.MultiIndex.from_arrays(
        [out["variant"].astype(str), out["tier"].astype(str)]
    )
    found = grouped.reindex(keys)
    out["host_other_cpu_share_max"] = found["host_other_cpu_share_max"].to_numpy()
    rounds_n = found["interference_rounds"].fillna(0).astype(int).to_numpy()
    out["interference_rounds"] = rounds_n
    out["interference_flag"] = rounds_n > 0
    return out


def interference_warnings(summary: pd.DataFrame) -> list[str]:
    """One line per variant naming its tiers measured under interference (complete ones)."""
    if "interference_flag" not in summary:
        return []
    hit = summary[summary["interference_flag"].fillna(False).astype(bool)]
    lines = []
    for variant, g in hit.groupby("variant", sort=False):
        where = ", ".join(
            f"{r.tier} ({int(r.interference_rounds)} of {_rounds(r)} rounds, others up to "
            f"{_pct(r.host_other_cpu_share_max)} of the host)"
            for r in g.itertuples()
        )
        lines.append(
            f"{variant}: measured while other processes used the host at {where}: these "
            "figures may read slow; the report marks them (rounds.csv has each round)"
        )
    return lines


def _rounds(row: object) -> str:
    n = getattr(row, "repeats_count", None)
    return "?" if n is None or (isinstance(n, float) and math.isnan(n)) else str(int(n))


def _pct(value: object) -> str:
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "?"
    return "?" if math.isnan(x) else f"{x:.0%}"
