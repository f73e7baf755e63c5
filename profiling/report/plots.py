"""PNG plots of the analysis outputs (matplotlib, Agg backend; no analysis happens here).

Each function takes a frame from :mod:`trtbench.profiling.report.comparison`, writes one PNG and
returns its path. Variants keep the same colour in every plot (sorted names → tab10).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from trtbench.core import methods
from trtbench.core.units import UNITS, byte_unit, format_bytes  # noqa: E402
from trtbench.profiling.report.uncertainty import interval_of  # noqa: E402

FIGSIZE = (7.5, 4.5)
log = logging.getLogger(__name__)
DPI = 120


def variant_colors(variants: Sequence[str]) -> dict[str, str]:
    """A stable colour per variant name (sorted names → tab10)."""
    cmap = plt.get_cmap("tab10")
    return {
        v: matplotlib.colors.to_hex(cmap(i % 10))
        for i, v in enumerate(sorted(variants))
    }


def _x_axis(tiers: pd.DataFrame) -> tuple[str, str]:
    """(column, label) of the x axis: concurrency when measured, else request rate.

    A run with both kinds of tier plots the concurrency ones and says so (a WARNING with
    the count): the others stay in the per-tier table.
    """
    if tiers["concurrency"].notna().any():
        left_out = int(tiers["concurrency"].isna().sum())
        if left_out:
            log.warning(
                "%d request-rate tiers are not drawn in the plots against concurrency; "
                "they are in the per-tier table",
                left_out,
            )
        return "concurrency", "concurrency (concurrent requests)"
    return "request_rate_per_s", "request rate (requests/s)"


def _setup_x(ax: plt.Axes, values: np.ndarray, label: str) -> None:
    values = np.unique(values[~np.isnan(values)])
    if len(values) and values.min() > 0:
        ax.set_xscale("log", base=2)
        ax.set_xticks(values)
        ax.set_xticklabels([f"{v:g}" for v in values])
        ax.minorticks_off()
    ax.set_xlabel(label)
    ax.grid(True, which="major", alpha=0.3)


def _save(fig: plt.Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def _interval_bars(
    ax: plt.Axes,
    g: pd.DataFrame,
    xcol: str,
    col: str,
    color: str,
    shift: float = 1.0,
) -> None:
    """Vertical bars over the 95 % interval of ``col`` where the frame has one
    (``<col>_ci95_low`` / ``_high``, :func:`uncertainty.interval_of`), with an ``x`` at the
    mean over passes the interval is built around (``<col>_repeat_mean``; the line's point
    is the pooled figure, which can sit elsewhere in the bar); ``shift`` multiplies x, to
    set one variant's bars beside another's on a log x axis."""
    found = interval_of(g, col)
    if found is not None:
        rows, low, high = found
        x = g[xcol].to_numpy(dtype=float)[rows] * shift  # shift: apart from the others'
        ax.vlines(x, low, high, color=color, lw=1.5, alpha=0.7)
        ax.plot(np.r_[x, x], np.r_[low, high], "_", color=color, ms=8, alpha=0.7)
        if f"{col}_repeat_mean" in g:
            mean = g[f"{col}_repeat_mean"].to_numpy(dtype=float)[rows]
            ax.plot(x, mean, "x", color=color, ms=5, alpha=0.9)


def plot_vs_load(
    tiers: pd.DataFrame,
    path: Path,
    series: Sequence[tuple[str, str]],
    ylabel: str,
    title: str,
    palette: dict[str, str] | None = None,
) -> Path:
    """One line per (variant, column) against concurrency; ``series`` = (column, style label),
    with a bar over each point's 95 % interval where the frame has one (repeated passes).

    The first series is drawn solid with markers, the next dashed, then dotted. ``palette``
    fixes the colours (default: :func:`variant_colors` of the variants plotted).
    """
    xcol, xlabel = _x_axis(tiers)
    colors = palette or variant_colors(tiers["variant"].unique())
    fig, ax = plt.subplots(figsize=FIGSIZE)
    styles = ("-", "--", ":")
    for variant, g in tiers.dropna(subset=[xcol]).sort_values(xcol).groupby("variant"):
        for (col, label), ls in zip(series, styles, strict=False):
            if g[col].notna().any():
                name = f"{variant} {label}".strip()
                ax.plot(
                    g[xcol],
                    g[col],
                    ls,
                    marker="o",
                    ms=4,
                    color=colors[variant],
                    label=name,
                )
                _interval_bars(ax, g, xcol, col, colors[variant])
    _setup_x(ax, tiers[xcol].to_numpy(dtype=float), xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    values = np.concatenate(
        [np.asarray(line.get_ydata(), dtype=float) for line in ax.lines] or [[1.0]]
    )
    top = np.nanmax(values) if np.isfinite(values).any() else np.nan
    ax.set_ylim(0, top * 1.12 if np.isfinite(top) and top > 0 else 1.0)
    if ax.lines:
        ax.legend(fontsize=8, loc="best")
    return _save(fig, path)


def plot_speedup(
    tiers: pd.DataFrame,
    crossover: pd.DataFrame,
    path: Path,
    ratio: str = "TPOT speedup",
) -> Path:
    """Speedup vs baseline against concurrency on a log2 y axis, with a bar over each
    point's interval; y = 1 line; crossover marked per variant. ``ratio`` names the speedup the frame's
    ``speedup_ratio`` holds (``ratios.ratio_name``: the report's objective; the default:
    the load test's TPOT speedup, throughput where a variant does not stream)."""
    xcol, xlabel = _x_axis(tiers)
    spec = tiers[~tiers["mode"].isin(methods.NON_DRAFTING) & tiers[xcol].notna()]
    colors = variant_colors(tiers["variant"].unique())
    fig, ax = plt.subplots(figsize=FIGSIZE)
    ax.axhline(1.0, color="0.3", lw=1, label="baseline (1x)")
    groups = list(spec.sort_values(xcol).groupby("variant"))
    for i, (variant, g) in enumerate(groups):
        tpot = ratio == "TPOT speedup"
        basis = "" if not tpot or (g["speedup_basis"] == "tpot").all() else " (tok/s)"
        ax.plot(
            g[xcol],
            g["speedup_ratio"],
            "-o",
            ms=4,
            color=colors[variant],
            label=f"{variant}{basis}",
        )
        shift = 2 ** (0.04 * (i - (len(groups) - 1) / 2))  # bars side by side
        _interval_bars(ax, g, xcol, "speedup_ratio", colors[variant], shift)
    for i, (_, row) in enumerate(crossover.iterrows()):
        x = row["crossover_interpolated"]
        if pd.notna(x) and row["variant"] in colors:
            c = colors[row["variant"]]
            ax.axvline(x, color=c, ls=":", lw=1.5)
            ax.annotate(
                f"crossover ≈ {x:.1f}",
                (x, 1.0),
                xytext=(4, 8 + 12 * i),  # one label above another
                textcoords="offset points",
                color=c,
                fontsize=8,
            )
    _setup_x(ax, tiers[xcol].to_numpy(dtype=float), xlabel)
    name = "baseline TPOT / TPOT" if ratio == "TPOT speedup" else f"{ratio} (ratio)"
    ax.set_ylabel(f"{name}, log scale")
    ax.set_title(f"Speedup: {ratio} (below 1: speculation does not pay off)")
    ax.set_yscale("log", base=2)  # a ratio's interval is symmetric in log
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.legend(fontsize=8, loc="best")
    return _save(fig, path)


MEMORY_PARTS = (
    ("target_weights_bytes", "target weights"),
    ("draft_weights_bytes", "draft weights"),
    ("medusa_heads_bytes", "Medusa heads"),
    ("eagle3_weights_bytes", "EAGLE-3 draft weights"),
    ("target_kv_pool_bytes", "target KV pool"),
    ("draft_kv_pool_bytes", "draft KV pool"),
    ("eagle3_kv_pool_bytes", "EAGLE-3 KV (in the target's pool)"),
)


PEAK_LABELS = {
    "peak_proc_used_bytes": "server's GPU memory",
    "peak_device_used_bytes": "device memory used",
    "peak_rss_bytes": "process RSS, no GPU",
}


def plot_memory(breakdown: pd.DataFrame, peaks: pd.DataFrame, path: Path) -> Path:
    """Stacked bars per variant: weights, heads, KV pools and the rest of the measured peak.

    Where a peak was measured the bar reaches it ("rest of peak" = peak − the known parts);
    each bar is labelled with its weights and peak. MiB when all is below 1 GiB, else GiB.
    ``peaks`` holds ``variant``, ``peak_bytes`` and ``peak_source`` per variant
    (``comparison.peak_memory`` or ``comparison.memory_extra`` output).
    """
    values = [pd.to_numeric(breakdown.get(c), errors="coerce") for c, _ in MEMORY_PARTS]
    peak = peaks.set_index("variant").reindex(breakdown["variant"].astype(str))
    top = max(
        [v.max() for v in values if v is not None] + [peak["peak_bytes"].max(), 1.0]
    )
    unit = byte_unit(top, smallest="MiB")  # one unit for the axis and every label
    scale = UNITS[unit]
    fig, ax = plt.subplots(figsize=(FIGSIZE[0] + 1.5, FIGSIZE[1]))
    x = np.arange(len(breakdown))
    bottom = np.zeros(len(breakdown))
    for (_, label), v in zip(MEMORY_PARTS, values, strict=True):
        if v is None or not v.notna().any():
            continue
        h = v.fillna(0).to_numpy(dtype=float) / scale
        ax.bar(x, h, 0.6, bottom=bottom, label=label)
        bottom += h
    peak_bytes = peak["peak_bytes"].to_numpy(dtype=float)
    peaks_scaled = peak_bytes / scale
    rest = np.where(
        np.isnan(peaks_scaled), 0.0, np.clip(peaks_scaled - bottom, 0, None)
    )
    if rest.any():
        src = ", ".join(
            sorted(
                PEAK_LABELS.get(s, s) for s in set(peak["peak_source"].dropna()) - {""}
            )
        )
        ax.bar(
            x,
            rest,
            0.6,
            bottom=bottom,
            color="0.85",
            hatch="//",
            edgecolor="0.6",
            label=f"rest of measured peak\n({src})",
        )
    weights = pd.to_numeric(breakdown.get("weights_total_bytes"), errors="coerce")
    for i in range(len(breakdown)):
        text = (
            [f"weights {format_bytes(weights.iloc[i], unit=unit, digits=1)}"]
            if weights is not None and pd.notna(weights.iloc[i])
            else []
        )
        if not np.isnan(peaks_scaled[i]):
            text.append(f"peak {format_bytes(peak_bytes[i], unit=unit, digits=1)}")
        ax.annotate(
            "\n".join(text),
            (x[i], bottom[i] + rest[i]),
            xytext=(0, 3),
            textcoords="offset points",
            ha="center",
            fontsize=8,
        )
    ax.set_xticks(x)
    ax.set_xticklabels(breakdown["variant"].astype(str))
    ax.set_ylabel(f"memory ({unit})")
    ax.set_ylim(0, max(float((bottom + rest).max()), 1e-9) * 1.18)
    ax.set_title("Memory per variant: weights, KV-cache pool and measured peak")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return _save(fig, path)


def plot_launch_overhead(launches: pd.DataFrame, path: Path) -> Path:
    """Mean launch overhead per step per trace, coloured by CUDA graphs on/off."""
    fig, ax = plt.subplots(figsize=FIGSIZE)
    x = np.arange(len(launches))
    colors = ["tab:green" if g else "tab:red" for g in launches["cuda_graphs"]]
    bars = ax.bar(x, launches["launch_overhead_mean_ms"], 0.6, color=colors)
    for bar, calls in zip(bars, launches["launch_calls_per_step"], strict=True):
        ax.annotate(
            f"{calls:g} launch call(s)/step",
            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
            xytext=(0, 3),
            textcoords="offset points",
            ha="center",
            fontsize=8,
        )
    ax.set_xticks(x)
    ax.set_xticklabels(launches["trace"], rotation=15, ha="right")
    ax.set_ylabel("launch API host time per step (ms)")
    ax.set_title("Launch overhead per decode step (green: CUDA graphs, red: eager)")
    ax.grid(True, axis="y", alpha=0.3)
    return _save(fig, path)


def plot_acceptance(tiers: pd.DataFrame, path: Path) -> Path:
    """Tokens per step (acceptance length) per speculative variant against concurrency."""
    spec = tiers[~tiers["mode"].isin(methods.NON_DRAFTING)]
    return plot_vs_load(
        spec if len(spec) else tiers,
        path,
        [("tokens_per_step", "")],
        "tokens per decode step (1 = no speculation)",
        "Acceptance length (tokens per step)",
        palette=variant_colors(tiers["variant"].unique()),
    )
