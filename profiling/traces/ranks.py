"""The traces of several ranks analysed together: one process per rank, per-rank and combined tables.

A tensor-parallel server writes one trace per rank (GPU). :func:`analyze_ranks` checks every file
first (:func:`check_trace`: an nsys export must be SQLite with nsys metadata and not shorter than its
header says; a Kineto trace, which is only parsed whole, must be non-empty), analyses the
ranks in ``jobs`` worker processes (each nsys export in bounded memory:
:func:`~trtbench.profiling.traces.nsys_stream.analyze_nsys_export`; a Kineto trace is read whole),
writes each rank's three tables into ``OUT/<file stem>/`` and the combined tables into ``OUT``:

- ``steps_ranks.csv``: every rank's steps with ``rank``, ``rank_file``, ``device_id`` (the GPU
  that ran most of the rank's kernels) and ``aligned_step``;
- ``launch_summary_ranks.csv``: every rank's launch summary with ``rank`` and ``rank_file``;
- ``step_alignment.csv``: one row per aligned step, its figures across the ranks.

**Step alignment** (:func:`align_steps`): when every rank's steps come from ranges with names
unique within the rank (``decode_step#N``, ``ProfilerStep#N``), a step is the ranks' ranges of one
name (ordered by where the name first appears); a name missing on some ranks is kept, with the
count of ranks that have it. Otherwise, when every rank has the same number of steps, the i-th
step of each rank is step i. Otherwise the steps are not aligned (``aligned_step`` empty, no
``step_alignment.csv`` rows) and :attr:`RankAnalysis.alignment` says why. Ranks' clocks are not
compared (each trace has its own timeline): alignment is by name or position, never by time.

The rank of a file is the last integer in its stem when those are distinct across the files
(``report_rank3.sqlite`` -> 3), else its position in name order.
"""

from __future__ import annotations

import logging
import re
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from trtbench.core.errors import ConfigError, TraceParseError, TrtbenchError
from trtbench.profiling.traces.nsys_sqlite import ExportSchema, connect_export
from trtbench.profiling.traces.nsys_stream import WrittenAnalysis
from trtbench.profiling.traces.rank_workers import RankFile, run_rank_pool
from trtbench.profiling.traces.schemas import (
    RANK_STEP_SCHEMA,
    RANK_SUMMARY_SCHEMA,
    STEP_ALIGNMENT_SCHEMA,
)
from trtbench.profiling.traces.table_io import write_csv_fast

logger = logging.getLogger(__name__)

KINDS = ("nsys", "kineto")
_SUFFIXES = {"nsys": (".sqlite",), "kineto": (".json", ".json.gz")}
_LAST_INT = re.compile(r"(\d+)(?!.*\d)")
_UNIQUE_NAMES = "ranges with names unique within each rank"
COMBINED_TABLES = ("steps_ranks.csv", "launch_summary_ranks.csv", "step_alignment.csv")


@dataclass(frozen=True)
class RankAnalysis:
    """Per-rank results, the combined tables and what could not be analysed.

    Attributes:
        ranks: ``(rank file, its analysis)`` per analysed rank, in rank order.
        skipped: ``(rank file, one-line reason)`` per rank left out (``skip_bad``).
        steps: ``steps_ranks.csv`` rows.
        launch_summary: ``launch_summary_ranks.csv`` rows.
        alignment: ``step_alignment.csv`` rows.
        aligned_by: how steps were aligned, or why they were not (one line).
        files: the combined tables written.
    """

    ranks: tuple[tuple[RankFile, WrittenAnalysis], ...]
    skipped: tuple[tuple[RankFile, str], ...]
    steps: pd.DataFrame
    launch_summary: pd.DataFrame
    alignment: pd.DataFrame
    aligned_by: str
    files: tuple[Path, ...]


def expand_inputs(paths: list[Path], kind: str) -> list[Path]:
    """Files named directly, plus the traces (``.sqlite``; ``.json``/``.json.gz``) directly in
    each folder named, sorted; duplicates once.

    Raises:
        ConfigError: a path does not exist, or a folder holds no trace.
    """
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            inside = sorted(
                p
                for p in path.iterdir()
                if p.is_file() and p.name.endswith(_SUFFIXES[kind])
            )
            if not inside:
                raise ConfigError(
                    f"{path} holds no {kind} trace ({' or '.join(_SUFFIXES[kind])} files); "
                    "pass the folder of the rank traces or the files themselves"
                )
            found += inside
        elif path.exists():
            found.append(path)
        else:
            raise ConfigError(
                f"{path} does not exist; pass trace files or their folder"
            )
    unique = list(dict.fromkeys(p.resolve() for p in found))
    return [Path(p) for p in unique]


