"""``trtbench profile``: record profiler traces of a command (Nsight Systems)."""

from __future__ import annotations

from pathlib import Path

import click

from trtbench.commands.options import RESULT_DIR_ALIAS
from trtbench.pipeline.preflight import check_writable
from trtbench.profiling.traces.nsys_profile import NsysProfileSpec, run_nsys_profile


@click.group("profile")
def profile() -> None:
    """Record traces for launch-overhead analysis (then run `trtbench analyze`)."""


@profile.command("nsys", context_settings={"ignore_unknown_options": True})
@click.option(
    "--out",
    RESULT_DIR_ALIAS,
    "out",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("traces"),
    show_default=True,
    help="Folder for NAME.nsys-rep and NAME.sqlite.",
)
@click.option("--name", default="report", show_default=True, help="Report file stem.")
@click.option(
    "--capture-range",
    type=click.Choice(["none", "nvtx", "cudaProfilerApi"]),
    default="none",
    show_default=True,
    help="Record only inside an NVTX range or between cudaProfilerStart/Stop.",
)
@click.option(
    "--nvtx-capture", metavar="RANGE[@DOMAIN]", help="NVTX range that starts capture."
)
@click.option(
    "--cuda-graph-trace",
    type=click.Choice(["node", "graph"]),
    default="node",
    show_default=True,
    help="node: one row per kernel of a graph replay (needed to attribute kernels).",
)
@click.option(
    "--nsys",
    "nsys_path",
    type=click.Path(path_type=Path, dir_okay=False),
    help="nsys executable (default: PATH, /usr/local/cuda/bin, /opt/nvidia/nsight-systems).",
)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def nsys(
    out: Path,
    name: str,
    capture_range: str,
    nvtx_capture: str | None,
    cuda_graph_trace: str,
    nsys_path: Path | None,
    command: tuple[str, ...],
) -> None:
    """Run COMMAND under `nsys profile` (CUDA + NVTX tracing, no CPU sampling) and export SQLite.

    Example: trtbench profile nsys --out traces -- python -m my_server --port 8001
    """
    check_writable(out)
    spec = NsysProfileSpec(out, name, capture_range, nvtx_capture, cuda_graph_trace)  # type: ignore[arg-type]
    result = run_nsys_profile(spec, list(command), nsys_path)
    click.echo(f"command exited with {result.returncode}")
    click.echo(f"wrote {result.report_path} and {result.sqlite_path}")
    click.echo(f"next: trtbench analyze nsys {result.sqlite_path}")
