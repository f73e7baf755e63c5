"""``trtbench follow-up RUN``: measure the recommended config again and check it against the
run's best fixed variant at every tier.

1. :func:`plan_follow_up` (every input, before anything is built): RUN's recorded spec
   (``run.json`` ``build.spec``), ``recommendation.json`` (its objective must have a per-variant
   interval, the run ``loadtest.repeats`` ≥ 3), the follow-up spec (the recorded spec with one
   variant, the recommended config: :mod:`trtbench.pipeline.followup_spec`) and the
   preflight of ``trtbench run`` for it.
2. :func:`run_follow_up`: the same stages as ``trtbench run`` (:func:`trtbench.pipeline.run.
   run_bench`: build, serve, tiers over the same repeats, requests and seed, CSVs) into
   ``RUN/follow-up/``; then per tier the check of
   :mod:`trtbench.profiling.report.followup_check` (criterion and false-failure rate there)
   against the original run's best fixed variant (recommendation.json ``tiers``), written to
   ``RUN/follow-up/check.json``, and RUN's report.md rendered again with its "Follow-up
   check" section.

A stop signal or a dead server keeps what finished: the tiers it did not complete are
``unchecked`` in check.json, the verdict ``incomplete``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from trtbench.data_files import check_json_fields, read_json_document
from trtbench.errors import ConfigError
from trtbench.pipeline.followup_spec import follow_up_spec, recommended_variant
from trtbench.pipeline.loadtest import LoadtestOutcome
from trtbench.pipeline.preflight import preflight_run
from trtbench.pipeline.recommend import RECOMMENDATION_JSON
from trtbench.pipeline.report import variants_frame, write_report
from trtbench.pipeline.run import RunProgress, run_bench
from trtbench.profiling.loadtest.prompts import Prompt
from trtbench.profiling.report.comparison import tier_table
from trtbench.profiling.report.followup_check import (
    CHECK_JSON,
    FOLLOW_UP_DIR,
    MIN_PASSES,
    CheckBasis,
    check_basis,
    check_document,
    check_tiers,
)
from trtbench.profiling.report.inputs import RUN_CSV_SCHEMAS
from trtbench.profiling.report.recommendation_text import SCHEMA_VERSION
from trtbench.run_data import load_run
from trtbench.run_dir import RunDir, write_json_atomic
from trtbench.spec import BenchSpec

log = logging.getLogger(__name__)

REC_FIX = "render it again with `trtbench report RUN`"
REC_FIELDS = {"objective.name": str, "winner": str, "baseline": str, "tiers": list,
              "snippets": list}  # fmt: skip


@dataclass(frozen=True)
class FollowUpPlan:
    """Everything the follow-up needs, checked (:func:`plan_follow_up`).

    Attributes:
        run: the original run directory; out: ``RUN/follow-up``.
        spec: the follow-up spec (one variant: the recommended config).
        source: the variant of the run the config came from.
        basis: the compared figure; best: tier label → best fixed variant there.
        original: the original run's tier table; prompts: the follow-up's prompts.
    """

    run: RunDir
    out: RunDir
    spec: BenchSpec
    source: str
    basis: CheckBasis
    best: dict[str, str]
    original: pd.DataFrame
    prompts: list[Prompt]

    @property
    def variant(self) -> str:
        """The follow-up's variant name."""
        return self.spec.variants[0].name


@dataclass(frozen=True)
class FollowUpResult:
    """The follow-up run's outcome, the check document and what was written (report:
    None when RUN's report.md could not be rendered again; ``warnings`` says why)."""

    outcome: LoadtestOutcome
    document: dict[str, Any]
    check_path: Path
    report_path: Path | None
    warnings: list[str] = field(default_factory=list)


def _recorded_spec(rd: RunDir) -> dict[str, Any]:
    if not rd.root.is_dir():
        raise ConfigError(f"run directory {rd.root} does not exist; give the --out of a "
                          "`trtbench run`")  # fmt: skip
    spec = (rd.read_run_json().get("build") or {}).get("spec")
    if not isinstance(spec, dict) or not spec.get("variants"):
        raise ConfigError(
            f"{rd.run_json} records no spec (build.spec); the follow-up needs a run made "
            "by `trtbench run SPEC --out RUN`"
        )
    return spec


def _recommendation(rd: RunDir) -> tuple[Path, dict[str, Any]]:
    path = rd.root / RECOMMENDATION_JSON
    if not path.is_file():
        raise ConfigError(
            f"{path} does not exist; write it with `trtbench report {rd.root}`"
        )
    doc = read_json_document(path, max_schema_version=SCHEMA_VERSION, fix=REC_FIX)
    check_json_fields(doc, path, REC_FIELDS, fix=REC_FIX)
    return path, doc


def _basis(objective: object, path: Path) -> CheckBasis:
    try:
        basis = check_basis(str(objective))
    except KeyError:
        raise ConfigError(
            f"{path}: unknown objective {objective!r}; {REC_FIX}"
        ) from None
    if basis is None:
        raise ConfigError(
            f"{path}: objective {objective} has no per-variant 95 % interval (repeats give "
            "none), so the follow-up check cannot be made; render the recommendation with "
            "`trtbench report RUN --objective output_tok_s` (or tpot_p50) first"
        )
    return basis


