"""``trtbench plan`` as one call: predict (``planner``), and with ``--from-run`` fit α and the
draft cost to a run (``fit``, ``tier_fit``) beside the roofline's speedup of each measured
tier; :class:`PlanResult` is what ``text`` prints and :data:`PLAN_SCHEMA` the CSV it writes."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd

from trtbench.core.errors import ConfigError
from trtbench.core.export import Column, records_to_frame, write_csv
from trtbench.core.methods import METHODS
from trtbench.plan.calibration import (
    Calibration,
    check_calibration,
    read_calibration,
)
from trtbench.plan.fit import VariantFit, fit_run
from trtbench.plan.inputs import DRAFT_MODEL_PLAN, MEDUSA_PLAN, planner_of
from trtbench.plan.planner import (
    MedusaSetup,
    Plan,
    PlanInputs,
    make_plan,
    speedup_at,
)
from trtbench.plan.qps import QpsPoint, qps_points
from trtbench.plan.settings import PlanSettings, plan_inputs, resolve_option
from trtbench.plan.tier_batch import read_effective_batch
from trtbench.plan.tier_fit import TierFitResult, fit_tiers, write_fit_tiers
from trtbench.profiling.report.comparison import summary_column
from trtbench.profiling.report.inputs import RUN_CSV_SCHEMAS
from trtbench.profiling.report.run_data import RunData, load_run


@dataclass(frozen=True)
class PlanResult:
    """What ``trtbench plan`` prints: the plan and, with ``--from-run``, the fit."""

    plan: Plan | None
    fits: list[VariantFit] = field(default_factory=list)
    fit_rows: pd.DataFrame | None = None
    run_dir: Path | None = None
    csv_path: Path | None = None
    tier_fit: TierFitResult | None = None
    tier_fit_path: Path | None = None
    qps: tuple[QpsPoint, ...] = ()


PLAN_SCHEMA: tuple[Column, ...] = (
    Column("mode", " | ".join(METHODS)),  # every method module, in the spec's order
    Column("concurrency", "concurrent sequences B"),
    Column("step_time_ms", "predicted time of one decoding step (roofline)"),
    Column("tokens_per_step", "expected tokens per step (draft chain or Medusa tree)"),
    Column("tpot_ms", "step_time_ms / tokens_per_step"),
    Column("output_tokens_per_s", "B / TPOT (system output token throughput)"),
    Column("speedup_ratio", "baseline TPOT / this mode's TPOT at the same B"),
    Column("bound", "memory or compute: what bounds the target pass"),
    Column("weights_bytes", "target weights per GPU (params x bytes / (tp x pp))"),
    Column(
        "extra_weights_bytes",
        "draft weights, Medusa heads or EAGLE-3 / MTP layers per GPU",
    ),
    Column("kv_cache_bytes", "KV cache of B sequences per GPU (target + draft)"),
    Column(
        "total_memory_bytes", "per GPU: weights + extra + KV cache + logits + overhead"
    ),
    Column("fits", "total_memory_bytes <= memory_fraction × GPU memory"),
    Column("communication_ms", "all-reduce and pipeline-send time within step_time_ms"),
)


def _roofline_for_run(
    inputs: PlanInputs, fits: list[VariantFit], fit_rows: pd.DataFrame, run: RunData
) -> pd.DataFrame:
    """Add the roofline's speedup (with the fitted E) for each measured tier."""
    out = fit_rows.copy()
    predicted = []
    for _, row in out.iterrows():
        fit = next(f for f in fits if f.variant == row["variant"])
        info = run.variants[fit.variant]
        batch = int(row["concurrency"]) if pd.notna(row["concurrency"]) else 0
        setup, plan = inputs, planner_of(fit.mode)
        if plan == DRAFT_MODEL_PLAN and inputs.draft and fit.alpha is not None:
            d = replace(inputs.draft, alpha=fit.alpha, draft_len=fit.draft_len or 1)
            setup = replace(inputs, draft=d)
        elif plan == MEDUSA_PLAN and info.medusa_choices:
            heads = info.medusa_heads or max(len(c) for c in info.medusa_choices)
            layers = info.medusa_layers or 1
            m = MedusaSetup(heads, layers, info.medusa_choices, (), fit.tokens_per_step)
            setup = replace(inputs, medusa=m)
        usable = (plan == DRAFT_MODEL_PLAN and setup.draft) or (
            plan == MEDUSA_PLAN and setup.medusa
        )
        if batch < 1 or not usable:
            predicted.append(float("nan"))
            continue
        predicted.append(speedup_at(setup, fit.mode, batch))
    out["roofline_speedup_ratio"] = predicted
    out["roofline_error_ratio"] = (
        out["roofline_speedup_ratio"] / out["measured_speedup_ratio"] - 1.0
    )
    return out


