"""``trtbench follow-up RUN``: serve the recommended config beside the run's best fixed variants
and check it at every tier, paired in time.

1. :func:`plan_follow_up` (every input, before anything is built): RUN's recorded spec
   (``run.json`` ``build.spec``), ``recommendation.json`` (its objective, its best fixed
   variant per tier), the follow-up spec (:mod:`trtbench.pipeline.followup_spec`: the
   recommended config plus each best fixed variant, ``rounds`` rounds) and the preflight of
   ``trtbench run`` for it.
2. :func:`run_follow_up`: the same stages as ``trtbench run`` (:func:`trtbench.pipeline.run.
   run_bench`) into ``RUN/follow-up/``, in interleaved rounds where the servers fit together
   (the recommended config runs every tier, each best fixed variant the tiers where it was
   best); then per tier the paired check of :mod:`trtbench.profiling.report.followup_check`.
   A tier that reads significantly worse is measured again in fresh rounds (a new round
   order, new servers) in ``RUN/follow-up/confirm/``, and fails only if the confirmation
   agrees (its servers started in the reverse order). The result goes to
   ``RUN/follow-up/check.json`` and RUN's report.md is rendered again with its "Follow-up
   check" section.

A stop signal or a dead server keeps what finished: the tiers it did not complete are
``unchecked`` in check.json, the verdict ``incomplete``.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from trtbench.core.data_files import check_json_fields, read_json_document
from trtbench.core.errors import ConfigError
from trtbench.core.run_dir import RunDir, write_json_atomic
from trtbench.pipeline.followup_spec import (
    follow_up_spec,
    is_measured_config,
    recommended_variant,
)
from trtbench.pipeline.loadtest import LoadtestOutcome
from trtbench.pipeline.preflight import preflight_run
from trtbench.pipeline.recommend import RECOMMENDATION_JSON
from trtbench.pipeline.report import write_report
from trtbench.pipeline.run import run_bench
from trtbench.pipeline.stages import RunProgress, prefixed
from trtbench.profiling.loadtest.workload.prompts import Prompt
from trtbench.profiling.report.followup_check import (
    CHECK_JSON,
    CONFIRM_DIR,
    FOLLOW_UP_DIR,
    CheckBasis,
    StageResult,
    check_basis,
    check_document,
    concurrency_of,
    settle,
    skipped_document,
    stage_result,
    suspects,
)
from trtbench.profiling.report.inputs import RUN_CSV_SCHEMAS
from trtbench.profiling.report.paired import MIN_ROUNDS
from trtbench.profiling.report.recommendation_text import SCHEMA_VERSION
from trtbench.profiling.report.run_data import load_run
from trtbench.spec.bench import BenchSpec
from trtbench.spec.design import no_race_because, resolve_design
from trtbench.spec.report import GOODPUT_FIX, SLO_FIELDS

log = logging.getLogger(__name__)

REC_FIX = "render it again with `trtbench report RUN`"
REC_FIELDS = {
    "objective.name": str,
    "winner": str,
    "baseline": str,
    "tiers": list,
    "snippets": list,
}
DEFAULT_ROUNDS = 8
"""Rounds of each stage of the follow-up (``--rounds``)."""
CONFIRM_SEED_STEP = 1
"""The confirmation's ``loadtest.seed`` is the follow-up's plus this: a new round order."""


@dataclass(frozen=True)
class FollowUpPlan:
    """Everything the follow-up needs, checked (:func:`plan_follow_up`).

    Attributes:
        run: the original run directory; out: ``RUN/follow-up``.
        spec: the follow-up spec (the recommended config first, then the best fixed ones).
        source: the variant of the run the config came from.
        basis: the compared figure; best: tier label → best fixed variant there.
        prompts: the follow-up's prompts (the confirmation sends the same).
        measured: the recommended config is ``source`` as the run measured it (no
            ``speculation:`` policy): the run's rounds already compared it with the best
            fixed variant of every tier, side by side (``trtbench follow-up`` skips it
            unless forced).
    """

    run: RunDir
    out: RunDir
    spec: BenchSpec
    source: str
    basis: CheckBasis
    best: dict[str, str]
    prompts: list[Prompt]
    measured: bool = False

    @property
    def variant(self) -> str:
        """The follow-up's variant name (the recommended config)."""
        return self.spec.variants[0].name

    def tiers_of(self, tiers: list[str] | None = None) -> dict[str, list[str]]:
        """Variant → the tiers it measures: the recommended config every tier of
        ``tiers`` (default: every tier with a best), each best fixed variant its own."""
        tiers = list(self.best) if tiers is None else tiers
        out: dict[str, list[str]] = {self.variant: tiers}
        for tier in tiers:
            out.setdefault(self.best[tier], []).append(tier)
        return out


