"""Load what a run directory holds, for ``report``, ``compare`` and ``plan --from-run``.

Only files are read (``loadtest/summary.csv``, ``memory_breakdown.csv``,
``traces/**/steps.csv``, ``run.json``, ``engines/*/build.json``,
``model_repo/*/trtbench.json``), so a run can be re-rendered on any machine. Optional files
that are absent become ``None``; ``loadtest/summary.csv`` is required. The raw timelines
(``requests.csv``, ``memory.csv``, ``server_metrics.csv``) are not read: nothing here uses them.

A file that is present but corrupt (truncated, not JSON, a CSV row with the wrong number of
fields, a key or typed value that does not parse, a ``schema_version`` newer than this code
reads) raises :class:`~trtbench.core.errors.DataFileError` naming it (and the line) and the fix;
nothing is skipped or dropped silently (:mod:`trtbench.core.data_files`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from trtbench.core import methods
from trtbench.core.data_files import (
    check_json_fields,
    read_csv_checked,
    read_json_document,
    read_table_checked,
)
from trtbench.core.errors import ConfigError, DataFileError
from trtbench.core.export import Schema
from trtbench.core.run_dir import (
    BUILD_JSON_SCHEMA_VERSION,
    METADATA_SCHEMA_VERSION,
    RUN_JSON_FIX,
    RunDir,
)
from trtbench.profiling.loadtest.stats.decisions import LookSchedule, recorded_schedule
from trtbench.profiling.report.rounds_check import check_rounds
from trtbench.profiling.report.variant_info import VariantInfo, variant_info


@dataclass(frozen=True)
class RunData:
    """What report, compare and plan use from one run directory (frames as read;
    ``None`` = file absent)."""

    root: Path
    run: dict[str, Any]
    variants: dict[str, VariantInfo]
    summary: pd.DataFrame
    memory_breakdown: pd.DataFrame | None = None
    steps: pd.DataFrame | None = None
    acceptance: pd.DataFrame | None = None
    rounds: pd.DataFrame | None = None
    categories: pd.DataFrame | None = None
    category_acceptance: pd.DataFrame | None = None

    @property
    def name(self) -> str:
        return self.root.name

    @property
    def baseline(self) -> str | None:
        """The baseline variant: mode baseline, else run.json ``baseline`` (``trtbench
        loadtest --baseline``) where it names a variant, else one named ``baseline``, else
        None."""
        for info in self.variants.values():
            if methods.drafts_nothing(info.mode):
                return info.name
        named = self.run.get("baseline")
        if isinstance(named, str) and named in self.variants:
            return named
        return "baseline" if "baseline" in self.variants else None

    @property
    def design(self) -> str:
        """How the run measured its variants in time (run.json ``design.name``); runs
        made before designs existed measured each variant's passes in a row."""
        return str((self.run.get("design") or {}).get("name") or "sequential")

    @property
    def schedule(self) -> LookSchedule:
        """The run's looks (run.json ``design.stopping``; ``stats/decisions.py``)."""
        return recorded_schedule(self.run.get("design"))


BUILD_FIX = "run `trtbench build` again for this variant, or delete its engines/ folder"
REPO_FIX = "render it again with `trtbench deploy RUN_DIR`, or delete it"
SUMMARY_FIX = (
    "re-run `trtbench loadtest` (or `trtbench run`) into this run directory, or delete "
    "the file"
)
PER_TIER, PER_CATEGORY = ("variant", "tier"), ("variant", "tier", "category")
BREAKDOWN_FIX = "re-run `trtbench run` into this run directory, or delete the file"
STEPS_FIX = (
    "re-run the trace tier of `trtbench run`, or `trtbench analyze nsys|kineto … --out` "
    "into that folder, or delete the file"
)

SUMMARY_KINDS = {"concurrency": "int"}
"""Kinds of summary.csv columns read here whose names carry no unit suffix."""
BREAKDOWN_KINDS = {"peak_readings": "int"}
STEP_KINDS = dict.fromkeys(
    (
        "step",
        "pid",
        "launch_calls",
        "graph_launches",
        "kernels",
        "graph_kernels",
        "launch_delay_calls",
    ),
    "int",
)
"""Kinds of steps.csv columns without a unit suffix (the report sums and compares them)."""

