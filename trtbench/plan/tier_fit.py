"""Predict each measured tier's TPOT from a step-cost curve and the measured acceptance.

Model (all times in ms; B = the tier's effective batch, :mod:`trtbench.plan.tier_batch`):

* **Batch** B: the mean number of requests decoding at each decode step a request took,
  measured from the client's request/response records (``B_eff``; within 2 % of c for the
  baseline, 7-12 % below c for speculative tiers of the demo, whose requests spend a larger
  share of their steps in a pass's tail). Without the records, B = the tier's concurrency c
  (column ``batch_source``).
* **Prefill stall** S per output token (:mod:`trtbench.plan.tier_stall`): the reference
  engine prefills each admitted request alone between decode steps, so every decoding
  request waits each newcomer's prefill P once: ``S = A·P`` with A = admissions per decode
  token from the records and P = the tier's server prefill mean. A count, not a step cost:
  it is added to TPOT after the division by E, and taken out of every measured TPOT before
  a step cost is derived from it. Without the records S = 0 (``stall_source`` none).
* **Step-cost curve** from the baseline's complete tiers: one decode step of B sequences
  takes ``t(B) = a + b·B`` (baseline TPOT − S = one step, one token per sequence), fitted
  by least squares over the baseline's B with its R². On the demo's CPU the slope is
  per-*sequence* work (a response streamed per sequence per step, per-row bookkeeping), not
  per-token compute: a verify pass over B x q tokens is NOT ``t(B·q)`` (that over-predicts
  Medusa at c8 by +100 %).
* **Extra verified token in a row**: ``τ = (prefill − t(B_low)) / (ISL − 1)`` from the
  baseline's lowest tier (server prefill = one row of ISL tokens); the verify pass of a step
  whose rows carry q tokens costs ``t(B) + τ·B·(q − 1)`` — the roofline's shape: in the
  overhead/memory-bound regime extra tokens of a row cost only their compute.
* **Tokens per step** E and verify width q: :mod:`trtbench.plan.tier_tokens` (per-position
  acceptance, Leviathan et al. 2023 §3; ``e_source``).
* **Speculation overhead** (draft forwards, Medusa heads and tree walk, n-gram lookup) as a
  multiple ρ of a baseline step — Leviathan's cost ratio c held constant over B. Each tier
  implies ``ρ_i = ((TPOT_i − S_i)·E_i − verify_i) / t(B_i)``; tier i is predicted with the
  median of the implied ρ of the variant's OTHER complete tiers (leave-one-out: every
  prediction is out of sample, and one noisy tier moves the others' ρ by at most a rank).
  A variant with one usable tier is not predicted (role ``not_predicted``, said in the
  notes).
* Prediction: ``TPOT = ((1 + ρ)·t(B) + τ·B·(q−1)·p_v) / E + S`` with
  ``p_v = 1 − (1 − s)^B``, the chance some row in the step drafted; speedup = baseline TPOT
  measured at the same tier / TPOT predicted; error = predicted / measured − 1 against the
  tier's pooled TPOT mean (summary.csv, every pass). The median over passes of per-pass
  means was tried as the measured input on the three demo runs and did not lower the error
  consistently (the passes' spread is not one outlier pass; a median of three is noisier
  than a mean). On the three demo runs the stall term moved the overall median |error|
  10.7/6.6/11.5 % -> 6.1/10.0/6.1 % and the mean signed error at c1 from +6.4 % to +0.8 %,
  at c8 from +9.5 % to +12.7 % (docs/planner.md).

Partial or failed tiers (``tier_status`` not complete) are excluded and listed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from trtbench.core import methods
from trtbench.core.export import Column, write_csv
from trtbench.plan.tier_batch import with_batch
from trtbench.plan.tier_stall import with_stall
from trtbench.plan.tier_tokens import measured_tokens_per_step, verify_tokens
from trtbench.profiling.report.comparison import summary_column
from trtbench.profiling.report.variant_info import VariantInfo

TPOT = summary_column("time_per_output_token", "mean")
PREFILL = summary_column("server_prefill_time", "mean")
ISL = summary_column("input_sequence_length")
TARGET_ERROR = 0.10  # issue 15: <= 10 % median absolute error


@dataclass(frozen=True)
class StepCurve:
    """``t(B) = a + b·B`` (ms) fitted to the baseline's complete tiers.

    Attributes:
        a_ms, b_ms: intercept and slope (ms per sequence in the step).
        r2: coefficient of determination of the fit (NaN with 2 points: exact).
        token_ms: τ, cost of one more verified token in a row (ms; 0 without a prefill).
        tiers: the baseline tiers fitted.
    """

    a_ms: float
    b_ms: float
    r2: float
    token_ms: float
    tiers: tuple[str, ...]

    def at(self, batch: float) -> float:
        """``a + b·batch`` (ms)."""
        return self.a_ms + self.b_ms * batch


@dataclass(frozen=True)
class TierFitResult:
    """What :func:`fit_tiers` found.

    Attributes:
        curve: the baseline step curve (None: fewer than 2 complete baseline tiers).
        rows: one row per (variant, tier), see :data:`FIT_TIER_COLUMNS`.
        excluded: ``"variant tier (status)"`` for each tier left out.
        notes: one line per caveat (fallbacks, missing curve).
    """

    curve: StepCurve | None
    rows: pd.DataFrame
    excluded: tuple[str, ...]
    notes: tuple[str, ...]


FIT_TIERS_SCHEMA: tuple[Column, ...] = (
    Column("variant", "speculative variant"),
    Column("mode", "draft_target | medusa | ngram | eagle3 | …"),
    Column("tier", "load tier (complete tiers only)"),
    Column("concurrency", "the tier's client concurrency c"),
    Column("batch", "B: mean batch a decoding request shared (tier_batch), else c"),
    Column(
        "batch_source", "records (requests/responses.csv) or concurrency (fallback)"
    ),
    Column(
        "role", "predicted (ρ from the other tiers) | not_predicted (no other tier)"
    ),
    Column(
        "e_source", "per_position (acceptance.csv) or tokens_per_response (fallback)"
    ),
    Column("tokens_per_step", "E = 1 + s·Σ_k Π_{i<=k} a_i"),
    Column("verify_tokens", "q: tokens per row in the verify pass (K + 1, nodes + 1)"),
    Column("admissions_per_token", "A: admissions a request waited, per decode token"),
    Column("prefill_stall_ms", "S = A x server prefill mean: stall per output token"),
    Column("stall_source", "records (requests/responses.csv) or none (S = 0)"),
    Column(
        "implied_overhead_ratio",
        "ρ_i this tier implies: ((TPOT − S)·E − verify) / t(B)",
    ),
    Column("overhead_ratio", "ρ used: median ρ_i of the variant's other tiers"),
    Column("predicted_step_ms", "(1 + ρ)·t(B) + τ·B·(q − 1)·p_v"),
    Column("measured_tpot_ms", "TPOT mean measured (every pass pooled)"),
    Column("predicted_tpot_ms", "predicted_step_ms / tokens_per_step + S"),
    Column("error_ratio", "predicted / measured TPOT − 1"),
    Column("measured_speedup_ratio", "baseline TPOT / measured TPOT at the same B"),
    Column("predicted_speedup_ratio", "baseline TPOT / predicted TPOT"),
)
FIT_TIER_COLUMNS = tuple(c.name for c in FIT_TIERS_SCHEMA)
FIT_TIERS_FILE = Path("plan") / "fit_tiers.csv"


def _complete(rows: pd.DataFrame) -> pd.Series:
    if "tier_status" not in rows.columns:
        return pd.Series(True, index=rows.index)
    return rows["tier_status"].fillna("complete").astype(str) == "complete"


def fit_step_curve(
    baseline: pd.DataFrame, batch: str = "concurrency"
) -> StepCurve | None:
    """Least-squares ``TPOT − S = a + b·B`` over the baseline's summary rows.

    Args:
        baseline: the baseline's complete-tier rows (``concurrency``, TPOT mean; optional
            ``stall_ms`` S, ms per output token, taken out before the fit (absent: 0);
            for τ the server prefill mean and the mean input length at the lowest tier).
        batch: the column holding B (``concurrency``, or the effective batch).

    Returns:
        The curve, or None with fewer than 2 distinct B with a TPOT.
    """
    ok = baseline[baseline[TPOT].notna() & baseline[batch].notna()]
    if ok[batch].nunique() < 2:
        return None
    x = ok[batch].to_numpy(float)
    y = ok[TPOT].to_numpy(float) - _stall(ok)
    b, a = np.polyfit(x, y, 1)
    resid = y - (a + b * x)
    total = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float((resid**2).sum()) / total if len(x) > 2 and total > 0 else np.nan
    low = ok.sort_values(batch).iloc[0]
    token = 0.0
    if PREFILL in ok and ISL in ok and pd.notna(low[PREFILL]) and low[ISL] > 1:
        one = a + b * float(low[batch])
        token = max((float(low[PREFILL]) - one) / (float(low[ISL]) - 1.0), 0.0)
    tiers = tuple(str(t) for t in ok.sort_values(batch)["tier"])
    return StepCurve(float(a), float(b), r2, token, tiers)


def _verify_ms(curve: StepCurve, batch: float, q: int, share: float) -> float:
    drafted = 1.0 - (1.0 - share) ** batch
    return curve.at(batch) + curve.token_ms * batch * (q - 1) * drafted


def median_abs_error(errors: pd.Series) -> float:
    """Median of ``|error|`` over the non-NaN values (NaN when there are none)."""
    values = pd.to_numeric(errors, errors="coerce").dropna().abs()
    return float(values.median()) if len(values) else float("nan")


def implied_overhead(
    curve: StepCurve, tpot: float, e: float, batch: float, q: int, share: float
) -> float:
    """ρ one tier implies: ``(TPOT·E − verify(B)) / t(B)`` (module doc; NaN without E)."""
    if not (pd.notna(tpot) and pd.notna(e) and e >= 1.0):
        return float("nan")
    return (tpot * e - _verify_ms(curve, batch, q, share)) / curve.at(batch)


def leave_one_out(implied: list[float]) -> list[float]:
    """For each tier, the median of the other tiers' non-NaN implied ρ (NaN: none).

    E.g. ``[1.0, 2.0, 4.0]`` -> ``[3.0, 2.5, 1.5]``.
    """
    out = []
    for i in range(len(implied)):
        others = [r for j, r in enumerate(implied) if j != i and pd.notna(r)]
        out.append(float(np.median(others)) if others else float("nan"))
    return out


def _stall(rows: pd.DataFrame) -> np.ndarray:
    if "stall_ms" not in rows:
        return np.zeros(len(rows))
    return rows["stall_ms"].fillna(0.0).to_numpy(float)


def _variant_rows(
    rows: pd.DataFrame,
    info: VariantInfo,
    curve: StepCurve,
    acceptance: pd.DataFrame | None,
    base_tpot: dict[float, float],
) -> list[dict]:
    """One prediction row per complete tier of one speculative variant (``batch`` set)."""
    q = verify_tokens(info)
    tiers = []
    for _, row in rows.sort_values("concurrency").iterrows():
        e, share, source = measured_tokens_per_step(row, acceptance)
        meas = float(row[TPOT]) if pd.notna(row[TPOT]) else float("nan")
        batch = float(row["batch"])
        stall = float(row["stall_ms"])
        rho_i = implied_overhead(curve, meas - stall, e, batch, q, share)
        tiers.append((row, e, share, source, meas, batch, stall, rho_i))
    loo = leave_one_out([t[-1] for t in tiers])
    out = []
    for (row, e, share, source, meas, batch, stall, rho_i), rho in zip(
        tiers, loo, strict=True
    ):
        step = rho * curve.at(batch) + _verify_ms(curve, batch, q, share)
        pred = step / e + stall if e and pd.notna(e) else float("nan")
        base = base_tpot.get(float(row["concurrency"]), float("nan"))
        out.append(
            {
                "variant": info.name,
                "mode": info.mode or "",
                "tier": row["tier"],
                "concurrency": float(row["concurrency"]),
                "batch": batch,
                "batch_source": row["batch_source"],
                "admissions_per_token": row["admissions_per_token"],
                "prefill_stall_ms": stall,
                "stall_source": row["stall_source"],
                "role": "predicted" if pd.notna(rho) else "not_predicted",
                "e_source": source,
                "tokens_per_step": e,
                "verify_tokens": q,
                "implied_overhead_ratio": rho_i,
                "overhead_ratio": rho,
                "predicted_step_ms": step,
                "measured_tpot_ms": meas,
                "predicted_tpot_ms": pred,
                "error_ratio": pred / meas - 1.0 if meas > 0 else float("nan"),
                "measured_speedup_ratio": base / meas if meas > 0 else float("nan"),
                "predicted_speedup_ratio": base / pred if pred > 0 else float("nan"),
            }
        )
    return out


def fit_tiers(
    summary: pd.DataFrame,
    variants: dict[str, VariantInfo],
    baseline: str,
    acceptance: pd.DataFrame | None = None,
    batch: pd.DataFrame | None = None,
) -> TierFitResult:
    """Fit the step curve to the baseline and predict every speculative tier (module doc).

    Args:
        summary: ``loadtest/summary.csv`` rows (variant, tier, tier_status, concurrency,
            request_count, TPOT / prefill / ISL / OSL / tokens-per-response means).
        variants: per-variant mode, K and Medusa nodes (``variant_info.VariantInfo``).
        baseline: the baseline variant's name.
        acceptance: ``loadtest/acceptance.csv`` rows (None: every variant falls back).
        batch: effective batch and admissions per decode token per (variant, tier)
            (``tier_batch.effective_batch``; None or a missing tier: B = concurrency and no
            prefill stall, said in ``batch_source``, ``stall_source`` and the notes).

    Returns:
        The curve, the per-tier rows (columns :data:`FIT_TIER_COLUMNS`), the excluded
        tiers and notes.
    """
    done = _complete(summary)
    excluded = tuple(
        f"{r['variant']} {r['tier']} ({r.get('tier_status', '')})"
        for _, r in summary[~done].iterrows()
    )
    summary = with_stall(with_batch(summary[done], batch))
    base = summary[summary["variant"] == baseline]
    curve = fit_step_curve(base, "batch")
    notes: list[str] = []
    if (summary["batch_source"] == "concurrency").any():
        notes.append(
            "batch B = client concurrency where the request/response records are absent "
            "(batch_source concurrency): the tail of a pass is not accounted for"
        )
    if (summary["stall_source"] == "none").any():
        notes.append(
            "prefill stall S = 0 where the records or the server prefill time are absent "
            "(stall_source none): other requests' prefills are left in the step cost"
        )
    if curve is None:
        notes.append(
            "no step curve: the baseline needs >= 2 complete tiers of different concurrency"
        )
        return TierFitResult(
            None, pd.DataFrame(columns=FIT_TIER_COLUMNS), excluded, tuple(notes)
        )
    base_tpot = dict(
        zip(base["concurrency"].astype(float), base[TPOT].astype(float), strict=True)
    )
    rows: list[dict] = []
    for name, group in summary.groupby("variant", sort=False):
        info = variants.get(str(name), VariantInfo(str(name)))
        method = methods.method_of(info.mode)
        if str(name) == baseline or (method is not None and not method.drafts):
            continue
        got = _variant_rows(group, info, curve, acceptance, base_tpot)
        if any(r["e_source"] == "tokens_per_response" for r in got):
            notes.append(
                f"{name}: no per-position acceptance table; tokens per step from the "
                "client's tokens per response"
            )
        if verify_tokens(info) == 1:
            notes.append(f"{name}: verify width unknown (no K or tree); no token term")
        if any(r["role"] == "not_predicted" for r in got):
            notes.append(
                f"{name}: cannot predict: ρ comes from the variant's other complete tiers "
                "(leave-one-out) and it has no other usable tier"
            )
        rows += got
    frame = pd.DataFrame(rows, columns=list(FIT_TIER_COLUMNS))
    return TierFitResult(curve, frame, excluded, tuple(notes))


def error_medians(rows: pd.DataFrame) -> dict[str, float]:
    """Median |error| of the predicted tiers per variant, and ``overall`` (all of them)."""
    pred = rows[rows["role"] == "predicted"]
    out = {
        str(v): median_abs_error(g["error_ratio"])
        for v, g in pred.groupby("variant", sort=False)
    }
    out["overall"] = median_abs_error(pred["error_ratio"])
    return out


def write_fit_tiers(result: TierFitResult, run_dir: Path) -> Path | None:
    """Write the per-tier rows to ``run_dir/plan/fit_tiers.csv`` (None: no rows to write)."""
    if result.rows.empty:
        return None
    return write_csv(result.rows, run_dir / FIT_TIERS_FILE, FIT_TIERS_SCHEMA)
