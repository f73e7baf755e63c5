"""The "By prompt category" section of ``report.md`` (pure: frames in, Markdown lines out).

From ``loadtest/categories.csv`` (:mod:`trtbench.profiling.loadtest.stats.categories` has the
definitions): per tier, a method × category table of acceptance length, TPOT speedup and
request throughput speedup over the baseline, the winner of each category (the highest TPOT
speedup above 1; none: the baseline), a sentence when the winner differs by category, since
that is when one method for all traffic is the wrong answer, and, from
``loadtest/category_acceptance.csv``, the acceptance rate at each draft position per category.
"""

from __future__ import annotations

import math

import pandas as pd

from trtbench.profiling.loadtest.records.outcome import TIER_COMPLETE
from trtbench.profiling.report.acceptance_section import shown_positions
from trtbench.profiling.report.markdown import fmt_text, markdown_table

INTRO = (
    "Each tier's requests split by their prompt's category (`loadtest.datasets`): "
    "acceptance length pooled over the category's requests, and TPOT speedup = the "
    "baseline's TPOT p50 / the variant's for the same category and tier. A category's "
    "latency is measured within the tier's whole mix; its acceptance depends on its text "
    "alone. Cells read `acceptance length · TPOT speedup× · request throughput speedup×` "
    "(request throughput = output tokens / end-to-end latency, TTFT included; variant / "
    "baseline), the TPOT speedup with its 95 % interval paired over rounds `[low, high]` "
    "where the run has 3 rounds or more (categories.csv has the throughput's). The winner "
    "row is by the TPOT speedup's point "
    "value; `(n.s.)` marks a winner whose interval reaches down to 1 (not significantly "
    "faster than the baseline for that category)."
)


def _cell(row: pd.Series | None) -> str:
    if row is None:
        return "—"
    length, speedup = (
        row.get("acceptance_length_tokens"),
        row.get("tpot_speedup_p50_ratio"),
    )
    shown = [
        f"{length:.2f}" if _finite(length) else "—",
        f"{speedup:.2f}×" if _finite(speedup) else "—",
    ]
    low, high = (
        row.get("tpot_speedup_ci95_low_ratio"),
        row.get("tpot_speedup_ci95_high_ratio"),
    )
    if _finite(low) and _finite(high):
        shown[-1] += f" [{low:.2f}, {high:.2f}]"
    throughput = row.get("request_throughput_speedup_p50_ratio")
    if _finite(throughput):
        shown.append(f"{throughput:.2f}×")
    status = row.get("tier_status")
    if isinstance(status, str) and status != TIER_COMPLETE:
        shown[-1] += f" ({status})"
    return " · ".join(shown)


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def _winner(indexed: pd.DataFrame, variant: str | None, category: str) -> str:
    """The winner cell: the variant, marked ``(n.s.)`` when its paired interval reaches
    down to 1 (not significantly faster than the baseline for that category)."""
    if variant is None:
        return "baseline"
    low = indexed.loc[(variant, category)].get("tpot_speedup_ci95_low_ratio")
    unsure = _finite(low) and low <= 1
    return f"`{variant}`" + (" (n.s.)" if unsure else "")


def complete_rows(tier: pd.DataFrame, baseline: str | None) -> pd.DataFrame:
    """The rows of one tier a winner may come from: those of complete tiers, and none when
    the baseline's tier is not complete (every speedup there rests on part of a tier).
    Files from before the ``tier_status`` column read as complete."""
    status = (
        tier["tier_status"].fillna(TIER_COMPLETE).astype(str)
        if "tier_status" in tier
        else pd.Series(TIER_COMPLETE, index=tier.index)
    )
    done = status == TIER_COMPLETE
    if baseline is not None and not done[tier["variant"] == baseline].all():
        return tier.iloc[0:0]
    return tier[done]


def winners(tier: pd.DataFrame) -> dict[str, str | None]:
    """category → the variant with the highest TPOT speedup above 1 at this tier (None:
    nothing beats the baseline there)."""
    out: dict[str, str | None] = {}
    for category, part in tier.groupby("category", sort=True):
        speedup = pd.to_numeric(part["tpot_speedup_p50_ratio"], errors="coerce")
        best = speedup.idxmax() if speedup.notna().any() else None
        out[str(category)] = (
            str(part.loc[best, "variant"])
            if best is not None and speedup[best] > 1
            else None
        )
    return out


