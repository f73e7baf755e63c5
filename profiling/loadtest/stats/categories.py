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
- its paired interval over rounds: the same ratio per round (round r of the variant against
  round r of the baseline, side by side in time), their geometric mean and 95 % Student-t
  interval on the log scale (``profiling/report/paired.py``'s definition), stated from
  :data:`~trtbench.profiling.loadtest.workload.repeats.MIN_ROUNDS` rounds on.

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
    ACCEPTANCE_SUMMARY_COLUMNS,
    acceptance_summary,
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
        "paired_rounds_count", "rounds with both this variant and the baseline", False
    ),
)
"""Columns of ``loadtest/categories.csv`` (docs/csv_schemas.md)."""


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
    if requests.empty or "category" not in requests:
        return pd.DataFrame(columns=names)
    req = requests if in_window is None else requests[in_window.to_numpy(dtype=bool)]
    req = req[req["category"].notna() & (req["category"].astype(str) != "")]
    if req.empty:
        return pd.DataFrame(columns=names)
    req = req.assign(category=req["category"].astype(str))
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
        per_request = request_metrics(part, resp).merge(
            part[["request_id"]].assign(repeat=passes),
            on="request_id",
            how="left",
        )
        rounds.append(
            per_request.groupby(["variant", "tier", "repeat"], sort=False)[
                "time_per_output_token_ms"
            ]
            .median()
            .rename("p50")
            .reset_index()
            .assign(category=category)
        )
        tpot = per_request.groupby(["variant", "tier"], sort=False)[
            "time_per_output_token_ms"
        ].agg(["median", "size"])
        for key, (p50, count) in tpot.iterrows():
            row = {"variant": key[0], "tier": key[1], "category": category}
            row["tier_status"] = (statuses or {}).get(key, (TIER_COMPLETE, ""))[0]
            row["concurrency"] = tiers.loc[key, "concurrency"]
            row["request_rate_per_s"] = tiers.loc[key, "request_rate_per_s"]
            row["requests_count"] = int(count)
            row["time_per_output_token_p50_ms"] = p50
            if key in accept.index:
                row.update({k: accept.loc[key, k] for k in ACCEPTANCE_FIGURES})
            rows.append(row)
    table = pd.DataFrame(rows).reindex(columns=names)
    return _with_paired(_with_speedups(table, baseline), pd.concat(rounds), baseline)


def _with_speedups(table: pd.DataFrame, baseline: str | None) -> pd.DataFrame:
    if baseline is None or table.empty:
        return table
    base = table[table["variant"] == baseline].set_index(["tier", "category"])
    ref = pd.Series(
        list(zip(table["tier"], table["category"], strict=True)), index=table.index
    ).map(base["time_per_output_token_p50_ms"])
    ratio = ref.astype(float) / table["time_per_output_token_p50_ms"].astype(float)
    speedup = ratio.where(
        (table["variant"] != baseline) & (ratio > 0) & np.isfinite(ratio)
    )
    return table.assign(tpot_speedup_p50_ratio=speedup)


def _with_paired(
    table: pd.DataFrame, rounds: pd.DataFrame, baseline: str | None
) -> pd.DataFrame:
    """Add the paired speedup over rounds (module docstring) to each non-baseline row."""
    if baseline is None or table.empty:
        return table
    keys = ["tier", "category", "repeat"]
    base = rounds[rounds["variant"] == baseline].set_index(keys)["p50"]
    out = table.copy()
    for i, row in out.iterrows():
        if row["variant"] == baseline:
            continue
        mine = rounds[
            (rounds["variant"] == row["variant"])
            & (rounds["tier"] == row["tier"])
            & (rounds["category"] == row["category"])
        ].set_index(keys)["p50"]
        both = base.reindex(mine.index)
        ratios = (both / mine).to_numpy(dtype=float)
        mean, low, high, n = log_t_interval(ratios)
        out.loc[i, "paired_rounds_count"] = n
        if n >= MIN_ROUNDS and np.isfinite(low):
            out.loc[i, "tpot_speedup_paired_ratio"] = mean
            out.loc[i, "tpot_speedup_ci95_low_ratio"] = low
            out.loc[i, "tpot_speedup_ci95_high_ratio"] = high
    return out