@dataclass(frozen=True)
class FollowUpResult:
    """The follow-up run's outcome (None: skipped, nothing measured), the check document
    and what was written (report: None when RUN's report.md could not be rendered again;
    ``warnings`` says why)."""

    outcome: LoadtestOutcome | None
    document: dict[str, Any]
    check_path: Path
    report_path: Path | None
    warnings: list[str] = field(default_factory=list)


def _recorded_spec(rd: RunDir) -> dict[str, Any]:
    if not rd.root.is_dir():
        raise ConfigError(
            f"run directory {rd.root} does not exist; give the --out of a "
            "`trtbench run`"
        )
    if not rd.run_json.is_file():
        raise ConfigError(
            f"{rd.root} has no run.json: it is not a run directory; give the --out of a "
            "`trtbench run`"
        )
    if not rd.summary_csv.is_file():  # before anything is built or measured
        raise ConfigError(
            f"{rd.summary_csv} is missing: the run measured nothing to follow up; run "
            f"`trtbench run SPEC --out {rd.root}` first"
        )
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
        return check_basis(str(objective))
    except KeyError:
        raise ConfigError(
            f"{path}: unknown objective {objective!r}; {REC_FIX}"
        ) from None


def plan_follow_up(root: Path, rounds: int = DEFAULT_ROUNDS) -> FollowUpPlan:
    """Check every input of ``trtbench follow-up RUN`` before anything is built.

    Args:
        root: the run directory.
        rounds: rounds of each stage (at least 3: a paired interval needs them).

    Raises:
        ConfigError: RUN is missing or records no spec, a file of it fails the checks
            ``trtbench report`` makes (``load_run``), recommendation.json is missing or
            names no complete tier, ``rounds`` < 3, the follow-up spec does not validate or
            cannot be measured in its design, or ``trtbench run``'s preflight fails for it.
        DataFileError: run.json, recommendation.json or a CSV of RUN is damaged.
        ServerStartError: no tritonserver, a fixed port taken (the preflight).
    """
    if rounds < MIN_ROUNDS:
        raise ConfigError(
            f"--rounds {rounds}: a paired interval needs {MIN_ROUNDS} rounds or more; use "
            f"--rounds {DEFAULT_ROUNDS}"
        )
    rd = RunDir(Path(root))
    recorded = _recorded_spec(rd)
    load_run(
        rd.root, RUN_CSV_SCHEMAS
    )  # its files as report reads them: damaged, exit 2
    path, rec = _recommendation(rd)
    basis = _basis((rec.get("objective") or {}).get("name"), path)
    best = {
        str(t["tier"]): str(t["best"])
        for t in rec["tiers"]
        if isinstance(t, dict) and t.get("tier") and t.get("best")
    }
    if not best:
        raise ConfigError(f"{path} has no complete tier to check; {REC_FIX}")
    variant, source = recommended_variant(recorded, rec, str(path))
    slos = [(recorded.get("loadtest") or {}).get(k) for k in SLO_FIELDS]
    if basis.objective == "goodput" and not any(slos):
        raise ConfigError(f"{path}: objective goodput needs SLOs: {GOODPUT_FIX}")
    where = f"{rd.run_json} build.spec + {path}"
    spec = follow_up_spec(recorded, variant, list(best.values()), rounds, where)
    design = resolve_design(spec, spec.variants)  # one they cannot have: exit 2
    if not no_race_because(spec, design.name):  # a race where the design allows one
        spec = follow_up_spec(
            recorded, variant, list(best.values()), rounds, where, True
        )
    out = RunDir(rd.root / FOLLOW_UP_DIR)
    prompts = preflight_run(spec, out)
    measured = is_measured_config(recorded, variant, source)
    return FollowUpPlan(rd, out, spec, source, basis, best, prompts, measured)


def _stage(
    plan: FollowUpPlan, out: RunDir, outcome: LoadtestOutcome, tiers: list[str]
) -> list[StageResult]:
    """Each tier's reading of one stage (unchecked when it measured nothing)."""
    if outcome.summary.empty or not out.summary_csv.is_file():
        nothing = StageResult(None, None, None, 0, "unchecked", "nothing was measured")
        return [nothing for _ in tiers]
    run = load_run(out.root, RUN_CSV_SCHEMAS)
    rounds = run.rounds if run.rounds is not None else pd.DataFrame()
    return [
        stage_result(
            rounds, run.summary, plan.variant, plan.best[t], t, plan.basis, run.schedule
        )
        for t in tiers
    ]


