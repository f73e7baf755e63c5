"""The interactive figures of report.html (Plotly figures from the report's own frames; no
analysis happens here).

Each figure draws one trace per variant (the rounds: per variant and tier, grouped by
variant), so the legend toggles a variant; hover shows the figure, its interval and the
tier; the static PNGs (:mod:`plots`) show the same frames. The figure keys match the PNG
stems they stand for (``speedup``, ``ttft``, ``tpot``, ``throughput``, ``acceptance``);
``positions``, ``categories``, ``memory_time`` (:mod:`page_memory`) and ``rounds`` have no
PNG. Each figure names the unit of its y axis and the heading of docs/metrics.md that
defines it (the page links there).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from trtbench.core import methods
from trtbench.profiling.report.plots import variant_colors

INTERFERENCE_COLOR = "#111111"
"""The outline of a round measured while other processes used the host (black: tab10,
the variants' colours, has red)."""


LATENCY = "Latency (per request, `loadtest/requests.csv` and `summary.csv`)"
THROUGHPUT = "Throughput and goodput (per tier, `summary.csv`)"
SPECULATIVE = "Speculative decoding (`summary.csv` and `loadtest/acceptance.csv`)"
CATEGORIES = "Acceptance per prompt category (`loadtest/categories.csv`)"
STATISTICS = "Statistics a reader can trust (`summary.csv`)"
"""The headings of docs/metrics.md that define the figures (the page links to each)."""


@dataclass(frozen=True)
class PageFigure:
    """One interactive figure: ``key`` (its id in the page, the PNG stem it replaces),
    ``caption``, the Plotly ``figure`` (one trace per variant), the ``unit`` of its y
    axis, ``definition`` (the heading of docs/metrics.md defining it; "": none) and a
    ``note`` shown under it (how it was drawn; "": none)."""

    key: str
    caption: str
    figure: go.Figure
    unit: str = ""
    definition: str = ""
    note: str = ""


Colors = Mapping[str, str] | None
"""Variant → colour, one map for every figure of a page (None: the figure's own)."""


def palette(names: Iterable[object], colors: Colors = None) -> dict[str, str]:
    """``colors`` where it names a variant, else the variant's colour among ``names``
    (:func:`~trtbench.profiling.report.plots.variant_colors`)."""
    return {**variant_colors([str(n) for n in names]), **(colors or {})}


def _num(frame: pd.DataFrame, column: str) -> np.ndarray:
    if column not in frame:
        return np.full(len(frame), np.nan)
    return pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=float)


def _x(tiers: pd.DataFrame) -> tuple[str, str]:
    """(column, axis title): concurrency when measured, else request rate (as the PNGs)."""
    if tiers["concurrency"].notna().any():
        return "concurrency", "concurrency (concurrent requests)"
    return "request_rate_per_s", "request rate (requests/s)"


def _interval_text(low: np.ndarray, high: np.ndarray) -> list[str]:
    return [
        "" if np.isnan(lo) or np.isnan(hi) else f" [{lo:.4g}, {hi:.4g}] (95 %)"
        for lo, hi in zip(low, high, strict=True)
    ]


def layout(fig: go.Figure, title: str, xtitle: str, ytitle: str) -> go.Figure:
    """``fig`` with the page's look: title, axis titles, plain template, 420 px high,
    hover on the nearest point, a legend that says a click hides a variant."""
    fig.update_layout(
        title=title,
        xaxis_title=xtitle,
        yaxis_title=ytitle,
        hovermode="closest",
        template="plotly_white",
        height=420,
        margin={"l": 60, "r": 20, "t": 50, "b": 50},
        legend_title_text="variant (click to hide)",
    )
    return fig


