"""What the terminal shows when a command has run: the results table, the warnings, what was
written and the answer. (While it runs: one line per stage, ``stage_lines``.)

Shared by ``trtbench loadtest``, ``trtbench run`` and ``trtbench follow-up``. Every header
names its statistic and unit (``TTFT p50 ms``: the median of the per-request TTFTs,
``TPOT mean ms``: the mean of the per-request TPOTs; summary.csv's columns, defined in
docs/metrics.md). The table keeps every column when the terminal is wide enough and falls
back to the key columns when it is not (a table squeezed into 80 columns would cut every
cell); the CSVs always hold all of them.
"""

from __future__ import annotations

from pathlib import Path

import click
import pandas as pd
from rich import box
from rich.console import Console
from rich.table import Table

from trtbench.core.data_files import read_json_document
from trtbench.core.errors import ServerDiedError, TrtbenchError
from trtbench.core.stop_signals import StopSignal
from trtbench.pipeline.loadtest import LoadtestOutcome
from trtbench.pipeline.recommend import RECOMMENDATION_JSON
from trtbench.profiling.report.recommendation_text import SCHEMA_VERSION
from trtbench.profiling.report.uncertainty import with_speedup_text

SPEEDUP_CI = "speedup [≥ 95 % CI]"
"""Under a speedup's name: the speedup of that figure against the baseline at the tier, the
geometric mean over rounds with its interval (one round: the pooled ratio, no interval): at
95 % for a fixed number of rounds; a race (``rounds: auto``) states it at the level of its
look, at least 95 % (``stats/decisions.py``; report.md's "Intervals" lines give each)."""
# (summary column, header, format): headers are "<figure>\n<statistic> <unit>";
# COMPACT_COLUMNS: the ones kept in a narrow terminal.
TABLE_COLUMNS = (
    ("variant", "variant", "{}"),
    ("tier", "tier", "{}"),
    ("tier_status", "status", "{}"),
    ("request_count", "requests", "{:.0f}"),
    ("error_count", "errors", "{:.0f}"),
    ("time_to_first_token_p50_ms", "TTFT\np50 ms", "{:.1f}"),
    ("time_per_output_token_mean_ms", "TPOT\nmean ms", "{:.2f}"),
    ("inter_token_latency_p50_ms", "ITL\np50 ms", "{:.2f}"),
    ("tokens_per_response_mean_tokens", "tok/resp\nmean", "{:.2f}"),
    ("output_token_throughput_tokens_per_s", "out\ntok/s", "{:.1f}"),
    ("request_throughput_per_s", "req/s", "{:.2f}"),
    ("acceptance_length_tokens", "accept len\npooled tok", "{:.2f}"),
    ("tpot_speedup_text", f"TPOT mean\n{SPEEDUP_CI}", "{}"),  # 1.21x [1.10, 1.32]
    ("output_token_throughput_speedup_text", f"out tok/s\n{SPEEDUP_CI}", "{}"),
)


COMPACT_COLUMNS = tuple(
    c
    for c in TABLE_COLUMNS
    if c[0]
    in (
        "variant",
        "tier",
        "error_count",
        "time_to_first_token_p50_ms",
        "time_per_output_token_mean_ms",
        "output_token_throughput_tokens_per_s",
        "acceptance_length_tokens",
        "tpot_speedup_text",
    )
)


def results_table(title: str) -> Table:
    """An empty table in the terminal's style: a rule under the header, no frame."""
    return Table(
        title=title,
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
    )


def comparison_table(
    summary: pd.DataFrame, columns: tuple[tuple[str, str, str], ...] = TABLE_COLUMNS
) -> Table:
    """The summary as a terminal table (one row per variant × tier)."""
    table = results_table("load test: variants side by side")
    summary = with_speedup_text(summary)  # speedups with their 95 % interval
    for _, header, _ in columns:
        table.add_column(
            header,
            justify="left" if header in ("variant", "tier") else "right",
            no_wrap=True,
        )
    for _, row in summary.iterrows():
        cells = []
        for name, _, fmt in columns:
            value = row.get(name)
            cells.append("-" if value is None or pd.isna(value) else fmt.format(value))
        table.add_row(*cells)
    return table


def fitting_table(summary: pd.DataFrame, console: Console) -> tuple[Table, bool]:
    """The full table when it fits ``console``'s width, else the compact one.

    Returns:
        (table, whether it is the compact one).
    """
    full = comparison_table(summary)
    # measured at its natural width, not squeezed to the screen's
    unbounded = console.options.update_width(10_000)
    if console.measure(full, options=unbounded).maximum <= console.width:
        return full, False
    return comparison_table(summary, COMPACT_COLUMNS), True


