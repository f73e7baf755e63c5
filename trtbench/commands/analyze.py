"""``trtbench analyze``: kernel-launch tables from Nsight Systems and PyTorch profiler traces."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from pathlib import Path

import click

from trtbench.commands.options import RESULT_DIR_ALIAS
from trtbench.profiling.traces.nsys_stream import TABLE_FORMATS, WrittenAnalysis
from trtbench.profiling.traces.rank_workers import analyze_one
from trtbench.profiling.traces.ranks import (
    analyze_ranks,
    expand_inputs,
    main_device,
    rank_summary_line,
)


def _regex(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``--step-pattern`` compiled once before any trace is read: a bad one is exit 2 with
    nothing written (not found rank by rank, leaving an empty ``--out``)."""
    if value is not None:
        try:
            re.compile(value)
        except re.error as exc:
            raise click.BadParameter(
                f"{value!r} is not a regular expression ({exc})"
            ) from None
    return value


def _options(func: Callable) -> Callable:
    func = click.option(
        "--skip-bad-ranks",
        is_flag=True,
        help="With several traces: analyse the usable ones when some are truncated or "
        "invalid (each named on stderr) instead of stopping with exit code 2.",
    )(func)
    func = click.option(
        "--jobs",
        type=click.IntRange(min=1),
        default=None,
        help="Worker processes: one trace each when there are several; for one Kineto "
        "trace, processes decoding it (default: one per CPU core).",
    )(func)
    func = click.option(
        "--step-pattern",
        metavar="REGEX",
        callback=_regex,
        help="Regular expression (searched) naming the ranges that are decode steps. Default: "
        "decode_step#N / ProfilerStep#N ranges if any, else graph-launch boundaries, else the "
        "whole trace as one step.",
    )(func)
    func = click.option(
        "--format",
        "fmt",
        type=click.Choice(TABLE_FORMATS),
        default="auto",
        show_default=True,
        help="Table format. auto: kernel_launches.parquet above 1,000,000 kernels (else .csv), "
        "launch_summary.csv and steps.csv; csv: every table CSV; parquet: each trace's tables "
        "Parquet (the combined *_ranks.csv and step_alignment.csv stay CSV) "
        "(the same columns, typed: int64 with nulls, float64, dictionary strings). `trtbench "
        "report` reads steps.csv or steps.parquet.",
    )(func)
    return click.option(
        "--out",
        RESULT_DIR_ALIAS,
        "out",
        type=click.Path(path_type=Path, file_okay=False),
        help="Folder for kernel_launches, launch_summary and steps (default: the trace's "
        "folder). With several traces: one subfolder per rank (its file name without suffix) "
        "and steps_ranks.csv, launch_summary_ranks.csv, step_alignment.csv beside them.",
    )(func)


def _us(ns: float) -> str:
    return "n/a" if math.isnan(ns) else f"{ns / 1000:,.3f} us"


def _empty_steps_warning(analysis: WrittenAnalysis, where: str = "") -> None:
    """A warning on stderr when the trace has kernels with launch calls but its steps hold
    none: the launches come from another process than the steps' ranges (only the step's
    own process counts)."""
    s = analysis.summary
    if s.steps and analysis.kernels and not s.launch_calls_mean and not s.kernels_mean:
        click.echo(
            f"warning: {where}the {s.steps} step(s) hold no launch call although the trace "
            f"has {analysis.kernels} kernel(s) with their launch call: those were launched "
            "by another process than the one whose ranges make the steps (a step counts "
            "only its own process's launches; docs/traces.md). Profile the process that "
            "launches, or pick its ranges with --step-pattern",
            err=True,
        )


