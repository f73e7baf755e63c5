"""What the terminal shows when a command has run: the results. (While it runs: one line per
stage, ``stage_lines``.)

Shared by ``trtbench loadtest`` and ``trtbench run``. The results table keeps every column
when the terminal is wide enough and falls back to the key columns when it is not (a table
squeezed into 80 columns would cut every cell); the CSVs always hold all of them.
"""

from __future__ import annotations

from pathlib import Path

import click
import pandas as pd
from rich.console import Console
from rich.table import Table

from trtbench.core.data_files import read_json_document
from trtbench.core.errors import ServerDiedError, TrtbenchError
from trtbench.core.stop_signals import StopSignal
from trtbench.pipeline.loadtest import LoadtestOutcome
from trtbench.pipeline.recommend import RECOMMENDATION_JSON
from trtbench.profiling.report.recommendation_text import SCHEMA_VERSION
from trtbench.profiling.report.uncertainty import with_speedup_text

# (summary column, header, format); COMPACT_COLUMNS: the ones kept in a narrow terminal,
# with shorter headers.
TABLE_COLUMNS = (
    ("variant", "variant", "{}"),
    ("tier", "tier", "{}"),
    ("tier_status", "status", "{}"),
    ("request_count", "requests", "{:.0f}"),
    ("error_count", "errors", "{:.0f}"),
    ("time_to_first_token_p50_ms", "TTFT p50 ms", "{:.1f}"),
    ("time_per_output_token_mean_ms", "TPOT ms", "{:.2f}"),
    ("inter_token_latency_p50_ms", "ITL p50 ms", "{:.2f}"),
    ("tokens_per_response_mean_tokens", "tok/resp", "{:.2f}"),
    ("output_token_throughput_tokens_per_s", "out tok/s", "{:.1f}"),
    ("request_throughput_per_s", "req/s", "{:.2f}"),
    ("acceptance_length_tokens", "accept len", "{:.2f}"),
    ("tpot_speedup_text", "TPOT speedup", "{}"),  # 1.21x [1.10, 1.32] with repeats
    ("output_token_throughput_speedup_text", "tok/s speedup", "{}"),
)


COMPACT_COLUMNS = (
    ("variant", "variant", "{}"),
    ("tier", "tier", "{}"),
    ("error_count", "err", "{:.0f}"),
    ("time_to_first_token_p50_ms", "TTFT ms", "{:.1f}"),
    ("time_per_output_token_mean_ms", "TPOT ms", "{:.2f}"),
    ("output_token_throughput_tokens_per_s", "tok/s", "{:.1f}"),
    ("acceptance_length_tokens", "acc len", "{:.2f}"),
    ("tpot_speedup_text", "speedup", "{}"),
)


def comparison_table(
    summary: pd.DataFrame, columns: tuple[tuple[str, str, str], ...] = TABLE_COLUMNS
) -> Table:
    """The summary as a terminal table (one row per variant × tier)."""
    table = Table(title="load test: variants side by side")
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


def print_outcome(outcome: LoadtestOutcome) -> None:
    """Print the comparison table, the warnings, where the CSVs are and other files."""
    console = Console()
    if not console.is_terminal:  # piped or captured: do not squeeze into 80 columns
        console = Console(width=160)
    table, compact = fitting_table(outcome.summary, console)
    console.print(table)
    if compact:
        report = any(p.name == "report.md" for p in outcome.files)
        click.echo(
            f"(key columns for a {console.width}-column terminal; every column is in "
            f"{outcome.run_dir.summary_csv}{' and report.md' if report else ''})"
        )
    for warning in outcome.warnings + unfinished_tiers(outcome.summary):
        click.echo(f"warning: {warning}", err=True)
    written = [
        p.name
        for p in (
            outcome.run_dir.requests_csv,
            outcome.run_dir.responses_csv,
            outcome.run_dir.summary_csv,
        )
        if not outcome.summary.empty and p.is_file()
    ]
    if written:
        names = written[0] if len(written) == 1 else "{" + ",".join(written) + "}"
        click.echo(f"wrote {outcome.run_dir.loadtest_dir}/{names}")
    for path in outcome.files:
        if Path(path).is_file():
            click.echo(f"wrote {path}")
    report = next((Path(p) for p in outcome.files if Path(p).name == "report.md"), None)
    if report is not None and (answer := _answer(outcome.run_dir.root)):
        click.echo(f"\nrecommendation: {answer}\nreport: {report}")
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