def plan_follow_up(root: Path) -> FollowUpPlan:
    """Check every input of ``trtbench follow-up RUN`` before anything is built.

    Raises:
        ConfigError: RUN is missing or records no spec, recommendation.json is missing,
            its objective has no interval (goodput), the run has ``loadtest.repeats`` < 3
            (no interval: the check cannot be made), no best fixed variant has an
            interval, the recommended config does not validate, or ``trtbench run``'s
            preflight fails for it.
        DataFileError: run.json, recommendation.json or a CSV of RUN is damaged.
        ServerStartError: no tritonserver, a fixed port taken (the preflight).
    """
    rd = RunDir(Path(root))
    recorded = _recorded_spec(rd)
    path, rec = _recommendation(rd)
    basis = _basis((rec.get("objective") or {}).get("name"), path)
    repeats = int((recorded.get("loadtest") or {}).get("repeats") or 1)
    if repeats < MIN_PASSES:
        raise ConfigError(
            f"{rd.root} ran with loadtest.repeats {repeats}: the follow-up check compares "
            f"95 % intervals over passes and cannot be made; run it again with "
            f"loadtest.repeats: {MIN_PASSES} or more"
        )
    best = {str(t["tier"]): str(t["best"]) for t in rec["tiers"]
            if isinstance(t, dict) and t.get("tier") and t.get("best")}  # fmt: skip
    if not best:
        raise ConfigError(f"{path} has no complete tier to check; {REC_FIX}")
    run = load_run(rd.root, RUN_CSV_SCHEMAS)
    original = tier_table(run.summary, variants_frame(run), run.baseline)
    low = f"{basis.interval}_ci95_low"
    rows = original.set_index(["variant", "tier"])
    if not any((v, t) in rows.index and pd.notna(rows.loc[(v, t), low])
               for t, v in best.items()):  # fmt: skip
        raise ConfigError(
            f"{rd.summary_csv}: no best fixed variant has a 95 % interval of {basis.label} "
            "(passes with no measured request?), so the follow-up check cannot be made; "
            "run it again"
        )
    variant, source = recommended_variant(recorded, rec, str(path))
    spec = follow_up_spec(recorded, variant, f"{rd.run_json} build.spec + {path}")
    out = RunDir(rd.root / FOLLOW_UP_DIR)
    prompts = preflight_run(spec, out)
    return FollowUpPlan(rd, out, spec, source, basis, best, original, prompts)


def _follow_up_tiers(plan: FollowUpPlan, outcome: LoadtestOutcome) -> pd.DataFrame:
    """The follow-up's tier table; empty when it measured nothing (an older summary.csv
    in RUN/follow-up is not read)."""
    if outcome.summary.empty or not plan.out.summary_csv.is_file():
        return pd.DataFrame(columns=["variant", "tier", "tier_status"])
    run = load_run(plan.out.root, RUN_CSV_SCHEMAS)
    return tier_table(run.summary, variants_frame(run), None)


def run_follow_up(
    plan: FollowUpPlan, progress: RunProgress | None = None
) -> FollowUpResult:
    """Run the follow-up, check it, write check.json and RUN's report.md again.

    Args:
        plan: from :func:`plan_follow_up`.
        progress: per-tier progress (the CLI's bar).

    Returns:
        The outcome (as ``trtbench run``'s, for its table and warnings), the check
        document (``followup_check.check_document``) and the paths written.

    Raises:
        What :func:`trtbench.pipeline.run.run_bench` raises (build, deploy or server
            start failed: nothing is checked).
    """
    check_path = plan.out.root / CHECK_JSON
    check_path.unlink(missing_ok=True)  # never leave an earlier follow-up's verdict
    outcome = run_bench(plan.spec, plan.out, (), progress, plan.prompts)
    tiers = check_tiers(plan.original, _follow_up_tiers(plan, outcome), plan.best,
                        plan.variant, plan.basis)  # fmt: skip
    v = plan.spec.variants[0]
    speculation = v.speculation.model_dump(exclude_none=True) if v.speculation else None
    recommended = {"variant": v.name, "from": plan.source, "mode": v.mode,
                   "max_draft_len": v.max_draft_len, "speculation": speculation}  # fmt: skip
    paths = {"run": str(plan.run.root), "follow_up": str(plan.out.root)}
    document = check_document(tiers, plan.basis, recommended, paths)
    write_json_atomic(check_path, document)
    warnings: list[str] = []
    report: Path | None = None
    try:
        report = write_report(plan.run.root, (), plan.basis.objective).report_path
    except Exception as exc:  # noqa: BLE001 - check.json is kept; the user reruns report
        log.debug("report failed", exc_info=True)
        warnings.append(
            f"{plan.run.report_md} was not rendered again ({type(exc).__name__}: {exc}); "
            f"check.json is kept, render it with `trtbench report {plan.run.root}`"
        )
    return FollowUpResult(outcome, document, check_path, report, warnings)
