"""Acceptance and per-token latency per prompt category (pure): ``loadtest/categories.csv``.

Speculative decoding pays by what is generated: a draft model agrees more on some text than
on other, and n-gram lookup wins where the output repeats the prompt (code, retrieval) and
loses on open chat. When the prompts carry categories (``loadtest.datasets``), each
(variant, tier) is split by the category of its requests and the same definitions as the
tier's are applied to each part:

- acceptance length, draft acceptance rate and accepted drafts per step, pooled over the
  category's successful requests (:func:`~trtbench.profiling.loadtest.stats.acceptance.acceptance_summary`:
  vLLM ``bench serve``'s acceptance length and rate, AIPerf's token-weighted figures);
- TPOT p50: the median of the category's per-request TPOT (``docs/metrics.md``);
- TPOT speedup: the baseline's TPOT p50 over the variant's, same tier and category (> 1:
  the variant generates faster for that kind of traffic);
- request output throughput p50: the median over the category's requests of output tokens /
  end-to-end latency (tokens/s one user sees for the whole request, TTFT included), and its
  speedup: the variant's over the baseline's, same tier and category. The system throughput
  (Σ tokens / the tier's duration) is not split: the categories share one tier's duration,
  so its split would restate the mix, not the category's speed;
- each speedup's paired interval over rounds: the same ratio per round (round r of the
  variant against round r of the baseline, side by side in time), their geometric mean and
  95 % Student-t interval on the log scale (``profiling/report/paired.py``'s definition),
  stated from :data:`~trtbench.profiling.loadtest.workload.repeats.MIN_ROUNDS` rounds on;
- per-position acceptance rates and the accepted-drafts histogram
  (:func:`category_acceptance_table`, ``loadtest/category_acceptance.csv``): acceptance.csv's
  long format with a ``category`` column.

The per-category rows live in their own files rather than as extra rows of summary.csv and
acceptance.csv, so that those keep one row per (variant, tier) or (variant, tier, kind,
position) and nothing that sums or joins them counts a request twice.

A category's requests share the tier with the others, so its latency is measured under the
tier's whole mix; acceptance is a property of the text alone. Server-wide counters (vLLM's
Prometheus counters over a tier) cannot be split by request, so a category row has
acceptance only where the responses carry the counts (``spec_decode_counts_source``).
Requests outside the measurement window (``loadtest.warmup_s``) are left out, as in the
summary.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from trtbench.core.export import Column
from trtbench.profiling.loadtest.records.outcome import TIER_COMPLETE
from trtbench.profiling.loadtest.stats.acceptance import (
    ACCEPTANCE_SCHEMA,
    ACCEPTANCE_SUMMARY_COLUMNS,
    acceptance_summary,
    acceptance_table,
)
from trtbench.profiling.loadtest.stats.metrics import TierStatuses, request_metrics
from trtbench.profiling.loadtest.workload.repeats import MIN_ROUNDS, log_t_interval

KEYS = ["variant", "tier", "category"]
ACCEPTANCE_FIGURES = (
    "acceptance_length_tokens",
    "draft_acceptance_rate_ratio",
    "accepted_drafts_per_step_tokens",
    "proposed_draft_tokens_count",
    "accepted_draft_tokens_count",
    "spec_decode_counts_source",
)
CATEGORY_SCHEMA: tuple[Column, ...] = (
    Column("variant", "served variant"),
    Column("tier", "tier label (c4 = concurrency 4, r2.5 = 2.5 requests/s)"),
    Column(
        "concurrency", "closed-loop concurrency of the tier (empty in rate mode)", False
    ),
    Column(
        "request_rate_per_s",
        "target request rate of the tier (empty in concurrency mode)",
        False,
    ),
    Column("category", "the prompts' category (requests.csv category)", kind="str"),
    Column(
        "tier_status",
        "the tier's status (summary.csv tier_status): figures of a tier that is not "
        "complete are from the requests that finished, marked as such in the report",
    ),
    Column("requests_count", "successful requests of this category in the window"),
    *(c for c in ACCEPTANCE_SUMMARY_COLUMNS if c.name in ACCEPTANCE_FIGURES),
    Column(
        "time_per_output_token_p50_ms",
        "median per-request TPOT of the category's requests",
        False,
    ),
    Column(
        "tpot_speedup_p50_ratio",
        "the baseline's TPOT p50 / this variant's, same tier and category; empty for the "
        "baseline or without one",
        False,
    ),
    Column(
        "tpot_speedup_paired_ratio",
        "geometric mean over rounds of the per-round TPOT p50 ratio (baseline / variant, "
        "same round, tier and category); empty with fewer than 3 paired rounds",
        False,
    ),
    Column("tpot_speedup_ci95_low_ratio", "its 95 % interval, low end", False),
    Column("tpot_speedup_ci95_high_ratio", "its 95 % interval, high end", False),
    Column(
        "request_output_throughput_p50_tokens_per_s",
        "median over the category's requests of output tokens / end-to-end latency (TTFT "
        "included)",
        False,
    ),
    Column(
        "request_throughput_speedup_p50_ratio",
        "this variant's request output throughput p50 / the baseline's, same tier and "
        "category; empty for the baseline or without one",
        False,
    ),
    Column(
        "request_throughput_speedup_paired_ratio",
        "geometric mean over rounds of the per-round ratio (variant / baseline, same "
        "round, tier and category); empty with fewer than 3 paired rounds",
        False,
    ),
    Column(
        "request_throughput_speedup_ci95_low_ratio", "its 95 % interval, low end", False
    ),
    Column(
        "request_throughput_speedup_ci95_high_ratio",
        "its 95 % interval, high end",
        False,
    ),
    Column(
        "paired_rounds_count", "rounds with both this variant and the baseline", False
    ),
)
"""Columns of ``loadtest/categories.csv`` (docs/csv_schemas.md)."""

CATEGORY_ACCEPTANCE_SCHEMA: tuple[Column, ...] = (
    *ACCEPTANCE_SCHEMA[:2],
    Column("category", "the prompts' category (requests.csv category)", kind="str"),
    *ACCEPTANCE_SCHEMA[2:],
)
"""Columns of ``loadtest/category_acceptance.csv``: acceptance.csv's, per category."""

