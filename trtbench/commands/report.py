"""``trtbench report RUN_DIR``: report.md and plots/*.png from the run directory's CSVs."""

from __future__ import annotations

from pathlib import Path

import click

from trtbench.cluster.state import state_path
from trtbench.commands.claim import claim_run_dir
from trtbench.commands.options import run_dir_argument
from trtbench.commands.terminal import say_answer
from trtbench.core.errors import ConfigError
from trtbench.core.run_dir import RunDir
from trtbench.pipeline.recommend import RECOMMENDATION_JSON
from trtbench.pipeline.report import write_report
from trtbench.spec.report import OBJECTIVES


@click.command("report")
@run_dir_argument()
@click.option(
    "--peer",
    "peers",
    multiple=True,
    metavar="[NAME=]DIR",
    help="An AIPerf artifact directory (or a folder of them) shown beside the run's "
    "variants, labelled NAME or by its folder name (repeatable; docs/peers.md).",
)
@click.option(
    "--objective",
    type=click.Choice(OBJECTIVES),
    default=None,
    help="What the Recommendation ranks variants by (default: the spec's "
    "report.objective, else output_tok_s); goodput needs loadtest SLOs.",
)
def report(run_dir: Path, peers: tuple[str, ...], objective: str | None) -> None:
    """Render RUN_DIR/report.md, recommendation.json and plots/*.png from the CSVs alone.

    report.md opens with the Recommendation (best variant per tier, crossover, memory,
    the config that implements it). The comparison matrix (extra memory, the objective's
    ratio over the baseline at low and high concurrency, tokens per step, TTFT, TPOT,
    output tok/s, CUDA graphs) is also printed; the last lines are the recommendation
    sentence and the path of report.md.
    """
    rd = RunDir(Path(run_dir))
    if state_path(rd).is_file():
        # a merged cluster run has one baseline per shard: the ordinary report would take
        # one of them for every shard's variants and compare across nodes
        raise click.UsageError(
            f"{run_dir} is a cluster run (cluster/state.json): its report, with within-shard "
            f"speedups only, is `trtbench collect {run_dir} --no-wait`; one shard's full "
            f"report: `trtbench report {run_dir}/shards/s<K>`"
        )
    if Path(run_dir).is_dir() and not rd.summary_csv.is_file():
        # nothing to render: said before the lock, so the folder is left as it was
        raise ConfigError(
            f"{rd.summary_csv} is missing; run `trtbench run SPEC` or `trtbench loadtest` "
            "into this run directory first"
        )
    if Path(run_dir).is_dir():  # it writes report.md and plots: one writer at a time
        claim_run_dir(rd)
    result = write_report(run_dir, peers, objective)
    click.echo(result.matrix_markdown)
    folders = {p.parent for p in result.plot_paths}
    plots = f", {len(result.plot_paths)} plots in {folders.pop()}/" if folders else ""
    json_path = result.report_path.parent / RECOMMENDATION_JSON
    click.echo(f"\nwrote {result.report_path}, {json_path}{plots}")
    say_answer(result.answer, result.report_path)  # last, as `trtbench run` ends