def _report(analysis: WrittenAnalysis) -> None:
    """Print the summary of one trace and the files written."""
    s = analysis.summary
    click.echo(f"{analysis.source}: {analysis.kernels} kernels with their launch call")
    click.echo(
        f"steps: {s.steps} ({s.step_source}); graph launches: {s.graph_launches_total}"
    )
    click.echo(
        "launch overhead per step (host time in kernel/graph launch calls): "
        f"mean {_us(s.launch_overhead_mean_ns)}, median {_us(s.launch_overhead_median_ns)}"
    )
    click.echo(
        f"per step: {s.launch_calls_mean:.1f} launch calls, {s.kernels_mean:.1f} kernels, "
        f"launch delay {_us(s.launch_delay_mean_ns)}, GPU idle {_us(s.gpu_idle_mean_ns)}, "
        f"wall {_us(s.wall_mean_ns)}"
    )
    click.echo("wrote " + ", ".join(str(p) for p in analysis.files))
    _empty_steps_warning(analysis)


def _run(
    kind: str,
    traces: tuple[Path, ...],
    out: Path | None,
    step_pattern: str | None,
    fmt: str,
    jobs: int | None,
    skip_bad_ranks: bool,
) -> None:
    paths = expand_inputs(list(traces), kind)
    workers = jobs or os.cpu_count() or 1
    if len(paths) == 1:
        out_dir = out or paths[0].parent
        _report(analyze_one(kind, paths[0], out_dir, step_pattern, fmt, workers))
        return
    result = analyze_ranks(
        paths,
        out or paths[0].parent,
        kind=kind,
        step_pattern=step_pattern,
        fmt=fmt,
        jobs=workers,
        skip_bad=skip_bad_ranks,
        on_done=lambda f, n, total: click.echo(
            f"analysed rank {f.rank} ({f.path.name}): {n} of {total}", err=True
        ),
    )
    for rank_file, reason in result.skipped:
        click.echo(f"skipped rank {rank_file.rank}: {reason}", err=True)
    for rank_file, analysis in result.ranks:
        click.echo(
            rank_summary_line(rank_file, analysis, main_device(analysis.launch_summary))
        )
        _empty_steps_warning(analysis, f"rank {rank_file.rank}: ")
    click.echo(f"{len(result.ranks)} ranks; steps aligned {result.aligned_by}")
    click.echo("wrote " + ", ".join(str(p) for p in result.files))


@click.group("analyze")
def analyze() -> None:
    """Launch overhead per decode step from profiler traces (CUDA-graph aware).

    Launch overhead per step = host time inside the kernel-launch and graph-launch API calls
    that start in the step, made by any thread of the step's process (sum of their durations;
    one cudaGraphLaunch counts once for all its kernels). Writes kernel_launches,
    launch_summary and steps tables; several traces (one per rank) are analysed in parallel
    and combined.
    """


@analyze.command("nsys")
@click.argument(
    "reports",
    nargs=-1,
    required=True,
    metavar="REPORT",
    type=click.Path(path_type=Path, exists=True),
)
@_options
def nsys(
    reports: tuple[Path, ...],
    out: Path | None,
    step_pattern: str | None,
    fmt: str,
    jobs: int | None,
    skip_bad_ranks: bool,
) -> None:
    """Analyze Nsight Systems SQLite exports (REPORT.sqlite from `nsys export --type sqlite`):
    one REPORT, several (one per rank), or folders of them. Streams each export in bounded
    memory."""
    _run("nsys", reports, out, step_pattern, fmt, jobs, skip_bad_ranks)


@analyze.command("kineto")
@click.argument(
    "traces",
    nargs=-1,
    required=True,
    metavar="TRACE",
    type=click.Path(path_type=Path, exists=True),
)
@_options
def kineto(
    traces: tuple[Path, ...],
    out: Path | None,
    step_pattern: str | None,
    fmt: str,
    jobs: int | None,
    skip_bad_ranks: bool,
) -> None:
    """Analyze PyTorch profiler (Kineto) traces: TRACE.json or TRACE.json.gz, one TRACE or
    several (one per rank), or folders of them."""
    _run("kineto", traces, out, step_pattern, fmt, jobs, skip_bad_ranks)