TPOT, THROUGHPUT = "tpot", "request_throughput"
SPEEDUPS = {
    # speedup prefix → (per-request column, p50 column, True: higher is better)
    TPOT: ("time_per_output_token_ms", "time_per_output_token_p50_ms", False),
    THROUGHPUT: (
        "request_output_throughput_tokens_per_s",
        "request_output_throughput_p50_tokens_per_s",
        True,
    ),
}


def category_table(
    requests: pd.DataFrame,
    responses: pd.DataFrame,
    baseline: str | None,
    in_window: pd.Series | None = None,
    statuses: TierStatuses | None = None,
) -> pd.DataFrame:
    """One row per (variant, tier, category) of the requests that carry a category.

    Args:
        requests: RequestRecord rows (requests.csv), with a ``category`` column.
        responses: ResponseRecord rows of the same requests.
        baseline: the baseline variant's name (None: no speedup column values).
        in_window: per request, whether it counts (``loadtest.warmup_s``); None: all.
        statuses: (variant, tier) → (tier_status, reason), as summary.csv's; a tier not
            listed is ``complete``.

    Returns:
        :data:`CATEGORY_SCHEMA` columns; empty (no rows) when no request has a category.
    """
    names = [c.name for c in CATEGORY_SCHEMA]
    req = _categorized(requests, in_window)
    if req.empty:
        return pd.DataFrame(columns=names)
    tiers = req.drop_duplicates(["variant", "tier"]).set_index(["variant", "tier"])
    rows, rounds = [], []
    for category, part in req.groupby("category", sort=True):
        resp = responses[responses["request_id"].isin(set(part["request_id"]))]
        accept = acceptance_summary(part, resp).set_index(["variant", "tier"])
        # files from before the repeat column read as one pass (pass 0)
        passes = (
            pd.to_numeric(part["repeat"], errors="coerce").fillna(0)
            if "repeat" in part
            else 0
        )
        per_request = _per_request(part, resp, passes)
        measured = [m for m, _, _ in SPEEDUPS.values()]
        rounds.append(
            per_request.groupby(["variant", "tier", "repeat"], sort=False)[measured]
            .median()
            .reset_index()
            .assign(category=category)
        )
        grouped = per_request.groupby(["variant", "tier"], sort=False)
        medians = grouped[measured].median()
        for key, count in grouped.size().items():
            row = {"variant": key[0], "tier": key[1], "category": category}
            row["tier_status"] = (statuses or {}).get(key, (TIER_COMPLETE, ""))[0]
            row["concurrency"] = tiers.loc[key, "concurrency"]
            row["request_rate_per_s"] = tiers.loc[key, "request_rate_per_s"]
            row["requests_count"] = int(count)
            row.update({p50: medians.loc[key, m] for m, p50, _ in SPEEDUPS.values()})
            if key in accept.index:
                row.update({k: accept.loc[key, k] for k in ACCEPTANCE_FIGURES})
            rows.append(row)
    table = pd.DataFrame(rows).reindex(columns=names)
    return _with_paired(_with_speedups(table, baseline), pd.concat(rounds), baseline)