def _confirm(
    plan: FollowUpPlan, tiers: list[str], progress: RunProgress | None
) -> tuple[LoadtestOutcome, list[StageResult]]:
    """Stage 2: ``tiers`` again, in fresh rounds, into ``RUN/follow-up/confirm``, with
    the variants in reverse order (the best fixed variants' servers start first), so that
    whatever favours a server by its place in the start order counts against the
    recommended config in one stage and for it in the other."""
    out = RunDir(plan.out.root / CONFIRM_DIR)
    loadtest = plan.spec.loadtest.model_copy(
        update={"seed": plan.spec.loadtest.seed + CONFIRM_SEED_STEP}
    )
    variants = list(reversed(plan.spec.variants))
    spec = plan.spec.model_copy(update={"loadtest": loadtest, "variants": variants})
    log.info(
        "confirming %s in %d fresh rounds (stage 1 read them significantly worse)",
        ", ".join(tiers),
        loadtest.repeats,
    )
    stages = prefixed(progress, f"confirming {', '.join(tiers)}")
    outcome = run_bench(  # the same variants stage 1's preflight checked
        spec, out, (), stages, plan.prompts, plan.tiers_of(tiers), checked=True
    )
    return outcome, _stage(plan, out, outcome, tiers)


def skip_follow_up(plan: FollowUpPlan) -> FollowUpResult:
    """Record that the follow-up measured nothing because the recommended config is a
    variant the run measured as it ran (``plan.measured``): check.json with the verdict
    ``skipped`` and the reason, and RUN's report.md rendered again with it."""
    check_path = plan.out.root / CHECK_JSON
    plan.out.root.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(plan.out.root / CONFIRM_DIR, ignore_errors=True)
    document = skipped_document(
        _recommended(plan), plan.basis, list(plan.best), _paths(plan)
    )
    write_json_atomic(check_path, document)
    report, warnings = _render_again(plan)
    return FollowUpResult(None, document, check_path, report, warnings)


def _recommended(plan: FollowUpPlan) -> dict[str, Any]:
    v = plan.spec.variants[0]
    speculation = v.speculation.model_dump(exclude_none=True) if v.speculation else None
    return {
        "variant": v.name,
        "from": plan.source,
        "mode": v.mode,
        "max_draft_len": v.max_draft_len,
        "speculation": speculation,
    }


def _paths(plan: FollowUpPlan) -> dict[str, str]:
    return {"run": str(plan.run.root), "follow_up": str(plan.out.root)}


def _render_again(plan: FollowUpPlan) -> tuple[Path | None, list[str]]:
    """RUN's report.md rendered again (None and a warning when it cannot be)."""
    try:
        return write_report(plan.run.root, (), plan.basis.objective).report_path, []
    except Exception as exc:  # noqa: BLE001 - check.json is kept; the user reruns report
        log.debug("report failed", exc_info=True)
        return None, [
            f"{plan.run.report_md} was not rendered again ({type(exc).__name__}: {exc}); "
            f"check.json is kept, render it with `trtbench report {plan.run.root}`"
        ]


def run_follow_up(
    plan: FollowUpPlan, progress: RunProgress | None = None
) -> FollowUpResult:
    """Run the follow-up (and a confirmation where stage 1 reads a tier worse), check it,
    write check.json and RUN's report.md again.

    Args:
        plan: from :func:`plan_follow_up`.
        progress: where the stages are reported (named ``follow-up · build`` …,
            ``confirming c4 · load test`` …; :mod:`trtbench.pipeline.stages`).

    Returns:
        The outcome (the last stage's, as ``trtbench run``'s, for its table and warnings;
        its warnings include the first stage's), the check document
        (``followup_check.check_document``) and the paths written.

    Raises:
        What :func:`trtbench.pipeline.run.run_bench` raises (build, deploy or server
            start failed: nothing is checked).
    """
    check_path = plan.out.root / CHECK_JSON
    check_path.unlink(missing_ok=True)  # never leave an earlier follow-up's verdict
    shutil.rmtree(plan.out.root / CONFIRM_DIR, ignore_errors=True)
    stages = prefixed(progress, "follow-up")
    outcome = run_bench(  # checked by preflight_run in the plan
        plan.spec, plan.out, (), stages, plan.prompts, plan.tiers_of(), checked=True
    )
    tiers = list(plan.best)
    first = _stage(plan, plan.out, outcome, tiers)
    again = suspects(first, tiers)
    summary = outcome.summary
    confirm: dict[str, StageResult] = {}
    if again and not outcome.interrupted:
        second, results = _confirm(plan, again, progress)
        confirm = dict(zip(again, results, strict=True))
        outcome = replace(second, warnings=[*outcome.warnings, *second.warnings])
    checks = [
        settle(
            t,
            concurrency_of(summary, t) if len(summary) else None,
            plan.best[t],
            f,
            confirm.get(t),
        )
        for t, f in zip(tiers, first, strict=True)
    ]
    document = check_document(
        checks, plan.basis, _recommended(plan), _paths(plan), plan.spec.loadtest.repeats
    )
    write_json_atomic(check_path, document)
    report, warnings = _render_again(plan)
    return FollowUpResult(outcome, document, check_path, report, warnings)
