"""The "KV cache and queueing" section of ``report.md`` (pure: a frame in, Markdown lines out).

Input: :func:`trtbench.profiling.memory.kv_pressure.kv_pressure` of the run's
``server_metrics.csv`` (per variant × tier × model; its docstring has the definitions and
sources). Per variant: the largest closed-loop concurrency served without queueing
(:func:`~trtbench.profiling.memory.kv_pressure.largest_unqueued_concurrency`), the KV pool
and the most blocks used, the share of KV block-steps spent on speculation (the smallest and
largest over its tiers: the share is a per-tier ratio of counter deltas) and the KV waits and
preemptions summed over tiers; then the per-tier figures.
"""

from __future__ import annotations

import pandas as pd

from trtbench.profiling.memory.kv_pressure import largest_unqueued_concurrency
from trtbench.profiling.report.markdown import fmt_num, fmt_text, markdown_table

HEADING = "## KV cache and queueing"
INTRO = (
    "From the server's KV-block and request gauges (`server_metrics.csv`, per tier). "
    "'served without queueing up to C': the largest closed-loop tier with no more requests "
    "than batch slots and no request that waited for KV blocks or was preempted (without "
    "the reference engine's counters: no `waiting` reading above 0). 'speculation share': "
    "of the KV blocks held summed over decode steps, the share held only to verify draft "
    "tokens / tree nodes (Δ`speculative_block_steps` / Δ`block_steps`), smallest–largest "
    "over the variant's tiers."
)


def _pct(v: object) -> str:
    return "-" if pd.isna(v) else f"{100 * float(v):.1f} %"


def _share_range(shares: pd.Series) -> str:
    """``"3.1 %–5.8 %"`` (one figure when equal); ``-`` when no tier has a share."""
    shares = shares.dropna()
    if shares.empty:
        return "-"
    low, high = _pct(shares.min()), _pct(shares.max())
    return low if low == high else f"{low}–{high}"


SUMMARY_TABLE = (
    ("variant", "variant", fmt_text),
    ("largest_unqueued_concurrency", "served without queueing up to C", fmt_num("g")),
    ("kv_max_blocks", "KV blocks (pool)", fmt_num("g")),
    ("max_kv_used_blocks", "most blocks used", fmt_num("g")),
    ("speculative_share_text", "speculation share of KV block-steps", fmt_text),
    ("kv_waits", "KV waits", fmt_num("g")),
    ("preemptions", "preemptions", fmt_num("g")),
)
TIER_TABLE = (
    ("variant", "variant", fmt_text),
    ("phase", "tier", fmt_text),
    ("max_kv_used_blocks", "most blocks used", fmt_num("g")),
    ("kv_max_blocks", "of", fmt_num("g")),
    ("max_active_requests", "most active", fmt_num("g")),
    ("max_waiting_requests", "most waiting", fmt_num("g")),
    ("kv_waits", "KV waits", fmt_num("g")),
    ("preemptions", "preemptions", fmt_num("g")),
    ("draft_skipped_for_kv", "drafts skipped for KV", fmt_num("g")),
    ("speculative_share_text", "speculation share", fmt_text),
)


def kv_summary(table: pd.DataFrame) -> pd.DataFrame:
    """One row per variant (in the order of ``table``) with the columns of
    :data:`SUMMARY_TABLE`; ``table`` is :func:`~trtbench.profiling.memory.kv_pressure.
    kv_pressure` output (non-empty). Counter sums are NaN when no tier has the counter."""
    by = table.groupby("variant", sort=False)
    out = pd.DataFrame(
        {
            "kv_max_blocks": by["kv_max_blocks"].max(),
            "max_kv_used_blocks": by["max_kv_used_blocks"].max(),
            "speculative_share_text": by["speculative_block_share"].agg(_share_range),
            "kv_waits": by["kv_waits"].sum(min_count=1),
            "preemptions": by["preemptions"].sum(min_count=1),
        }
    )
    out["largest_unqueued_concurrency"] = largest_unqueued_concurrency(table)
    return out.rename_axis("variant").reset_index()


def kv_lines(table: pd.DataFrame | None) -> list[str]:
    """Markdown lines of the section (heading included); ``[]`` when ``table`` is None or
    empty (the server published no KV / request gauges)."""
    if table is None or table.empty:
        return []
    tiers = table.assign(
        speculative_share_text=table["speculative_block_share"].map(_pct)
    )
    return [
        HEADING,
        "",
        INTRO,
        "",
        markdown_table(kv_summary(table), SUMMARY_TABLE),
        "",
        markdown_table(tiers, TIER_TABLE),
    ]