def _categorized(requests: pd.DataFrame, in_window: pd.Series | None) -> pd.DataFrame:
    """The requests in the window that carry a category (as text); empty when none."""
    if requests.empty or "category" not in requests:
        return requests.iloc[0:0].assign(category=pd.Series(dtype=str))
    req = requests if in_window is None else requests[in_window.to_numpy(dtype=bool)]
    req = req[req["category"].notna() & (req["category"].astype(str) != "")]
    return req.assign(category=req["category"].astype(str))


def _per_request(
    part: pd.DataFrame, responses: pd.DataFrame, passes: pd.Series | int
) -> pd.DataFrame:
    """Per request of ``part``: TPOT, output tokens / E2E latency and its pass (round)."""
    metrics = request_metrics(part, responses)
    e2e_s = metrics["request_latency_ms"] / 1e3
    metrics["request_output_throughput_tokens_per_s"] = metrics[
        "output_sequence_length_tokens"
    ] / e2e_s.where(e2e_s > 0)
    return metrics.merge(
        part[["request_id"]].assign(repeat=passes), on="request_id", how="left"
    )


def _ratio(mine: pd.Series, base: pd.Series, higher: bool) -> pd.Series:
    """variant / baseline where higher is better, else baseline / variant."""
    mine, base = mine.astype(float), base.astype(float)
    return mine / base if higher else base / mine


def _with_speedups(table: pd.DataFrame, baseline: str | None) -> pd.DataFrame:
    if baseline is None or table.empty:
        return table
    base = table[table["variant"] == baseline].set_index(["tier", "category"])
    pairs = pd.Series(
        list(zip(table["tier"], table["category"], strict=True)), index=table.index
    )
    out = table.copy()
    for prefix, (_, p50, higher) in SPEEDUPS.items():
        ratio = _ratio(table[p50], pairs.map(base[p50]), higher)
        out[f"{prefix}_speedup_p50_ratio"] = ratio.where(
            (table["variant"] != baseline) & (ratio > 0) & np.isfinite(ratio)
        )
    return out


def _with_paired(
    table: pd.DataFrame, rounds: pd.DataFrame, baseline: str | None
) -> pd.DataFrame:
    """Add each speedup paired over rounds (module docstring) to each non-baseline row;
    ``paired_rounds_count`` counts the rounds with a TPOT ratio."""
    if baseline is None or table.empty:
        return table
    keys = ["tier", "category", "repeat"]
    base = rounds[rounds["variant"] == baseline].set_index(keys)
    out = table.copy()
    for i, row in out.iterrows():
        if row["variant"] == baseline:
            continue
        mine = rounds[
            (rounds["variant"] == row["variant"])
            & (rounds["tier"] == row["tier"])
            & (rounds["category"] == row["category"])
        ].set_index(keys)
        both = base.reindex(mine.index)
        for prefix, (measured, _, higher) in SPEEDUPS.items():
            ratios = _ratio(mine[measured], both[measured], higher)
            mean, low, high, n = log_t_interval(ratios.to_numpy(dtype=float))
            if prefix == TPOT:
                out.loc[i, "paired_rounds_count"] = n
            if n >= MIN_ROUNDS and np.isfinite(low):
                out.loc[i, f"{prefix}_speedup_paired_ratio"] = mean
                out.loc[i, f"{prefix}_speedup_ci95_low_ratio"] = low
                out.loc[i, f"{prefix}_speedup_ci95_high_ratio"] = high
    return out


def category_acceptance_table(
    requests: pd.DataFrame,
    responses: pd.DataFrame,
    in_window: pd.Series | None = None,
) -> pd.DataFrame:
    """``loadtest/category_acceptance.csv``: acceptance.csv's per-position rates and
    histogram (:func:`~trtbench.profiling.loadtest.stats.acceptance.acceptance_table`), per
    prompt category.

    Args:
        requests: RequestRecord rows with a ``category`` column.
        responses: their ResponseRecord rows (per-step counts).
        in_window: per request, whether it counts (``loadtest.warmup_s``); None: all.

    Returns:
        :data:`CATEGORY_ACCEPTANCE_SCHEMA` columns, categories in name order; empty (no
        rows) when no request has a category or no tier has per-step counts.
    """
    names = [c.name for c in CATEGORY_ACCEPTANCE_SCHEMA]
    req = _categorized(requests, in_window)
    parts = [
        acceptance_table(
            part, responses[responses["request_id"].isin(part["request_id"])]
        ).assign(category=str(category))
        for category, part in req.groupby("category", sort=True)
    ]
    parts = [p for p in parts if len(p)]
    return (
        pd.concat(parts, ignore_index=True)[names]
        if parts
        else pd.DataFrame(columns=names)
    )