def vs_load(
    tiers: pd.DataFrame,
    column: str,
    key: str,
    ylabel: str,
    title: str,
    unit: str = "",
    definition: str = "",
    colors: Colors = None,
) -> PageFigure:
    """``column`` of the per-tier frame against concurrency: one line per variant holding
    a value, error bars over its 95 % interval (``<column>_ci95_low`` / ``_high``) where
    the frame has one; the bars are clipped at the point where it lies outside them, the
    hover gives the interval itself (``unit``, ``definition``: :class:`PageFigure`;
    ``colors``: :data:`Colors`)."""
    xcol, xtitle = _x(tiers)
    colors = palette(tiers["variant"].unique(), colors)
    fig = go.Figure()
    for variant, g in tiers.dropna(subset=[xcol]).sort_values(xcol).groupby("variant"):
        y = _num(g, column)
        if np.isnan(y).all():
            continue
        low, high = _num(g, f"{column}_ci95_low"), _num(g, f"{column}_ci95_high")
        bars = not (np.isnan(low).all() and np.isnan(high).all())
        fig.add_trace(
            go.Scatter(
                x=g[xcol],
                y=y,
                name=str(variant),
                mode="lines+markers",
                line={"color": colors[variant]},
                error_y={
                    "type": "data",
                    "array": np.nan_to_num(np.clip(high - y, 0, None)),
                    "arrayminus": np.nan_to_num(np.clip(y - low, 0, None)),
                    "visible": bars,
                },
                customdata=np.c_[g["tier"].astype(str), _interval_text(low, high)],
                hovertemplate=f"<b>{variant}</b> %{{customdata[0]}}<br>{ylabel}: "
                "%{y:.4g}%{customdata[1]}<extra></extra>",
            )
        )
    return PageFigure(key, title, layout(fig, title, xtitle, ylabel), unit, definition)


def speedup(
    tiers: pd.DataFrame, crossover: pd.DataFrame, ratio: str, colors: Colors = None
) -> PageFigure:
    """The objective's paired ratio over the baseline per speculative variant with its
    interval, on a log y axis; y = 1 and each crossover (``crossover_interpolated``) are
    lines, not traces (``colors``: :data:`Colors`)."""
    spec = tiers[~tiers["mode"].isin(methods.NON_DRAFTING)]
    title = f"Speedup: {ratio} over the baseline (below 1: speculation does not pay)"
    page = vs_load(
        spec,
        "speedup_ratio",
        "speedup",
        f"{ratio} (ratio)",
        title,
        "ratio",
        THROUGHPUT,
        colors,
    )
    fig = page.figure
    fig.update_yaxes(type="log")
    fig.add_hline(y=1.0, line_color="#555", line_width=1)
    colors = palette(tiers["variant"].unique(), colors)
    for _, row in crossover.iterrows():
        x = row["crossover_interpolated"]
        if pd.notna(x) and row["variant"] in colors:
            fig.add_vline(
                x=float(x),
                line_dash="dot",
                line_color=colors[row["variant"]],
                annotation_text=f"{row['variant']} crossover ≈ {x:.1f}",
                annotation_font_color=colors[row["variant"]],
            )
    return page


def positions(
    acceptance: pd.DataFrame | None, colors: Colors = None
) -> PageFigure | None:
    """Acceptance per draft position per variant, pooled over tiers (Σ hits / Σ steps of
    acceptance.csv's ``position`` rows); None when the run has none."""
    if acceptance is None or not len(acceptance):
        return None
    pos = acceptance[acceptance["kind"] == "position"].copy()
    if pos.empty:
        return None
    for col in ("draft_position", "steps_count", "hits_count"):
        pos[col] = pd.to_numeric(pos[col], errors="coerce")
    colors = palette(pos["variant"].unique(), colors)
    fig = go.Figure()
    for variant, g in pos.groupby("variant"):
        pooled = g.groupby("draft_position")[["hits_count", "steps_count"]].sum()
        rate = pooled["hits_count"] / pooled["steps_count"]
        fig.add_trace(
            go.Scatter(
                x=pooled.index,
                y=rate,
                name=str(variant),
                mode="lines+markers",
                line={"color": colors[variant]},
                customdata=np.c_[pooled["hits_count"], pooled["steps_count"]],
                hovertemplate=f"<b>{variant}</b> position %{{x}}<br>accepted "
                "%{y:.3f} (%{customdata[0]:.0f} of %{customdata[1]:.0f} steps)"
                "<extra></extra>",
            )
        )
    title = "Acceptance per draft position (all tiers pooled)"
    fig = layout(fig, title, "draft position", "accepted fraction of steps")
    fig.update_xaxes(dtick=1)
    return PageFigure("positions", title, fig, "ratio", SPECULATIVE)