def unfinished_tiers(summary: pd.DataFrame) -> list[str]:
    """One line per tier that is not complete: it is not a measurement."""
    if "tier_status" not in summary.columns:
        return []
    bad = summary[summary["tier_status"].fillna("complete") != "complete"]
    return [
        f"{r['variant']} {r['tier']} is {r['tier_status']}"
        + (
            f" ({r['tier_status_reason']})"
            if isinstance(r.get("tier_status_reason"), str) and r["tier_status_reason"]
            else ""
        )
        + ": not a measurement, no speedup computed from it"
        for _, r in bad.iterrows()
    ]


def _answer(root: Path) -> str | None:
    """recommendation.json's one-line ``answer`` (None when absent or unreadable: the
    report said why)."""
    try:
        doc = read_json_document(
            root / RECOMMENDATION_JSON,
            max_schema_version=SCHEMA_VERSION,
            fix=f"render it again with `trtbench report {root}`",
        )
    except TrtbenchError:
        return None
    answer = doc.get("answer")
    return answer if isinstance(answer, str) and answer else None


def say_answer(answer: str | None, report: Path | None) -> None:
    """The lines every command that renders a report ends with (``trtbench run``,
    ``report``, ``collect``): ``recommendation: <sentence>`` and ``report: <report.md>``,
    then ``page: <report.html>`` where the page was written beside it; nothing without a
    sentence or a report."""
    if answer and report is not None:
        click.echo(f"\nrecommendation: {answer}\nreport: {report}")
        if (page := report.with_suffix(".html")).is_file():
            click.echo(f"page: {page}")


def written_line(outcome: LoadtestOutcome) -> str | None:
    """One line for every file the outcome wrote: ``wrote RUN/loadtest/{requests.csv,…},
    RUN/report.md, 6 plots in RUN/plots/`` (a folder's one file by name, several by count;
    None when nothing was written)."""
    csvs = [
        p.name
        for p in (
            outcome.run_dir.requests_csv,
            outcome.run_dir.responses_csv,
            outcome.run_dir.summary_csv,
        )
        if not outcome.summary.empty and p.is_file()
    ]
    parts = []
    if csvs:
        names = csvs[0] if len(csvs) == 1 else "{" + ",".join(csvs) + "}"
        parts.append(f"{outcome.run_dir.loadtest_dir}/{names}")
    by_folder: dict[Path, list[Path]] = {}
    for path in map(Path, outcome.files):
        if path.is_file():
            by_folder.setdefault(path.parent, []).append(path)
    for folder, paths in by_folder.items():
        if len(paths) == 1:
            parts.append(str(paths[0]))
            continue
        kind = "plots" if all(p.suffix == ".png" for p in paths) else "files"
        parts.append(f"{len(paths)} {kind} in {folder}/")
    return "wrote " + ", ".join(parts) if parts else None


def print_outcome(outcome: LoadtestOutcome, results: bool = True) -> None:
    """Print the comparison table, the warnings, what was written and the answer
    (``results`` False: the warnings and what was written only, for a command whose own
    table is the answer: ``trtbench follow-up``).

    Raises:
        StopSignal: the run was stopped by a signal (after printing).
        ServerDiedError: a server died (after printing).
    """
    if results:
        console = Console()
        if not console.is_terminal:  # piped or captured: do not squeeze into 80 columns
            console = Console(width=160)
        table, compact = fitting_table(outcome.summary, console)
        console.print(table)
        if compact:
            report = any(p.name == "report.md" for p in outcome.files)
            click.echo(
                f"(key columns for a {console.width}-column terminal; every column is "
                f"in {outcome.run_dir.summary_csv}{' and report.md' if report else ''})"
            )
    for warning in outcome.warnings + unfinished_tiers(outcome.summary):
        click.echo(f"warning: {warning}", err=True)
    if line := written_line(outcome):
        click.echo(line)
    report = next((Path(p) for p in outcome.files if Path(p).name == "report.md"), None)
    if results and report is not None:
        say_answer(_answer(outcome.run_dir.root), report)
    if outcome.stop_signal is not None:
        statuses = outcome.summary.get("tier_status", pd.Series(dtype=str))
        if (statuses == "interrupted").any():
            click.echo(
                "kept every finished request; the stopped tier is marked interrupted",
                err=True,
            )
        raise StopSignal(outcome.stop_signal)  # trtbench.cli.main: exit 128 + signal
    if outcome.failures:
        raise ServerDiedError("; ".join(outcome.failures) + "; finished tiers are kept")
