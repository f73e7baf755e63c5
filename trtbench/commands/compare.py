"""``trtbench compare RUN_A RUN_B``: the same metrics side by side, with B / A ratios.

Either run may be an AIPerf artifact directory (``[NAME=]DIR``; ``trtbench/pipeline/peers.py``)."""

from __future__ import annotations

from pathlib import Path

import click

from trtbench.commands.options import run_dir_argument
from trtbench.pipeline.report import compare_runs


@click.command("compare")
@run_dir_argument("run_a")
@run_dir_argument("run_b")
@click.option(
    "--out",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Also write the Markdown here.",
)
def compare(run_a: Path, run_b: Path, out: Path | None) -> None:
    """Compare RUN_A and RUN_B per variant and tier, with B / A ratios.

    For example CUDA graphs off (A) against on (B). Either may be an AIPerf artifact
    directory (or a folder of them, one per concurrency), labelled by its folder name or by
    NAME in NAME=DIR: name it after a variant of the other run to pair their rows
    (docs/peers.md).

    Prints TTFT, TPOT, E2E, output tok/s, tokens per step and speedup of both runs with
    their ratios, then memory and launch overhead per step when both runs have them.
    """
    result = compare_runs(run_a, run_b, out)
    click.echo(result.markdown, nl=False)
    if result.path is not None:
        click.echo(f"\nwrote {result.path} and {result.path.with_suffix('.html')}")
