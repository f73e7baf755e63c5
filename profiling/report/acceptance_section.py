"""The "Speculative acceptance" section of ``report.md`` (pure: frames in, Markdown lines out).

Per speculative variant, one row per tier: the pooled figures of ``summary.csv`` (acceptance
length, draft acceptance rate, verify steps, where the counts came from) and the acceptance
rate at each draft position from ``loadtest/acceptance.csv``
(:mod:`trtbench.profiling.loadtest.stats.acceptance` has the definitions and sources).
"""

from __future__ import annotations

import pandas as pd

from trtbench.profiling.loadtest.stats.acceptance import POSITION, TOTALS
from trtbench.profiling.report.markdown import fmt_num, fmt_text, markdown_table

MAX_POSITIONS = 12
INTRO = (
    "Acceptance length = 1 + accepted drafts / verify steps and draft acceptance rate = "
    "accepted / proposed, pooled over the tier's verify steps (vLLM `bench serve` "
    "acceptance length and rate). Position j = steps that accepted ≥ j drafts / steps that "
    "proposed ≥ j (vLLM's per-position acceptance). A step cut by max_tokens or the end "
    "token counts the drafts verification accepted. Medusa proposes every tree node, so "
    "positions beyond the tree depth read 0. `loadtest/acceptance.csv` also holds the "
    "histogram of drafts accepted per step."
)
SUMMARY_NAMES = (
    "acceptance_length_tokens",
    "draft_acceptance_rate_ratio",
    "verify_steps_count",
    "spec_decode_counts_source",
)
BASE_TABLE = (
    ("tier", "tier", fmt_text),
    ("acceptance_length_tokens", "acceptance length", fmt_num(".2f")),
    ("draft_acceptance_rate_ratio", "draft acceptance rate", fmt_num(".3f")),
    ("verify_steps_count", "verify steps", fmt_num("g")),
    ("spec_decode_counts_source", "source", fmt_text),
)


def shown_positions(positions: pd.DataFrame) -> int:
    """Positions to show: up to one past the last with an accepted draft, at most 12."""
    hit = positions.loc[positions["hits_count"] > 0, "draft_position"]
    last = int(hit.max()) + 1 if len(hit) else 1
    return min(last, int(positions["draft_position"].max()), MAX_POSITIONS)


def variant_table(
    variant: str, summary: pd.DataFrame, acceptance: pd.DataFrame | None
) -> tuple[str, list[str]]:
    """Markdown table of one variant (one row per tier) and notes on what it lacks."""
    rows = summary[summary["variant"] == variant].copy()
    positions = pd.DataFrame(columns=["tier", "draft_position", "hits_count"])
    if acceptance is not None and len(acceptance):
        mine = acceptance[
            (acceptance["variant"] == variant) & (acceptance["kind"] == POSITION)
        ]
        positions = mine.astype({"draft_position": int})
    columns = list(BASE_TABLE)
    shown = shown_positions(positions) if len(positions) else 0
    if shown:
        rates = positions.pivot_table(
            index="tier",
            columns="draft_position",
            values="value_ratio",
            aggfunc="first",
        )
        for j in range(1, shown + 1):
            rows[f"pos{j}"] = rows["tier"].map(rates[j]) if j in rates else None
            columns.append((f"pos{j}", f"j={j}", fmt_num(".3f")))
    notes = []
    k = int(positions["draft_position"].max()) if len(positions) else 0
    if shown and shown < k:
        notes.append(
            f"`{variant}`: positions {shown + 1}..{k} are not shown (rate 0 or beyond "
            "the table's width); see loadtest/acceptance.csv."
        )
    totals = rows[rows["spec_decode_counts_source"] == TOTALS]
    if len(totals):
        tiers = ", ".join(totals["tier"].astype(str))
        notes.append(
            f"`{variant}` {tiers}: the server reports request totals only, so per-position "
            "rates and the histogram are not available."
        )
    return markdown_table(rows, columns), notes


def acceptance_lines(
    acceptance: pd.DataFrame | None, summary: pd.DataFrame
) -> list[str]:
    """Markdown lines of the "Speculative acceptance" section (heading included); none
    when no variant of the run reports draft counts.

    Args:
        acceptance: loadtest/acceptance.csv rows (None: the file is absent).
        summary: summary.csv rows (the pooled columns; absent in older files).
    """
    if any(name not in summary.columns for name in SUMMARY_NAMES):
        return []
    source = summary["spec_decode_counts_source"].fillna("").astype(str)
    variants = list(dict.fromkeys(summary.loc[source != "", "variant"].astype(str)))
    if not variants:
        return []
    summary = summary.assign(spec_decode_counts_source=source)
    lines = ["## Speculative acceptance", "", INTRO, ""]
    notes: list[str] = []
    for variant in variants:
        table, more = variant_table(variant, summary, acceptance)
        lines += [f"### `{variant}`", "", table, ""]
        notes += more
    lines += [f"- {n}" for n in notes]
    return lines