def rank_files(paths: list[Path]) -> list[RankFile]:
    """Number the files (see the module docstring) and name their output folders (stems made
    unique with the rank when two files share a stem)."""
    ordered = sorted(paths, key=lambda p: p.name)
    numbers = [_LAST_INT.search(_stem(p)) for p in ordered]
    ranks = (
        [int(m.group(1)) for m in numbers]
        if all(numbers) and len({int(m.group(1)) for m in numbers}) == len(ordered)
        else list(range(len(ordered)))
    )
    stems = [_stem(p) for p in ordered]
    labels = [
        s if stems.count(s) == 1 else f"{s}_rank{r}"
        for s, r in zip(stems, ranks, strict=True)
    ]
    files = [
        RankFile(r, p, label)
        for r, p, label in zip(ranks, ordered, labels, strict=True)
    ]
    return sorted(files, key=lambda f: f.rank)


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (".json.gz", ".json", ".sqlite"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return path.stem


def check_trace(path: Path, kind: str) -> None:
    """Cheap checks before any analysis: nsys: an SQLite file, not shorter than its header
    says, with nsys metadata; Kineto: a non-empty file.

    Raises:
        ConfigError, TraceParseError: the file is unusable (one line naming it).
    """
    if kind == "nsys":
        conn = connect_export(path)
        try:
            ExportSchema(conn, path)
        except sqlite3.DatabaseError as exc:  # pages corrupt, size right: as one file
            raise TraceParseError(
                f"{path} is truncated or corrupt ({exc}); export the report again with "
                "`nsys export --type sqlite REPORT.nsys-rep`"
            ) from None
        finally:
            conn.close()
    elif not path.is_file():
        raise ConfigError(f"Kineto trace {path} does not exist")
    elif path.stat().st_size == 0:
        raise TraceParseError(f"{path} is empty (0 bytes); record the trace again")


def main_device(launch_summary: pd.DataFrame) -> int | None:
    """The device id with the most kernels in a launch summary (None without kernels)."""
    counts = launch_summary.groupby("device_id", dropna=True)["count"].sum()
    return None if counts.empty else int(counts.idxmax())


def align_steps(
    steps: list[pd.DataFrame], sources: list[str]
) -> tuple[list[pd.Series], str]:
    """Per rank, the aligned step index of each of its steps (NA: not aligned), and how.

    Args:
        steps: each rank's ``steps.csv`` rows.
        sources: each rank's step source (``StepSummary.step_source``).
    """
    by_range = all("matching" in s for s in sources) and all(
        not frame["s_name"].astype(str).duplicated().any() for frame in steps
    )
    if by_range and steps:
        first_seen: dict[str, tuple[int, int]] = {}
        for rank, frame in enumerate(steps):
            for pos, name in enumerate(frame["s_name"].astype(str)):
                first_seen.setdefault(name, (pos, rank))
        order = sorted(first_seen, key=lambda n: first_seen[n])
        index = {name: i for i, name in enumerate(order)}
        aligned = [
            pd.Series(
                pd.array([index[n] for n in f["s_name"].astype(str)], dtype="Int64")
            )
            for f in steps
        ]
        names = [set(f["s_name"].astype(str)) for f in steps]
        partial = sum(
            1 for n in order if sum(n in ranked for ranked in names) < len(steps)
        )
        note = f", {partial} of them on only some ranks" if partial else ""
        return aligned, f"by step name ({_UNIQUE_NAMES}): {len(order)} steps{note}"
    counts = [len(f) for f in steps]
    if len(set(counts)) == 1:
        aligned = [pd.Series(pd.array(np.arange(n), dtype="Int64")) for n in counts]
        return aligned, f"by position: every rank has {counts[0]} steps"
    aligned = [pd.Series(pd.array([pd.NA] * n, dtype="Int64")) for n in counts]
    listed = ", ".join(f"{n}" for n in counts)
    return aligned, (
        f"not aligned: the ranks have different step counts ({listed}) and their steps are "
        f"not {_UNIQUE_NAMES}"
    )


def alignment_table(steps: pd.DataFrame) -> pd.DataFrame:
    """``step_alignment.csv``: per aligned step, its figures across the ranks that have it
    (:data:`~trtbench.profiling.traces.schemas.STEP_ALIGNMENT_SCHEMA`)."""
    rows = steps[steps["aligned_step"].notna()]
    columns = [c.name for c in STEP_ALIGNMENT_SCHEMA]
    if rows.empty:
        return pd.DataFrame({c: [] for c in columns})
    rows = rows.assign(s_name=rows["s_name"].astype(str))
    groups = rows.groupby("aligned_step", sort=True)
    overhead = groups["launch_overhead_ns"]
    worst = rows.loc[overhead.idxmax(), ["aligned_step", "rank"]].set_index(
        "aligned_step"
    )
    out = pd.DataFrame(
        {
            "s_name": groups["s_name"].first(),
            "ranks": groups["rank"].nunique(),
            "wall_min_ns": groups["wall_ns"].min(),
            "wall_max_ns": groups["wall_ns"].max(),
            "launch_overhead_mean_ns": overhead.mean().astype(float),
            "launch_overhead_min_ns": overhead.min(),
            "launch_overhead_max_ns": overhead.max(),
            "launch_overhead_max_rank": worst["rank"],
            "kernels_min": groups["kernels"].min(),
            "kernels_max": groups["kernels"].max(),
            "gpu_busy_min_ns": groups["gpu_busy_ns"].min(),
            "gpu_busy_max_ns": groups["gpu_busy_ns"].max(),
        }
    )
    return out.reset_index()[columns]


def analyze_ranks(
    paths: list[Path],
    out_dir: Path,
    *,
    kind: str = "nsys",
    step_pattern: str | None = None,
    fmt: str = "auto",
    jobs: int = 1,
    skip_bad: bool = False,
    on_done: Callable[[RankFile, int, int], None] | None = None,
) -> RankAnalysis:
    """Analyse every rank's trace in ``jobs`` processes; write per-rank and combined tables.

    Args:
        paths: the rank traces (see :func:`expand_inputs` for folders).
        out_dir: per-rank tables go to ``out_dir/<label>/``, the combined ones to ``out_dir``.
        kind: ``nsys`` or ``kineto``.
        step_pattern, fmt: as for :func:`~trtbench.profiling.traces.rank_workers.analyze_one`.
        jobs: worker processes (at least 1).
        skip_bad: analyse the other ranks when some are unusable (reported in ``skipped``)
            instead of stopping.
        on_done: called with (rank file, ranks finished so far, ranks to analyse) as each
            rank finishes.

    Raises:
        ConfigError: the step pattern is invalid or matches nothing on a rank.
        TraceParseError: a rank's file is unusable (named; checked for every rank before any
            analysis) and ``skip_bad`` is off, or no rank could be analysed.
    """
    files = rank_files(paths)
    bad: list[tuple[RankFile, str]] = []
    for rank_file in files:
        try:
            check_trace(rank_file.path, kind)
        except TrtbenchError as exc:
            bad.append((rank_file, str(exc)))
    if bad and not skip_bad:
        raise TraceParseError(_bad_line(bad))
    good = [f for f in files if f not in {b[0] for b in bad}]
    for name in COMBINED_TABLES:  # an earlier run's would describe other rank tables
        (out_dir / name).unlink(missing_ok=True)
    results = run_rank_pool(
        good, out_dir, kind, step_pattern, fmt, jobs, skip_bad, bad, on_done
    )
    if not results:
        raise TraceParseError(f"no rank could be analysed: {_bad_line(bad)}")
    return _combine(results, bad, out_dir)


def _bad_line(bad: list[tuple[RankFile, str]]) -> str:
    if len(bad) == 1:
        return bad[0][1]
    return f"{len(bad)} rank files are unusable: " + "; ".join(
        f"{f.path.name}: {reason}" for f, reason in bad
    )


def _combine(
    results: list[tuple[RankFile, WrittenAnalysis]],
    bad: list[tuple[RankFile, str]],
    out_dir: Path,
) -> RankAnalysis:
    aligned, aligned_by = align_steps(
        [r.steps for _, r in results], [r.summary.step_source for _, r in results]
    )
    step_parts, summary_parts = [], []
    for (rank_file, result), step_index in zip(results, aligned, strict=True):
        device = main_device(result.launch_summary)
        ident = {"rank": rank_file.rank, "rank_file": rank_file.path.name}
        steps = result.steps.reset_index(drop=True).assign(
            **ident,
            device_id=pd.array([device] * len(result.steps), dtype="Int64"),
            aligned_step=step_index.to_numpy(),
        )
        step_parts.append(steps)
        summary_parts.append(result.launch_summary.assign(**ident))
    steps = pd.concat(step_parts, ignore_index=True)[[c.name for c in RANK_STEP_SCHEMA]]
    summary = pd.concat(summary_parts, ignore_index=True)[
        [c.name for c in RANK_SUMMARY_SCHEMA]
    ]
    alignment = alignment_table(steps)
    out_dir.mkdir(parents=True, exist_ok=True)
    files = (
        write_csv_fast(steps, out_dir / "steps_ranks.csv", RANK_STEP_SCHEMA),
        write_csv_fast(
            summary, out_dir / "launch_summary_ranks.csv", RANK_SUMMARY_SCHEMA
        ),
        write_csv_fast(
            alignment, out_dir / "step_alignment.csv", STEP_ALIGNMENT_SCHEMA
        ),
    )
    return RankAnalysis(
        ranks=tuple(results),
        skipped=tuple(bad),
        steps=steps,
        launch_summary=summary,
        alignment=alignment,
        aligned_by=aligned_by,
        files=files,
    )


def rank_summary_line(
    rank_file: RankFile, result: WrittenAnalysis, device: int | None
) -> str:
    """``rank 3 (report_3.sqlite, device 3): 6,250,000 kernels, 31,250 steps, launch overhead
    per step mean 12.345 us`` (for the CLI)."""
    s = result.summary
    mean = s.launch_overhead_mean_ns
    overhead = "n/a" if np.isnan(mean) else f"{mean / 1000:,.3f} us"
    dev = "no kernels" if device is None else f"device {device}"
    return (
        f"rank {rank_file.rank} ({rank_file.path.name}, {dev}): {result.kernels:,} kernels, "
        f"{s.steps:,} steps, launch overhead per step mean {overhead}"
    )
