"""``trtbench follow-up RUN_DIR``: serve the recommended config over the run's tiers again and
check it against the best fixed variant at every tier."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from trtbench.commands.claim import claim_run_dir
from trtbench.commands.options import run_dir_argument
from trtbench.commands.stage_lines import StageLines
from trtbench.commands.terminal import print_outcome, results_table
from trtbench.core.errors import CheckFailedError
from trtbench.core.run_lock import run_dir_lock
from trtbench.pipeline.followup import (
    DEFAULT_ROUNDS,
    FollowUpResult,
    plan_follow_up,
    run_follow_up,
    skip_follow_up,
)
from trtbench.profiling.report.followup_check import (
    check_rows,
    verdict_line,
)

RATIO = "ratio\ngeo mean [≥ 95 % CI]"
"""Under a stage's name: the objective's per-round ratio recommended / best, paired by round,
its geometric mean over the rounds with an interval of at least 95 % (``followup_check``)."""
CHECK_COLUMNS = (
    "tier",
    "best fixed\nvariant",
    f"rec/best {RATIO}",
    f"confirm {RATIO}",
    "pass",
)
"""The terminal's headers of :data:`CHECK_HEADER`'s columns; the pass column holds the mark
alone, the reasons follow the table (:func:`check_reasons`), so a row fits 80 columns."""


def check_table(doc: Mapping[str, Any]) -> Table:
    """The check of ``check.json`` as a terminal table (one row per tier)."""
    obj = doc.get("objective") or {}
    table = results_table(
        f"follow-up check: {obj.get('label')} ({obj.get('unit')}), paired by round"
    )
    for i, header in enumerate(CHECK_COLUMNS):
        table.add_column(header, justify="left" if i < 2 else "right")
    for row in check_rows(doc):
        table.add_row(*row[:-1], row[-1].split(":", 1)[0])
    return table


def check_reasons(doc: Mapping[str, Any]) -> list[str]:
    """The tiers' reasons, one line per reason: ``c1, c4: not significantly worse (…)``."""
    tiers: dict[str, list[str]] = {}
    for t in doc.get("tiers") or []:
        tiers.setdefault(str(t.get("reason")), []).append(str(t.get("tier")))
    return [f"{', '.join(labels)}: {reason}" for reason, labels in tiers.items()]


def _print_check(result: FollowUpResult) -> None:
    console = Console()
    if not console.is_terminal:  # piped or captured: do not squeeze into 80 columns
        console = Console(width=160)
    if result.document.get("tiers"):
        console.print(check_table(result.document))
        for line in check_reasons(result.document):
            click.echo(line)
    click.echo(verdict_line(result.document))
    for warning in result.warnings:
        click.echo(f"warning: {warning}", err=True)
    report = result.report_path
    section = "" if report is None else f", {report} (section: Follow-up check)"
    click.echo(f"wrote {result.check_path}{section}")


@click.command("follow-up")
@run_dir_argument()
@click.option(
    "--rounds",
    type=click.IntRange(min=3, max=100),
    default=DEFAULT_ROUNDS,
    show_default=True,
    help="Interleaved rounds of the check (and of its confirmation, if one is needed): "
    "the budget of a race that stops each tier once decided, where one can run.",
)
@click.option(
    "--force",
    is_flag=True,
    help="Measure even when the recommended config is a variant the run measured as is "
    "(by default that is skipped: the run's own rounds compared it side by side).",
)
@click.pass_context
def follow_up(ctx: click.Context, run_dir: Path, rounds: int, force: bool) -> None:
    """Check RUN_DIR's recommendation by measuring it again, side by side.

    Serves the recommended config (RUN_DIR/recommendation.json: the winning variant with the
    snippet's `speculation:`, or the baseline when no speculative variant wins) beside the
    run's best fixed variant of each tier, in interleaved rounds (each round runs the two
    back to back at every tier, in a shuffled order), into RUN_DIR/follow-up/. At each tier
    it compares them by the paired ratio recommended / best over the rounds: a tier whose
    95 % interval lies below 1 is measured again in fresh rounds (RUN_DIR/follow-up/confirm/)
    and fails only if that confirms it. Writes RUN_DIR/follow-up/check.json and renders
    RUN_DIR/report.md again with a "Follow-up check" section.

    When the recommended config is a variant the run measured, as it ran (no `speculation:`
    policy), the run's interleaved rounds already compared it with the best fixed variant of
    every tier: nothing is measured, check.json says `skipped` and why (`--force` measures).

    Exit status: 0 when every tier passes or the check is skipped, 1 when a tier fails or could not be checked, 2
    for bad input (no recommendation.json, no recorded spec, --rounds below 3).
    """
    plan = plan_follow_up(run_dir, rounds)  # every input checked before the first build
    claim_run_dir(plan.run)
    ctx.with_resource(run_dir_lock(plan.out.root, ctx.command_path))
    if plan.measured and not force:
        _print_check(skip_follow_up(plan))
        return
    with StageLines() as progress:
        result = run_follow_up(plan, progress)
    try:  # the check table below is the answer: the stage's own table is in its report
        if result.outcome is not None:
            print_outcome(
                result.outcome, results=False
            )  # raises: a stop, a dead server
    finally:
        _print_check(result)
    doc = result.document
    if doc.get("verdict") == "fail":
        raise CheckFailedError(
            f"follow-up check failed at {', '.join(doc['failed'])}: the recommended config "
            f"is significantly worse than the best fixed variant, measured side by side "
            f"and confirmed in fresh rounds; see {result.check_path}"
        )
    if not doc.get("passed"):
        unchecked = ", ".join(doc.get("unchecked") or []) or "no tier"
        raise CheckFailedError(
            f"follow-up check incomplete: {unchecked} could not be checked; see "
            f"{result.check_path}"
        )
