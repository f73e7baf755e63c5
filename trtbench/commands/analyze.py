"""``trtbench analyze``: kernel-launch tables from Nsight Systems and PyTorch profiler traces."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import click

from trtbench.profiling.traces.kineto import analyze_kineto_trace
from trtbench.profiling.traces.launches import LaunchAnalysis
from trtbench.profiling.traces.nsys import analyze_nsys_report
from trtbench.profiling.traces.table_io import FORMATS, write_trace_tables


def _options(func: Callable) -> Callable:
    func = click.option(
        "--step-pattern",
        metavar="REGEX",
        help="Regular expression (searched) naming the ranges that are decode steps. Default: "
        "decode_step#N / ProfilerStep#N ranges if any, else graph-launch boundaries, else the "
        "whole trace as one step.",
    )(func)
    func = click.option(
        "--format",
        "fmt",
        type=click.Choice(FORMATS),
        default="csv",
        show_default=True,
        help="Table format: csv (kernel_launches.csv, ...) or parquet (kernel_launches.parquet, "
        "..., the same columns, typed: int64 with nulls, float64, dictionary strings; several "
        "times smaller and faster to write). `trtbench report` reads steps.csv or steps.parquet.",
    )(func)
    return click.option(
        "--out",
        type=click.Path(path_type=Path, file_okay=False),
        help="Folder for kernel_launches, launch_summary and steps (.csv or .parquet) "
        "(default: the trace's folder).",
    )(func)


def _us(ns: float) -> str:
    return "n/a" if math.isnan(ns) else f"{ns / 1000:,.3f} us"


def _report(analysis: LaunchAnalysis, out: Path, fmt: str) -> None:
    """Write the three tables (CSV or Parquet) and print the summary."""
    written = write_trace_tables(analysis.tables(), out, fmt)
    s = analysis.summary
    click.echo(
        f"{analysis.source}: {len(analysis.kernel_launches)} kernels with their launch call"
    )
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
    click.echo("wrote " + ", ".join(str(p) for p in written))


@click.group("analyze")
def analyze() -> None:
    """Launch overhead per decode step from profiler traces (CUDA-graph aware).

    Launch overhead per step = host time inside the kernel-launch and graph-launch API calls
    that start in the step (sum of their durations; one cudaGraphLaunch counts once for all
    its kernels). Writes kernel_launches.csv, launch_summary.csv and steps.csv (or, with
    --format parquet, the same tables as .parquet files).
    """


@analyze.command("nsys")
@click.argument("report", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@_options
def nsys(report: Path, out: Path | None, step_pattern: str | None, fmt: str) -> None:
    """Analyze an Nsight Systems SQLite export (REPORT.sqlite from `nsys export --type sqlite`)."""
    _report(analyze_nsys_report(report, step_pattern), out or report.parent, fmt)


@analyze.command("kineto")
@click.argument("trace", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@_options
def kineto(trace: Path, out: Path | None, step_pattern: str | None, fmt: str) -> None:
    """Analyze a PyTorch profiler (Kineto) trace: TRACE.json or TRACE.json.gz."""
    _report(analyze_kineto_trace(trace, step_pattern), out or trace.parent, fmt)