BUILD_FIELDS: dict[str | tuple[str, ...], type | tuple[type, ...]] = {
    "mode": str,
    "backend": str,
    "max_draft_len": int,
    "medusa": dict,
    "medusa.choices": list,
    "medusa.num_heads": int,
    "medusa.num_layers": int,
    "cuda_graphs": dict,
    "host": dict,
    "host.gpus": list,
}
"""Fields of ``build.json`` read here, with their JSON types (builders/manifest.py)."""
REPO_FIELDS: dict[str | tuple[str, ...], type | tuple[type, ...]] = {
    "mode": str,
    "backend": str,
    "max_draft_len": int,
    "medusa_choices": list,
    "cuda_graphs": dict,
    "streaming": bool,
    "runtime": str,
}
"""Fields of ``trtbench.json`` read here (triton_repo/interface.py ``RepoMetadata``)."""


def _read_json(
    path: Path, max_schema_version: int, fix: str, fields: Mapping[Any, Any]
) -> dict[str, Any]:
    """The JSON object in ``path`` with the ``fields`` used here type-checked; {} when absent.

    Raises:
        DataFileError: present but unreadable, not a JSON object, a newer schema_version,
            or a field of the wrong type.
    """
    if not path.is_file():
        return {}
    doc = read_json_document(path, max_schema_version=max_schema_version, fix=fix)
    check_json_fields(doc, path, fields, fix=fix)
    choices = (
        doc.get("medusa_choices") or (doc.get("medusa") or {}).get("choices") or []
    )
    if not all(isinstance(c, list) and all(type(k) is int for k in c) for c in choices):
        raise DataFileError(
            f"{path}: the Medusa choices are not lists of integers ({choices!r:.80}); {fix}"
        )
    return doc


def _run_sections(run: dict[str, Any], path: Path, names: list[str]) -> None:
    """Check the ``run.json`` sections read here: ``build.variants.<v>``, ``loadtest.<v>``."""
    fields: dict[str | tuple[str, ...], type] = {
        "build": dict,
        ("build", "variants"): dict,
        "loadtest": dict,
        "host": dict,
        "design": dict,
        ("design", "name"): str,
    }
    for name in names:
        fields[("build", "variants", name)] = dict
        fields[("build", "variants", name, "max_draft_len")] = int
        fields[("build", "variants", name, "cuda_graphs")] = dict
        fields[("loadtest", name)] = dict
        fields[("loadtest", name, "endpoint")] = str
    check_json_fields(run, path, fields, fix=RUN_JSON_FIX)


def _optional_csv(
    path: Path, schema: Schema | None, fix: str, keys: tuple[str, ...] = ()
) -> pd.DataFrame | None:
    """The checked CSV at ``path``; None when absent (an empty file is corrupt, not absent)."""
    if not path.is_file():
        return None
    return read_csv_checked(path, schema, fix=fix, keys=keys, kinds=BREAKDOWN_KINDS)


def _steps(traces: Path, schema: Schema | None) -> pd.DataFrame | None:
    """Every ``traces/**/steps.csv`` or ``steps.parquet`` (``analyze --format parquet``; the
    newer of the two where a folder has both), with ``trace`` = its folder relative to
    ``traces/``."""
    frames = []
    found = (
        [*traces.rglob("steps.csv"), *traces.rglob("steps.parquet")]
        if traces.is_dir()
        else []
    )
    newest: dict[Path, Path] = {}
    for path in sorted(found, key=lambda p: p.stat().st_mtime):
        newest[path.parent] = path
    for path in (newest[folder] for folder in sorted(newest)):
        frame = read_table_checked(path, schema, fix=STEPS_FIX, kinds=STEP_KINDS)
        frame.insert(0, "trace", str(path.parent.relative_to(traces)))
        frames.append(frame)
    return pd.concat(frames, ignore_index=True) if frames else None


TIER_STATUSES = ("complete", "partial", "failed", "interrupted")


