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
from trtbench.pipeline.dry_run import plan_run, render_run_plan
from trtbench.pipeline.preflight import preflight_run
from trtbench.pipeline.run import run_bench
from trtbench.spec.bench import load_spec


@click.command("run")
@spec_argument
@variants_option("run", "every variant in the spec")
@run_dir_option()
@click.option(
    "--concurrency",
    default=None,
    help="Closed-loop tiers, comma-separated (1,2,4): replaces loadtest.concurrency.",
)
@click.option(
    "--rounds",
    default=None,
    metavar="N|auto",
    help="Rounds, or auto (rounds by need): replaces loadtest.rounds.",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Check everything a run checks before its first build and print the plan "
    "(variants, tiers, design, cells, requests, what this machine lacks); build, start "
    "and write nothing.",
)
@slurm_options
def run(
    spec: Path,
    variants: tuple[str, ...],
    out: Path | None,
    concurrency: str | None,
    rounds: str | None,
    dry_run: bool,
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
    (docs/slurm.md).

    `--concurrency` and `--rounds` replace the spec's `loadtest.concurrency` and
    `loadtest.rounds` (validated as the spec's fields are). `--dry-run` checks what a run
    checks before its first build and prints the plan; a GPU, tensorrt_llm or a server
    executable this machine lacks is named, not an error.
    """
    bench = load_spec(spec, *spec_overrides(concurrency, rounds))
    run_dir = spec_run_dir(out, bench.name)
    on_slurm = (executor or bench.cluster.executor) == "slurm"
    if on_slurm and (concurrency is not None or rounds is not None):
        raise click.UsageError(
            "--concurrency and --rounds do not reach the Slurm shards (each runs the "
            "spec file); set loadtest.concurrency / loadtest.rounds in the spec"
        )
    if not on_slurm and given_slurm_options(slurm):
        raise click.UsageError(
            f"{', '.join(given_slurm_options(slurm))} need --executor slurm"
        )
    if dry_run:
        click.echo(render_run_plan(plan_run(bench, run_dir, variants, str(spec))))
        if on_slurm:
            click.echo("executor slurm: this is the plan of one local run (no shards)")
        return
    if on_slurm:
        # checked first; then the lock (the shards lock RUN_DIR/shards/s<K>, each its own)
        options = with_spec_cluster(bench.cluster, slurm)
        run_slurm(
            bench, spec, run_dir, variants, options, lambda: claim_run_dir(run_dir)
        )
        return
    prompts = preflight_run(bench, run_dir, variants, str(spec))  # before any build
    claim_run_dir(run_dir)
    with StageLines() as progress:
        outcome = run_bench(bench, run_dir, variants, progress, prompts, checked=True)
    print_outcome(outcome)


def spec_overrides(
    concurrency: str | None, rounds: str | None
) -> tuple[dict[str, object], str]:
    """``loadtest`` fields from ``--concurrency`` / ``--rounds`` (as the spec would write
    them, validated with it) and the options, for messages."""
    fields: dict[str, object] = {}
    given = []
    if concurrency is not None:
        fields["concurrency"] = [part.strip() for part in concurrency.split(",")]
        given.append(f"--concurrency {concurrency}")
    if rounds is not None:
        fields["rounds"] = rounds.strip()
        given.append(f"--rounds {rounds}")
    return fields, " ".join(given)
