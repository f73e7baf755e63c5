"""The load test's files: records streamed per variant while its tiers run, merged at the end
into ``loadtest/{requests,responses,summary,rounds,acceptance,outputs}.csv``.

:func:`record_files` names where a variant's records stream (``loadtest/parts/``);
:func:`write_loadtest` merges them with the rows of other variants already there, computes
the summary from the files (:mod:`trtbench.profiling.loadtest.stats.trusted_summary`), the rounds
table with each cell's host load (:mod:`trtbench.profiling.loadtest.files.rounds_table`), the
lossless gate, the client's event-loop lag and the server's speculative counts, and writes
them all.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from trtbench.core.data_files import read_csv_checked
from trtbench.core.errors import LoadTestError
from trtbench.core.export import write_csv
from trtbench.core.run_dir import RunDir
from trtbench.profiling.loadtest.clients.server_counts import add_server_counts
from trtbench.profiling.loadtest.files.outputs import OUTPUTS_CSV, merge_outputs
from trtbench.profiling.loadtest.files.rounds_table import (
    ROUNDS_SCHEMA,
    CellTiming,
    interference_summary,
    interference_warnings,
    rounds_table,
)
from trtbench.profiling.loadtest.files.schemas import (
    REQUESTS_SCHEMA,
    RESPONSES_SCHEMA,
    SUMMARY_SCHEMA,
    read_records_csv,
    requests_table,
)
from trtbench.profiling.loadtest.records.client_timing import (
    add_loop_lag,
    client_warnings,
    tier_loop_lags,
)
from trtbench.profiling.loadtest.records.outcome import LoadResult
from trtbench.profiling.loadtest.records.record_sink import RecordFiles
from trtbench.profiling.loadtest.stats.acceptance import (
    ACCEPTANCE_SCHEMA,
    acceptance_table,
)
from trtbench.profiling.loadtest.stats.categories import (
    CATEGORY_ACCEPTANCE_SCHEMA,
    CATEGORY_SCHEMA,
    category_acceptance_table,
    category_table,
)
from trtbench.profiling.loadtest.stats.decisions import recorded_schedule
from trtbench.profiling.loadtest.stats.lossless import lossless_warnings, with_lossless
from trtbench.profiling.loadtest.stats.metrics import TierStatuses, osl_warnings
from trtbench.profiling.loadtest.stats.trusted_summary import summarize_trusted

STATUS_COLUMNS = ("variant", "tier", "tier_status", "tier_status_reason")


def record_files(run_dir: RunDir, variant: str) -> RecordFiles:
    """Where ``variant``'s records stream during its tiers: ``loadtest/parts/<variant>.*.csv``.

    They are merged into ``requests.csv`` / ``responses.csv`` by :func:`write_loadtest`
    and removed; parts left behind by a killed process are replaced by the next
    measurement of that variant.
    """
    parts = run_dir.loadtest_dir / "parts"
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", variant)  # a --variant label is free text
    return RecordFiles(
        parts / f"{stem}.requests.csv",
        parts / f"{stem}.responses.csv",
        parts / f"{stem}.outputs.csv",
    )


def _existing(path: Path, replace: set[str]) -> pd.DataFrame | None:
    if not path.is_file():
        return None
    old = read_records_csv(path)
    return old[~old["variant"].isin(replace)]


def _old_statuses(run_dir: RunDir, keep: set[str]) -> TierStatuses:
    """Tier statuses of the variants kept from an earlier summary.csv (complete when the
    file predates the column)."""
    if not run_dir.summary_csv.is_file():
        return {}
    old = read_csv_checked(
        run_dir.summary_csv,
        SUMMARY_SCHEMA,
        fix="re-run `trtbench loadtest` for its variants, or delete the file",
        keys=("variant", "tier"),
    )
    if old["tier_status"].isna().all():  # written before the column existed
        return {}
    old = old[old["variant"].astype(str).isin(keep)].fillna("")
    return {
        (str(r.variant), str(r.tier)): (str(r.tier_status), str(r.tier_status_reason))
        for r in old[list(STATUS_COLUMNS)].fillna("").itertuples()
    }


def _new_frames(run_dir: RunDir, variants: set[str]) -> tuple[list, list]:
    requests, responses = [], []
    for variant in sorted(variants):
        files = record_files(run_dir, variant)
        if files.requests.is_file():
            requests.append(read_records_csv(files.requests))
        if files.responses.is_file():
            responses.append(read_records_csv(files.responses))
    return requests, responses


def write_loadtest(
    run_dir: RunDir,
    results: Mapping[str, LoadResult],
    slos: Mapping[str, float] | None = None,
    baseline: str | None = None,
    warmup_s: float = 0.0,
    cells: Sequence[CellTiming] = (),
) -> tuple[pd.DataFrame, list[str]]:
    """Merge the streamed records into requests/responses/summary/rounds CSVs; rows of
    other variants already there stay. The summary is computed from the files.

    Requests in flight at a stop were never written (each tier counts them as
    ``unfinished``). Every tier gets its ``tier_status`` from ``results``. ``warmup_s``:
    completions in each pass's first seconds are left out of the summary (requests.csv
    marks them ``in_window`` false; :mod:`trtbench.profiling.loadtest.stats.trusted_summary`).
    ``cells``: when each pass of ``results`` ran and the host's load meanwhile
    (rounds.csv and summary.csv's interference columns,
    :mod:`trtbench.profiling.loadtest.files.rounds_table`).

    Returns:
        (summary frame, warnings).

    Raises:
        LoadTestError: no request finished anywhere (nothing to write).
    """
    replace = set(results)
    new_req, new_resp = _new_frames(run_dir, replace)
    old_req = _existing(run_dir.requests_csv, replace)
    keep = set() if old_req is None else set(old_req["variant"].astype(str))
    statuses = dict(_old_statuses(run_dir, keep))
    for variant, result in results.items():
        statuses |= {(variant, t.tier): (t.status, t.reason) for t in result.tiers}
    req = _concat([old_req, *new_req])
    resp = _concat([_existing(run_dir.responses_csv, replace), *new_resp])
    if req.empty and not statuses:
        raise LoadTestError("no request finished; nothing to write")
    base = baseline if baseline in set(req.get("variant", ())) else None
    # a race's intervals at its looks' levels (run.json design.stopping; fixed: 95 %)
    schedule = recorded_schedule(run_dir.read_run_json().get("design"))
    level_at = schedule.level_at if schedule.sequential else None  # fixed: 95 %
    trusted = summarize_trusted(
        req,
        resp,
        slos,
        base,
        statuses,
        warmup_s,
        level_at,
        (schedule.instance_sd, schedule.instance_of),
    )
    rounds = _rounds(run_dir, trusted.passes, cells, replace)
    summary = interference_summary(trusted.summary, rounds)
    parts = [record_files(run_dir, v).outputs for v in sorted(replace)]
    outputs = merge_outputs(run_dir.loadtest_dir / OUTPUTS_CSV, parts, replace)
    summary = with_lossless(summary, outputs, base)
    summary = add_loop_lag(summary, tier_loop_lags(results), run_dir.summary_csv)
    summary, acceptance = add_server_counts(
        summary,
        acceptance_table(req, resp),
        results,
        run_dir.summary_csv,
        run_dir.acceptance_csv,
    )
    if len(req):
        table = requests_table(req).assign(in_window=trusted.in_window)
        write_csv(table, run_dir.requests_csv, REQUESTS_SCHEMA)
        write_csv(resp, run_dir.responses_csv, RESPONSES_SCHEMA)
    write_csv(summary, run_dir.summary_csv, SUMMARY_SCHEMA)
    write_csv(rounds, run_dir.rounds_csv, ROUNDS_SCHEMA)
    write_csv(acceptance, run_dir.acceptance_csv, ACCEPTANCE_SCHEMA)
    _write_categories(run_dir, req, resp, base, trusted.in_window, statuses)
    for variant in replace:
        files = record_files(run_dir, variant)
        files.requests.unlink(missing_ok=True)
        files.responses.unlink(missing_ok=True)
        files.outputs.unlink(missing_ok=True)
    warnings = (osl_warnings(req) if len(req) else []) + trusted.warnings
    warnings += client_warnings(summary, replace)  # client_timing.py
    warnings += interference_warnings(summary[summary["variant"].isin(replace)])
    return summary, warnings + lossless_warnings(summary)


def _write_categories(
    run_dir: RunDir,
    req: pd.DataFrame,
    resp: pd.DataFrame,
    base: str | None,
    in_window: pd.Series,
    statuses: TierStatuses,
) -> None:
    """categories.csv and category_acceptance.csv, each removed when it has no rows (the
    prompts carry no category, or no tier has per-step counts)."""
    tables = (
        (
            category_table(req, resp, base, in_window, statuses),
            run_dir.categories_csv,
            CATEGORY_SCHEMA,
        ),
        (
            category_acceptance_table(req, resp, in_window),
            run_dir.category_acceptance_csv,
            CATEGORY_ACCEPTANCE_SCHEMA,
        ),
    )
    for table, path, schema in tables:
        if len(req) and len(table):
            write_csv(table, path, schema)
        else:
            path.unlink(missing_ok=True)


def _rounds(
    run_dir: RunDir,
    passes: pd.DataFrame,
    cells: Sequence[CellTiming],
    replace: set[str],
) -> pd.DataFrame:
    """rounds.csv: the cells of ``replace`` from their passes and timings; other variants'
    rows as an earlier rounds.csv has them."""
    mine = (
        passes[passes["variant"].astype(str).isin(replace)] if len(passes) else passes
    )
    new = rounds_table(mine, cells)
    if not run_dir.rounds_csv.is_file():
        return new
    old = read_csv_checked(
        run_dir.rounds_csv,
        ROUNDS_SCHEMA,
        keys=("variant", "tier"),
        fix="re-run `trtbench loadtest` for its variants, or delete the file",
    )
    old = old[~old["variant"].astype(str).isin(replace)]
    return _concat([old, new]) if len(old) else new


def _concat(frames: list[pd.DataFrame | None]) -> pd.DataFrame:
    present = [f for f in frames if f is not None and not f.empty]
    if not present:
        return pd.DataFrame()
    return pd.concat(present, ignore_index=True)