def by_tier(categories: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """(tier, its rows), tiers by concurrency then request rate (the order of the file's
    rows follows the rounds' shuffled cells); tier and category as text."""
    categories = categories.assign(
        tier=categories["tier"].astype(str), category=categories["category"].astype(str)
    )
    load = pd.to_numeric(categories["concurrency"], errors="coerce").fillna(
        pd.to_numeric(categories["request_rate_per_s"], errors="coerce")
    )
    order = load.groupby(categories["tier"]).min().sort_values(kind="stable")
    parts = dict(tuple(categories.groupby("tier", sort=False)))
    return [(tier, parts[tier]) for tier in order.index]


POSITIONS_INTRO = (
    "Acceptance rate at each draft position j = 1..K per category "
    "(`loadtest/category_acceptance.csv`: of the verify steps that proposed ≥ j drafts, the "
    "share that accepted ≥ j; vLLM's per-position acceptance rate), under each tier."
)


def position_lines(rates: pd.DataFrame | None, tier: str) -> list[str]:
    """A variant × category table of one tier's per-position acceptance rates (none when
    the tier has no per-position rows)."""
    if rates is None or rates.empty:
        return []
    part = rates[(rates["tier"].astype(str) == tier) & (rates["kind"] == "position")]
    if part.empty:
        return []
    cats = sorted(part["category"].astype(str).unique())
    part = part.astype({"draft_position": int})
    shown = {  # per variant: up to one past its last position with an accepted draft
        str(v): shown_positions(g) for v, g in part.groupby("variant", sort=False)
    }
    cells = {
        (str(v), str(c)): " / ".join(
            f"{x:.2f}"
            for x in g[g["draft_position"] <= shown[str(v)]].sort_values(
                "draft_position"
            )["value_ratio"]
        )
        for (v, c), g in part.groupby(["variant", "category"], sort=False)
    }
    variants = list(dict.fromkeys(part["variant"].astype(str)))
    cut = [
        v
        for v in variants
        if shown[v] < part[part["variant"] == v]["draft_position"].max()
    ]
    table = pd.DataFrame(
        [[f"`{v}`", *(cells.get((v, c), "—") for c in cats)] for v in variants],
        columns=["variant", *cats],
    )
    header = ["variant", *cats]
    note = (
        [
            f"Positions after the last with an accepted draft (rate 0, or beyond a tree's "
            f"depth) are left out for {', '.join(f'`{v}`' for v in cut)}; "
            "`loadtest/category_acceptance.csv` has them all.",
            "",
        ]
        if cut
        else []
    )
    return [
        f"Acceptance rate by draft position at {tier} (j = 1 / 2 / …):",
        "",
        markdown_table(table, [(h, h, fmt_text) for h in header]),
        "",
        *note,
    ]


def category_lines(
    categories: pd.DataFrame | None,
    baseline: str | None,
    rates: pd.DataFrame | None = None,
) -> list[str]:
    """Markdown lines of the section (heading included); none without category rows.

    Args:
        categories: loadtest/categories.csv rows (None: the file is absent).
        baseline: the run's baseline variant (its row is the reference, not a method).
        rates: loadtest/category_acceptance.csv rows (None: absent; no position tables).
    """
    if categories is None or categories.empty:
        return []
    lines = ["## By prompt category", "", INTRO, ""]
    if rates is not None and (rates["kind"] == "position").any():
        lines += [POSITIONS_INTRO, ""]
    cats = sorted(categories["category"].astype(str).unique())
    for tier, part in by_tier(categories):
        methods = [
            v for v in dict.fromkeys(part["variant"].astype(str)) if v != baseline
        ]
        indexed = part.set_index(["variant", "category"])
        rows = [
            [f"`{v}`"]
            + [
                _cell(indexed.loc[(v, c)] if (v, c) in indexed.index else None)
                for c in cats
            ]
            for v in methods
        ]
        usable = complete_rows(part, baseline)
        best = winners(usable) if len(usable) else None
        rows.append(
            ["winner"]
            + [
                _winner(indexed, best.get(c), c) if best else "— (tier not complete)"
                for c in cats
            ]
        )
        header = ["variant", *cats]
        table = markdown_table(
            pd.DataFrame(rows, columns=header), [(h, h, fmt_text) for h in header]
        )
        lines += [f"### {tier}", "", table, ""]
        chosen = {c: (best or {}).get(c) or "the baseline" for c in cats}
        if best and len(set(chosen.values())) > 1:
            each = "; ".join(f"{c}: {w}" for c, w in chosen.items())
            lines += [f"- The winner differs by category at {tier}: {each}.", ""]
        lines += position_lines(rates, tier)
    return lines


def category_mix(categories: pd.DataFrame, baseline: str | None) -> dict[str, float]:
    """category → its share of the requests one variant served (the baseline's, else the
    first variant's), over every tier: the traffic mix a recommendation was made for."""
    variant = (
        baseline
        if baseline in set(categories["variant"])
        else categories["variant"].iloc[0]
    )
    counts = (
        categories[categories["variant"] == variant]
        .groupby(categories["category"].astype(str))["requests_count"]
        .sum()
        .astype(float)
    )
    total = counts.sum()
    return {str(c): n / total for c, n in counts.items()} if total > 0 else {}


def category_advice(
    categories: pd.DataFrame | None, baseline: str | None
) -> tuple[list[str], dict | None]:
    """The recommendation's lines about prompt categories and their JSON (None, [] when the
    prompts had no categories): the mix it was made for, each tier's winner per category
    (complete tiers only: :func:`complete_rows`), and whether the winner differs by
    category anywhere."""
    if categories is None or categories.empty:
        return [], None
    mix = category_mix(categories, baseline)
    shown = ", ".join(f"{c} {share:.0%}" for c, share in mix.items())
    lines = [f"Made for this mix of prompt categories: {shown} (`loadtest.datasets`)."]
    per_tier = {
        tier: winners(usable)
        for tier, part in by_tier(categories)
        if len(usable := complete_rows(part, baseline))
    }
    differs = {t: w for t, w in per_tier.items() if len(set(w.values())) > 1}
    if differs:
        each = "; ".join(
            f"{t}: "
            + ", ".join(
                f"{c} → `{v}`" if v else f"{c} → baseline" for c, v in w.items()
            )
            for t, w in differs.items()
        )
        lines.append(
            f"The best method differs by category, by the TPOT speedup's point value ({each}): "
            "traffic that can be routed by "
            "category is better served by each category's choice (section \"By prompt "
            'category").'
        )
    document = {"mix": mix, "winners": per_tier, "differs": bool(differs)}
    return lines, document