def with_calibration(inputs: PlanInputs, cal: Calibration) -> PlanInputs:
    """``inputs`` whose target passes come from ``cal`` and whose launch constants are the
    ones it measured (``calibration`` module doc).

    Raises:
        ConfigError: ``cal`` measured another shape, or the plan spans several GPUs.
    """
    check_calibration(cal, inputs.target, inputs.parallel.gpus)
    measured = {k: v for k, v in cal.launch.items() if v is not None}
    launch = replace(
        inputs.launch,
        launch_us=measured.get("eager_launch_us", inputs.launch.launch_us),
        graph_launch_us=measured.get("graph_launch_us", inputs.launch.graph_launch_us),
        node_us=measured.get("graph_node_us", inputs.launch.node_us),
        source=f"calibration on {cal.device}",
    )
    return replace(inputs, calibration=cal, launch=launch)


def _run_shape(run: RunData, settings: PlanSettings) -> PlanSettings:
    """Concurrencies and mean lengths of the run replace the settings' ones."""
    s = run.summary
    tiers = sorted({int(c) for c in s["concurrency"].dropna()})
    isl = s.get(summary_column("input_sequence_length"))
    osl = s.get(summary_column("output_sequence_length"))
    update: dict = {"concurrency": tuple(tiers) or settings.concurrency}
    if isl is not None and isl.notna().any():
        update["input_len"] = max(int(round(isl.mean())), 1)
    if osl is not None and osl.notna().any():
        update["output_len"] = max(int(round(osl.mean())), 1)
    return settings.model_copy(update=update)


def run_plan(settings: PlanSettings) -> PlanResult:
    """Plan, and with ``from_run`` fit the run; write ``out`` (plan CSV) when asked.

    Raises:
        ConfigError: invalid options (message names the option), an unreadable run, or a
            run without a baseline variant.
    """
    fits, fit_rows, run = [], None, None
    tiers, tiers_path = None, None
    if settings.from_run is not None:
        run = resolve_option(
            "--from-run", lambda: load_run(settings.from_run or Path(), RUN_CSV_SCHEMAS)
        )
        if run.baseline is None:
            raise ConfigError(
                f"--from-run {settings.from_run}: the run has no baseline variant (mode "
                "baseline, or a variant named 'baseline'); the fit needs baseline TPOT per "
                "tier: add a baseline variant to the spec and rerun the load test"
            )
        fits, fit_rows = fit_run(run.summary, run.variants, run.baseline)
        batch = read_effective_batch(run.root)
        tiers = fit_tiers(
            run.summary, run.variants, run.baseline, run.acceptance, batch
        )
        tiers_path = write_fit_tiers(tiers, run.root)
        if settings.model is None:
            return PlanResult(None, fits, fit_rows, run.root, None, tiers, tiers_path)
        settings = _run_shape(run, settings)
        draft_fit = next((f for f in fits if f.alpha is not None), None)
        if draft_fit is not None:
            settings = settings.model_copy(
                update={"alpha": draft_fit.alpha, "draft_len": draft_fit.draft_len}
            )
    inputs = plan_inputs(settings)
    if settings.calibration is not None:
        inputs = with_calibration(inputs, read_calibration(settings.calibration))
    plan = make_plan(inputs)
    rates = tuple(resolve_option("--qps", lambda: qps_points(inputs, settings.qps)))
    if run is not None and fit_rows is not None and len(fit_rows):
        fit_rows = _roofline_for_run(inputs, fits, fit_rows, run)
    csv_path = None
    if settings.out is not None:
        csv_path = write_csv(records_to_frame(plan.rows), settings.out, PLAN_SCHEMA)
    return PlanResult(
        plan,
        fits,
        fit_rows,
        run.root if run else None,
        csv_path,
        tiers,
        tiers_path,
        rates,
    )
