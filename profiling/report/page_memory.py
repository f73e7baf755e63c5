"""report.html's memory over time: the run's memory samples (``memory.csv``) as one line per
variant and device, thinned to a fixed number of points so the page stays small.

What a line draws (docs/metrics.md, "Memory over time"): per NVML row the device memory of
the server's process tree on that device (``proc_used_bytes``), or where NVML listed none of
its processes the device's used memory (``mem_used_bytes``); per ``rss`` row (no NVML) the
process tree's resident set (``rss_bytes``); in MiB (2^20 bytes). Time is seconds since the
run's first sample (one host's monotonic clock); in a cluster run, whose shards sampled on
different hosts, since each line's own first sample.

Thinning (:func:`min_max_points`): a line of more than its share of :data:`TOTAL_POINTS`
readings is cut into runs of consecutive readings and each run drawn by its lowest and its
highest reading, so every peak and trough stays on the plot; the figure's note says how many
readings became how many points.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from trtbench.core.data_files import read_csv_checked
from trtbench.profiling.memory.sampler import MEMORY_SCHEMA, SOURCE_NVML
from trtbench.profiling.report.page_figures import Colors, PageFigure, layout, palette

TOTAL_POINTS = 2000
"""The most points the figure draws, all lines together (about 60 kB of the page)."""
MIB = 2**20
DEFINITION = "Memory over time (`memory.csv`)"
"""The heading of docs/metrics.md that defines the figure."""
MEMORY_FIX = "re-run `trtbench run` into this run directory, or delete the file"
MEASURES = (
    ("proc_used_bytes", "device memory of the server's processes"),
    (
        "mem_used_bytes",
        "device memory used (NVML lists none of the server's processes)",
    ),
)
"""What an NVML line draws, first choice first (module docstring)."""
RSS_MEASURE = ("rss_bytes", "resident set of the server's process tree (no NVML)")
DASHES = ("solid", "dash", "dot", "dashdot")
"""A variant's devices: one dash each (the colour is the variant's)."""


def read_memory(path: Path) -> pd.DataFrame | None:
    """``memory.csv`` checked against its schema; None when the run has none.

    Raises:
        DataFileError: present but corrupt (:func:`read_csv_checked`).
    """
    if not path.is_file():
        return None
    return read_csv_checked(
        path, MEMORY_SCHEMA, fix=MEMORY_FIX, keys=("variant", "t_ns", "source")
    )


def min_max_points(values: np.ndarray, limit: int) -> np.ndarray:
    """Indices of ``values`` (one line's readings, in time order) to draw, ascending: all
    of them when there are at most ``limit``; else the readings cut into ``limit // 2``
    runs of consecutive ones (sizes differing by at most one, numpy ``array_split``) and
    of each run the index of its lowest and of its highest value (the first of equal ones;
    one index when they coincide). ``limit`` ≥ 2.

    Raises:
        ValueError: ``limit`` < 2.
    """
    if limit < 2:
        raise ValueError(f"limit must be at least 2, got {limit}")
    n = len(values)
    if n <= limit:
        return np.arange(n)
    keep: list[int] = []
    for run in np.array_split(np.arange(n), limit // 2):
        part = values[run]
        keep += sorted({int(run[np.argmin(part)]), int(run[np.argmax(part)])})
    return np.asarray(keep)


def _lines(frame: pd.DataFrame) -> list[tuple[str, str, int, pd.DataFrame, str, str]]:
    """(name, variant, device rank, rows, column, what) per line, in the file's order."""
    out = []
    for variant, rows in frame.groupby("variant", sort=False):
        nvml = rows[rows["source"].astype(str) == SOURCE_NVML]
        for rank, (device, g) in enumerate(nvml.groupby("device_index", sort=True)):
            column, what = next(
                (m for m in MEASURES if g[m[0]].notna().any()), MEASURES[0]
            )
            name = f"{variant} GPU {int(device)}"
            out.append((name, str(variant), rank, g, column, what))
        rss = rows[rows["source"].astype(str) != SOURCE_NVML]
        if rss[RSS_MEASURE[0]].notna().any():
            out.append((str(variant), str(variant), 0, rss, *RSS_MEASURE))
    return out


def memory_over_time(
    frame: pd.DataFrame | None,
    same_clock: bool = True,
    total_points: int = TOTAL_POINTS,
    colors: Colors = None,
) -> PageFigure | None:
    """The figure (module docstring): one trace per variant and NVML device (named
    ``<variant> GPU <index>``) or per variant sampled without NVML (named ``<variant>``),
    readings without a value left out, at most ``total_points`` points in all (each line
    ``total_points // lines`` at most, :func:`min_max_points`). ``same_clock``: every
    sample is on one clock (one host), so time counts from the file's first sample; else
    from each line's first. ``colors``: the page's (``page_figures.Colors``). None when
    there is nothing to draw.
    """
    if frame is None or not len(frame):
        return None
    wanted = ["device_index", RSS_MEASURE[0], *(m[0] for m in MEASURES)]
    frame = frame.reindex(
        columns=[*frame.columns, *(c for c in wanted if c not in frame)]
    )
    frame = frame.assign(t_s=pd.to_numeric(frame["t_ns"], errors="coerce") / 1e9)
    lines = _lines(frame)
    if not lines:
        return None
    zero = frame["t_s"].min()
    colors = palette(frame["variant"].astype(str).unique(), colors)
    share = max(2, total_points // len(lines))
    fig = go.Figure()
    readings = drawn = 0
    for name, variant, rank, rows, column, what in lines:
        rows = rows.assign(y=pd.to_numeric(rows[column], errors="coerce") / MIB)
        rows = rows.dropna(subset=["t_s", "y"]).sort_values("t_s", kind="stable")
        at = min_max_points(rows["y"].to_numpy(), share)
        kept = rows.iloc[at]
        readings, drawn = readings + len(rows), drawn + len(kept)
        start = zero if same_clock else rows["t_s"].min()
        fig.add_trace(
            go.Scatter(
                x=np.round(kept["t_s"].to_numpy() - start, 3),
                y=np.round(kept["y"].to_numpy(), 2),
                name=name,
                mode="lines",
                line={"color": colors[variant], "dash": DASHES[rank % len(DASHES)]},
                text=kept["phase"].astype(str).to_numpy(),
                hovertemplate=f"<b>{name}</b> %{{text}}<br>%{{x:.1f}} s: %{{y:.1f}} "
                f"MiB<br>{what}<extra></extra>",
            )
        )
    clock = "the run's first sample" if same_clock else "each line's first sample"
    title = "Memory over time (each server, as sampled)"
    fig = layout(fig, title, f"time since {clock} (s)", "memory (MiB)")
    note = (
        f"{readings} readings drawn as {drawn} points: a line of more than {share} "
        "readings is cut into runs of consecutive readings, each drawn by its lowest and "
        "highest (every peak and trough kept)."
        if drawn < readings
        else f"All {readings} readings drawn."
    )
    return PageFigure("memory_time", title, fig, "MiB", DEFINITION, note)
