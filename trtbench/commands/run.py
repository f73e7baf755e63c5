"""``trtbench run``: the whole benchmark of a spec, ending with the table and the report."""

from __future__ import annotations

from pathlib import Path

import click

from trtbench.commands.loadtest import TierProgress, print_outcome
from trtbench.pipeline import run_bench
from trtbench.run_dir import RunDir
from trtbench.spec import load_spec


@click.command("run")
@click.argument("spec", type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--variant",
    "variants",
    multiple=True,
    help="Variant to run (repeatable). Default: every variant in the spec.",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Run directory. Default: runs/<spec name>.",
)
def run(spec: Path, variants: tuple[str, ...], out: Path | None) -> None:
    """Build, deploy, load-test and profile SPEC's variants; print them side by side.

    One tritonserver per variant, stopped after its tiers. Writes RUN_DIR/loadtest/*.csv,
    memory.csv, server_metrics.csv, memory_breakdown.csv and run.json, then renders
    report.md and plots/*.png from them (as `trtbench report RUN_DIR`).
    """
    bench = load_spec(spec)
    run_dir = RunDir(out if out is not None else Path("runs") / bench.name)
    outcome = run_bench(bench, run_dir, variants, progress=TierProgress())
    print_outcome(outcome)