def _check_statuses(summary: pd.DataFrame, path: Path) -> None:
    """The summary has rows, and every ``tier_status`` is one of :data:`TIER_STATUSES`
    (empty: a file from before the column)."""
    if summary.empty:
        raise DataFileError(f"{path} has no rows; {SUMMARY_FIX}")
    if "tier_status" not in summary.columns:
        return
    status = summary["tier_status"]
    bad = status.notna() & ~status.astype(str).isin(TIER_STATUSES)
    if bad.any():
        row = int(bad.to_numpy().nonzero()[0][0])
        raise DataFileError(
            f"{path} line {row + 2}: tier_status {status.iloc[row]!r} is not one of "
            f"{', '.join(TIER_STATUSES)}; {SUMMARY_FIX}"
        )


def load_run(root: Path, schemas: Mapping[str, Schema] | None = None) -> RunData:
    """Read a run directory, checking every file it reads (module docstring).

    Args:
        root: the run directory.
        schemas: the producers' CSV schemas by file: ``"summary"`` (``SUMMARY_SCHEMA``),
            ``"memory_breakdown"`` (``MEMORY_BREAKDOWN_SCHEMA``), ``"steps"``
            (``STEP_SCHEMA``), ``"acceptance"`` (``ACCEPTANCE_SCHEMA``), ``"categories"``, ``"category_acceptance"``, ``"rounds"``
            (``ROUNDS_SCHEMA``). The core cannot import them (docs/architecture.md), so the
            caller passes them; a CSV without one is checked for its structure, its key
            columns (``variant``, ``tier``) and its unit-suffixed columns (numbers).

    Raises:
        ConfigError: the directory or its ``loadtest/summary.csv`` is missing (run
            ``trtbench run`` or ``trtbench loadtest`` first).
        DataFileError: a file present is corrupt, truncated, lacks a required column, holds a
            value of the wrong type, or has a ``schema_version`` newer than this code reads.
    """
    schemas = schemas or {}
    rd = RunDir(Path(root))
    if not rd.root.is_dir():
        raise ConfigError(
            f"run directory {rd.root} does not exist; give a runs/<name> dir"
        )
    if not rd.summary_csv.is_file():
        raise ConfigError(
            f"{rd.summary_csv} is missing; run `trtbench run SPEC` or `trtbench loadtest` "
            "into this run directory first"
        )
    summary = read_csv_checked(
        rd.summary_csv,
        schemas.get("summary"),
        fix=SUMMARY_FIX,
        keys=("variant", "tier"),
        kinds=SUMMARY_KINDS,
    )
    _check_statuses(summary, rd.summary_csv)
    run = rd.read_run_json()
    names = list(dict.fromkeys([*summary["variant"].astype(str), *rd.built_variants()]))
    _run_sections(run, rd.run_json, names)
    variants = {}
    for name in names:
        build = _read_json(
            rd.build_json(name), BUILD_JSON_SCHEMA_VERSION, BUILD_FIX, BUILD_FIELDS
        )
        repo = _read_json(
            rd.repo_metadata(name), METADATA_SCHEMA_VERSION, REPO_FIX, REPO_FIELDS
        )
        variants[name] = variant_info(name, build, repo, run)
    data = RunData(
        root=rd.root,
        run=run,
        variants=variants,
        summary=summary,
        memory_breakdown=_optional_csv(
            rd.memory_breakdown_csv,
            schemas.get("memory_breakdown"),
            BREAKDOWN_FIX,
            keys=("variant",),
        ),
        steps=_steps(rd.traces_dir, schemas.get("steps")),
        **{
            name: _optional_csv(path, schemas.get(name), fix, keys)
            for name, path, fix, keys in (
                ("acceptance", rd.acceptance_csv, BREAKDOWN_FIX, PER_TIER),
                ("rounds", rd.rounds_csv, SUMMARY_FIX, PER_TIER),
                ("categories", rd.categories_csv, SUMMARY_FIX, PER_CATEGORY),
                (
                    "category_acceptance",
                    rd.category_acceptance_csv,
                    BREAKDOWN_FIX,
                    PER_CATEGORY,
                ),
            )
        },
    )
    check_rounds(data.rounds, summary, run, rd.rounds_csv)  # vs summary, design.order
    return data
