"""Fit the planner's α and cost ratio to a measured run, and score its predictions.

Per speculative variant (pure functions on ``loadtest/summary.csv`` rows):

* tokens per step E: the server-reported acceptance length where present, else the
  client's tokens per response (one response per decode step when streaming);
* draft-target: α solves ``(1 - α^(γ+1)) / (1 - α) = E`` (Leviathan et al. 2023),
  E pooled over tiers weighted by their sample counts;
* per-step cost: a step of the variant takes ``TPOT × E``, a baseline step ``TPOT_base``. At
  the lowest concurrency, where the verify pass costs what a 1-token pass costs (memory-bound),
  ``TPOT × E / TPOT_base = γ c + 1`` gives the draft cost ratio c (clipped at 0); for
  Medusa the same ratio is the tree step's cost v relative to a baseline step;
* predicted speedup per tier ``E / (γ c + 1)`` (Leviathan Thm 3.8) or ``E / v``
  (Medusa), and its error ``predicted / measured - 1``. A growing error with concurrency is
  the verify pass leaving the memory-bound regime.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from trtbench.plan.inputs import DRAFT_MODEL_PLAN, MEDUSA_PLAN, planner_of
from trtbench.plan.speculation import (
    expected_tokens_per_step,
    fit_alpha,
    leviathan_speedup,
)
from trtbench.profiling.loadtest.stats.speedups import add_speedups
from trtbench.profiling.report.comparison import (
    TPOT_SPEEDUP,
    summary_column,
    tokens_per_step,
)
from trtbench.profiling.report.variant_info import VariantInfo


@dataclass(frozen=True)
class VariantFit:
    """What was fitted for one speculative variant.

    Attributes:
        variant, mode: as in the run.
        draft_len: γ (draft_target) or tree nodes (medusa).
        tokens_per_step: pooled measured E.
        alpha: fitted acceptance (draft_target only).
        cost_ratio: c when α was fitted (draft_target with a known γ), else v, the whole
            step's cost relative to a baseline step (see :attr:`cost_kind`).
        reference_tier: the tier c / v were fitted on (lowest concurrency).
    """

    variant: str
    mode: str
    draft_len: int | None
    tokens_per_step: float
    alpha: float | None
    cost_ratio: float | None
    reference_tier: str | None

    @property
    def cost_kind(self) -> str:
        """``c`` (draft step / target step) or ``v`` (variant step / baseline step)."""
        return "c" if self.alpha is not None else "v"


def _pooled(values: pd.Series, weights: pd.Series | None) -> float:
    ok = values.notna()
    if not ok.any():
        return float("nan")
    w = weights[ok].astype(float) if weights is not None else None
    if w is None or not (w > 0).any():
        return float(values[ok].mean())
    return float(np.average(values[ok], weights=w))


def fit_variant(rows: pd.DataFrame, info: VariantInfo) -> VariantFit | None:
    """Fit α and the cost ratio of one variant from its summary rows (None: nothing to fit).

    ``rows`` are the variant's summary.csv rows with the speedup column filled against the
    baseline; a variant without a measured E or speedup at any tier returns None.
    """
    plan = planner_of(info.mode)  # the arithmetic the method declares
    if plan not in (DRAFT_MODEL_PLAN, MEDUSA_PLAN):
        return None
    e = tokens_per_step(rows)
    weights = rows.get("verify_steps_count")  # token-weighted; older files: per request
    steps = pd.to_numeric(weights, errors="coerce") if weights is not None else None
    if steps is None or not (steps[e.notna()] > 0).all():
        weights = rows.get(summary_column("acceptance_length_per_request", "n"))
    pooled = _pooled(e, weights)
    if np.isnan(pooled):
        return None
    gamma = info.draft_len if plan == DRAFT_MODEL_PLAN else info.tree_nodes
    alpha = None
    if plan == DRAFT_MODEL_PLAN and gamma:
        alpha = fit_alpha(min(max(pooled, 1.0), gamma + 1.0), gamma)
    ref = rows[e.notna() & rows[TPOT_SPEEDUP].notna()]
    ratio, tier = None, None
    if len(ref):
        first = ref.sort_values("concurrency", na_position="last").index[0]
        step = float(e[first]) / float(rows.loc[first, TPOT_SPEEDUP])
        tier = str(rows.loc[first, "tier"])
        ratio = max((step - 1.0) / gamma, 0.0) if alpha is not None and gamma else step
    return VariantFit(info.name, info.mode, gamma, pooled, alpha, ratio, tier)


def _leviathan(fit: VariantFit) -> bool:
    """A draft model's fit with α and γ: Leviathan's E and speedup apply."""
    drafted = planner_of(fit.mode) == DRAFT_MODEL_PLAN
    return drafted and fit.alpha is not None and bool(fit.draft_len)


def predicted_speedup(fit: VariantFit) -> float:
    """Speedup the fitted model predicts: ``E(α, γ)/(γc + 1)`` or ``E / v`` (NaN: unfitted)."""
    if fit.cost_ratio is None:
        return float("nan")
    if _leviathan(fit):
        return leviathan_speedup(fit.alpha, fit.draft_len, fit.cost_ratio)
    return fit.tokens_per_step / fit.cost_ratio if fit.cost_ratio > 0 else float("nan")


def predicted_tokens_per_step(fit: VariantFit) -> float:
    """E predicted by the fit (the pooled measurement for Medusa)."""
    if _leviathan(fit):
        return expected_tokens_per_step(fit.alpha, fit.draft_len)
    return fit.tokens_per_step


def fit_run(
    summary: pd.DataFrame,
    variants: dict[str, VariantInfo],
    baseline: str | None = None,
) -> tuple[list[VariantFit], pd.DataFrame]:
    """Fit every speculative variant and compare its predictions with each tier.

    Args:
        summary: summary.csv rows (``variant``, ``tier``, ``concurrency``, the TPOT
            speedup column and the acceptance/tokens-per-response statistics); tiers
            whose ``tier_status`` is not complete are left out.
        variants: per-variant mode and draft length (from build.json).
        baseline: when given, the speedups are recomputed against it
            (``speedups.add_speedups``) instead of taken from the file.

    Returns:
        The fits, and one row per (variant, tier): variant, tier, concurrency,
        measured_tokens_per_step, predicted_tokens_per_step, measured_speedup_ratio,
        predicted_speedup_ratio, error_ratio (predicted / measured − 1).
    """
    if baseline is not None:
        summary = add_speedups(summary, baseline)
    if "tier_status" in summary.columns:  # only complete tiers are measurements
        summary = summary[summary["tier_status"].fillna("complete") == "complete"]
    fits, rows = [], []
    for name, group in summary.groupby("variant", sort=False):
        info = variants.get(str(name), VariantInfo(str(name)))
        fit = fit_variant(group, info)
        if fit is None:
            continue
        fits.append(fit)
        s_pred, e_pred = predicted_speedup(fit), predicted_tokens_per_step(fit)
        measured = tokens_per_step(group)
        for idx, row in group.iterrows():
            s_meas = float(row[TPOT_SPEEDUP])
            rows.append(
                {
                    "variant": fit.variant,
                    "tier": row["tier"],
                    "concurrency": row["concurrency"],
                    "measured_tokens_per_step": float(measured[idx]),
                    "predicted_tokens_per_step": e_pred,
                    "measured_speedup_ratio": s_meas,
                    "predicted_speedup_ratio": s_pred,
                    "error_ratio": s_pred / s_meas - 1.0
                    if s_meas > 0
                    else float("nan"),
                }
            )
    return fits, pd.DataFrame(rows)