def _tier_order(tier: str) -> tuple[float, str]:
    """c2 before c16: by the tier label's number, then by the label."""
    digits = re.findall(r"\d+(?:\.\d+)?", tier)
    return (float(digits[0]) if digits else float("inf"), tier)


def rounds(frame: pd.DataFrame | None, colors: Colors = None) -> PageFigure | None:
    """Each cell's output tok/s round by round (rounds.csv), one panel per tier and one
    trace per (variant, tier), a variant's traces toggled together from one legend entry;
    a round with ``interference_flag`` set is a black-ringed ×. Round r of each variant
    sits above the same x: the pairs each ratio is made of. None when the run has none."""
    if frame is None or not len(frame) or "output_tokens_per_s" not in frame:
        return None
    colors = palette(frame["variant"].unique(), colors)
    tiers = sorted(frame["tier"].astype(str).unique(), key=_tier_order)
    cols = min(len(tiers), 2)
    rows = -(-len(tiers) // cols)
    fig = make_subplots(
        rows=rows, cols=cols, subplot_titles=tiers, horizontal_spacing=0.08
    )
    shown: set[str] = set()
    for (variant, tier), g in frame.sort_values("round").groupby(["variant", "tier"]):
        flag = g.get("interference_flag", pd.Series(False, index=g.index))
        hit = flag.astype(str).str.lower().eq("true").to_numpy()
        share = _num(g, "host_other_cpu_share")
        at = tiers.index(str(tier))
        fig.add_trace(
            go.Scatter(
                x=_num(g, "round"),
                y=_num(g, "output_tokens_per_s"),
                name=str(variant),
                legendgroup=str(variant),
                showlegend=variant not in shown,
                mode="lines+markers",
                line={"color": colors[variant], "width": 1},
                marker={
                    "color": colors[variant],
                    "size": np.where(hit, 11, 8),
                    "symbol": np.where(hit, "x", "circle"),
                    "line": {
                        "color": np.where(hit, INTERFERENCE_COLOR, colors[variant]),
                        "width": np.where(hit, 2, 0),
                    },
                },
                customdata=np.c_[
                    _num(g, "start_s"),
                    np.where(hit, "yes", "no"),
                    [("" if np.isnan(s) else f"{s:.0%}") for s in share],
                ],
                hovertemplate=f"<b>{variant}</b> {tier} round %{{x}}<br>output tok/s: "
                "%{y:.4g}<br>started at %{customdata[0]:.1f} s<br>interference: "
                "%{customdata[1]} (other processes' host CPU share %{customdata[2]})"
                "<extra></extra>",
            ),
            row=at // cols + 1,
            col=at % cols + 1,
        )
        shown.add(variant)
    title = "Rounds: each cell's output tok/s, round by round (ringed ×: interference)"
    fig = layout(fig, title, "", "")
    fig.update_layout(height=max(420, 300 * rows), margin_t=90)
    fig.update_xaxes(dtick=1, title_text="round")
    fig.update_yaxes(title_text="output tok/s", col=1)
    return PageFigure("rounds", title, fig, "tokens/s", STATISTICS)


def categories(frame: pd.DataFrame | None, colors: Colors = None) -> PageFigure | None:
    """Acceptance length per prompt category and tier (categories.csv's
    ``acceptance_length_tokens`` of its complete rows, none pooled): bars grouped by
    category, then tier, one trace per variant holding a value; the hover adds the draft
    acceptance rate and the request count. None when the run has no such row."""
    if frame is None or not len(frame) or "acceptance_length_tokens" not in frame:
        return None
    status = frame.get("tier_status", pd.Series("complete", index=frame.index))
    rows = frame[status.fillna("complete").astype(str).eq("complete")].copy()
    rows["length"] = _num(rows, "acceptance_length_tokens")
    rows = rows.dropna(subset=["length"])
    if rows.empty:
        return None
    rows["tier"] = rows["tier"].astype(str)
    rows["category"] = rows["category"].astype(str)
    order = sorted(rows["tier"].unique(), key=_tier_order)
    rows["at"] = rows["tier"].map(order.index)
    colors = palette(rows["variant"].unique(), colors)
    fig = go.Figure()
    for variant, g in rows.sort_values(["category", "at"]).groupby("variant"):
        rate = [
            "—" if np.isnan(r) else f"{r:.3f}"
            for r in _num(g, "draft_acceptance_rate_ratio")
        ]
        fig.add_trace(
            go.Bar(
                x=[g["category"].tolist(), g["tier"].tolist()],
                y=g["length"],
                name=str(variant),
                marker_color=colors[variant],
                customdata=np.c_[rate, _num(g, "requests_count")],
                hovertemplate=f"<b>{variant}</b> %{{x}}<br>acceptance length "
                "%{y:.3f} tokens<br>draft acceptance rate %{customdata[0]} "
                "(%{customdata[1]:.0f} requests)<extra></extra>",
            )
        )
    title = "Acceptance length per prompt category (each tier)"
    fig = layout(fig, title, "category, tier", "acceptance length (tokens per step)")
    fig.update_layout(barmode="group")
    return PageFigure("categories", title, fig, "tokens", CATEGORIES)


def page_figures(
    tiers: pd.DataFrame,
    crossover: pd.DataFrame,
    acceptance: pd.DataFrame | None,
    round_rows: pd.DataFrame | None,
    ratio: str,
    has_baseline: bool,
    category_rows: pd.DataFrame | None = None,
    memory: PageFigure | None = None,
    colors: Colors = None,
) -> list[PageFigure]:
    """Every figure the data allows, the speedup first (complete tiers in ``tiers``),
    then acceptance per position and per category (``category_rows``: categories.csv),
    ``memory`` (:mod:`page_memory`) and the rounds; a variant has one colour in all of
    them (``colors``, else the colours among ``tiers``' variants)."""
    t = tiers
    colors = palette(t["variant"].unique(), colors)
    out = [
        vs_load(
            t,
            "ttft_p50_ms",
            "ttft",
            "TTFT p50 (ms)",
            "TTFT p50 vs load",
            "ms",
            LATENCY,
            colors,
        ),
        vs_load(
            t,
            "tpot_mean_ms",
            "tpot",
            "TPOT mean (ms)",
            "TPOT vs load",
            "ms",
            LATENCY,
            colors,
        ),
        vs_load(
            t,
            "output_tokens_per_s",
            "throughput",
            "output tok/s (system)",
            "Output token throughput vs load",
            "tokens/s",
            THROUGHPUT,
            colors,
        ),
    ]
    if has_baseline:
        out.insert(0, speedup(t, crossover, ratio, colors))
    spec = t[~t["mode"].isin(methods.NON_DRAFTING)]
    if len(spec):
        out.append(
            vs_load(
                spec,
                "tokens_per_step",
                "acceptance",
                "tokens per decode step",
                "Acceptance length (tokens per step)",
                "tokens",
                SPECULATIVE,
                colors,
            )
        )
    extra = (
        positions(acceptance, colors),
        categories(category_rows, colors),
        memory,
        rounds(round_rows, colors),
    )
    return out + [f for f in extra if f is not None]
