"""``trtbench run``: the whole benchmark of a spec, ending with the table and the report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from trtbench.commands.claim import claim_run_dir
from trtbench.commands.cluster import (
    given_slurm_options,
    run_slurm,
    slurm_options,
    with_spec_cluster,
)
from trtbench.commands.options import (
    run_dir_option,
    spec_argument,
    spec_run_dir,
    variants_option,
)
from trtbench.commands.stage_lines import StageLines
from trtbench.commands.terminal import print_outcome
from trtbench.pipeline.preflight import preflight_run
from trtbench.pipeline.run import run_bench
from trtbench.spec.bench import load_spec


@click.command("run")
@spec_argument
@variants_option("run", "every variant in the spec")
@run_dir_option()
@slurm_options
def run(
    spec: Path,
    variants: tuple[str, ...],
    out: Path | None,
    executor: str | None,
    **slurm: Any,
) -> None:
    """Build, deploy, load-test and profile SPEC's variants; print them side by side.

    One server per variant; by default all stay up and the (tier, variant) cells run in
    shuffled interleaved rounds (`loadtest.design`). Writes RUN_DIR/loadtest/*.csv,
    memory.csv, server_metrics.csv, memory_breakdown.csv and run.json, then renders
    report.md and plots/*.png from them (as `trtbench report RUN_DIR`). With
    `profile: {nsys: true, nsys_tier: I}` each server runs under Nsight Systems and tier I
    (0-based) is recorded into RUN_DIR/traces/<variant>/ with its launch-overhead CSVs.

    With `--executor slurm` (or the spec's `cluster: {executor: slurm}`) the variants run
    as shards of a Slurm job array, each beside the baseline, and are gathered into RUN_DIR
    (README: Running on a Slurm cluster).
    """
    bench = load_spec(spec)
    run_dir = spec_run_dir(out, bench.name)
    if (executor or bench.cluster.executor) == "slurm":
        # checked first; then the lock (the shards lock RUN_DIR/shards/s<K>, each its own)
        options = with_spec_cluster(bench.cluster, slurm)
        run_slurm(
            bench, spec, run_dir, variants, options, lambda: claim_run_dir(run_dir)
        )
        return
    if given_slurm_options(slurm):
        raise click.UsageError(
            f"{', '.join(given_slurm_options(slurm))} need --executor slurm"
        )
    prompts = preflight_run(bench, run_dir, variants, str(spec))  # before any build
    claim_run_dir(run_dir)
    with StageLines() as progress:
        outcome = run_bench(bench, run_dir, variants, progress, prompts, checked=True)
    print_outcome(outcome)
