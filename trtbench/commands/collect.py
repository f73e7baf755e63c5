"""``trtbench collect RUN_DIR``: gather a cluster run submitted with ``--no-wait``."""

from __future__ import annotations

from pathlib import Path

import click

from trtbench.cluster.driver import collect as collect_run
from trtbench.commands.claim import claim_run_dir
from trtbench.commands.cluster import print_cluster_outcome, say
from trtbench.commands.options import run_dir_argument
from trtbench.core.run_dir import RunDir


@click.command("collect")
@run_dir_argument()
@click.option(
    "--no-wait",
    is_flag=True,
    help="Gather what finished now, without waiting for shards still queued or running.",
)
@click.option(
    "--poll-s",
    type=float,
    default=None,
    help="Seconds between two looks at the queue. Default: the run's --poll-s.",
)
def collect(run_dir: Path, no_wait: bool, poll_s: float | None) -> None:
    """Wait for RUN_DIR's Slurm shards (`trtbench run --executor slurm --no-wait`) and
    merge them into RUN_DIR: summary.csv, acceptance.csv, memory files, report.md,
    recommendation.json. A shard that did not finish gives a partial run (exit 1) naming
    it; Ctrl-C or SIGTERM cancels every job (scancel) and keeps what finished.
    """
    rd = RunDir(Path(run_dir))
    if not rd.root.is_dir():
        raise click.BadParameter(f"{run_dir} is not a directory", param_hint="RUN_DIR")
    claim_run_dir(rd)
    print_cluster_outcome(collect_run(rd, not no_wait, poll_s, say))
