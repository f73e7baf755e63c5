"""Plain-text rendering of ``trtbench plan --from-run``: the fitted α and draft cost per
variant, and the per-tier fit (predicted vs measured TPOT, its errors); the fixed-width
:func:`table` both this and ``text`` print."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from trtbench.plan.plan_run import PlanResult
from trtbench.plan.tier_fit import TARGET_ERROR, TierFitResult, error_medians


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned fixed-width columns, two spaces apart."""
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=True)]
    lines = [header, *rows]
    return "\n".join(
        "  ".join(str(x).ljust(w) for x, w in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )


def _num(value: object, fmt: str) -> str:
    return "-" if value is None or pd.isna(value) else format(value, fmt)


FIT_LEGEND = (
    "c = draft step / target step (Leviathan Thm 3.8, from TPOT x E / baseline TPOT = γc + 1 at "
    "the lowest concurrency); v = whole step / baseline step (when γ is unknown, or Medusa)."
)


def render_fit(result: PlanResult) -> str:
    """The fit section: fitted α / cost ratio per variant and per-tier errors."""
    if not result.fits:
        return f"Fit to {result.run_dir}: no speculative variant with a measured acceptance length"
    header = (
        "variant",
        "mode",
        "γ/nodes",
        "E measured",
        "α fitted",
        "c or v",
        "fitted on",
    )
    rows = [
        (
            f.variant,
            f.mode,
            _num(f.draft_len, "d"),
            f"{f.tokens_per_step:.3f}",
            _num(f.alpha, ".3f"),
            "-" if f.cost_ratio is None else f"{f.cost_kind}={f.cost_ratio:.3f}",
            f.reference_tier or "-",
        )
        for f in result.fits
    ]
    out = [f"Fit to {result.run_dir}:", table(header, rows), FIT_LEGEND, ""]
    frame = result.fit_rows
    roof = frame is not None and "roofline_speedup_ratio" in frame
    header = (
        "variant",
        "tier",
        "E meas",
        "E pred",
        "speedup meas",
        "speedup pred",
        "error",
    ) + (("roofline", "roofline error") if roof else ())
    rows = []
    for _, r in (frame if frame is not None else pd.DataFrame()).iterrows():
        row = (
            r["variant"],
            r["tier"],
            _num(r["measured_tokens_per_step"], ".2f"),
            _num(r["predicted_tokens_per_step"], ".2f"),
            _num(r["measured_speedup_ratio"], ".2f"),
            _num(r["predicted_speedup_ratio"], ".2f"),
            _num(r["error_ratio"], "+.1%"),
        )
        if roof:
            row += (
                _num(r["roofline_speedup_ratio"], ".2f"),
                _num(r["roofline_error_ratio"], "+.1%"),
            )
        rows.append(row)
    out.append(table(header, rows))
    return "\n".join(out)


TIER_LEGEND = (
    "TPOT = ((1 + ρ)·t(B) + τ·B·(q−1)·p_v) / E + S: B = mean batch a decoding request "
    "shared (from the request/response records; 'c' = the concurrency where they are "
    "absent), S = prefill stall per output token (other requests' prefills the request "
    "waited: admissions per decode token x the tier's server prefill mean; '-' without "
    "records), t(B) = a + b·B from the baseline tiers' TPOT − S, τ = one more verified "
    "token in a row "
    "(baseline prefill), q = K+1 or tree nodes+1, p_v = chance a row of the step drafted, "
    "E from per-position acceptance, ρ = speculation overhead per step / t(B): the median "
    "of the ρ the variant's OTHER tiers imply (leave-one-out, every tier out of sample); "
    "error = predicted / measured − 1."
)


def render_tier_fit(result: TierFitResult) -> str:
    """Step curve, per-tier predicted vs measured TPOT and the median errors."""
    out = ["Per-tier prediction (step curve + measured acceptance):"]
    c = result.curve
    if c is None:
        return "\n".join(out + [f"  {n}" for n in result.notes])
    r2 = "-" if pd.isna(c.r2) else f"{c.r2:.3f}"
    out.append(
        f"  baseline decode step t(B) = {c.a_ms:.3f} ms + {c.b_ms:.3f} ms x B (R² {r2}, "
        f"tiers {', '.join(c.tiers)}); τ = {c.token_ms:.3f} ms per extra verified token"
    )
    header = (
        "variant",
        "tier",
        "B",
        "S ms",
        "role",
        "E",
        "E from",
        "ρ tier",
        "ρ others",
        "TPOT meas",
        "TPOT pred",
        "error",
        "speedup meas",
        "speedup pred",
    )
    rows = [
        (
            r["variant"],
            r["tier"],
            _num(r["batch"], ".2f") + ("" if r["batch_source"] == "records" else " c"),
            _num(r["prefill_stall_ms"], ".3f")
            if r["stall_source"] == "records"
            else "-",
            r["role"],
            _num(r["tokens_per_step"], ".3f"),
            r["e_source"],
            _num(r["implied_overhead_ratio"], ".2f"),
            _num(r["overhead_ratio"], ".2f"),
            _num(r["measured_tpot_ms"], ".3f"),
            _num(r["predicted_tpot_ms"], ".3f"),
            _num(r["error_ratio"], "+.1%"),
            _num(r["measured_speedup_ratio"], ".2f"),
            _num(r["predicted_speedup_ratio"], ".2f"),
        )
        for _, r in result.rows.iterrows()
    ]
    out.append(table(header, rows))
    medians = error_medians(result.rows)
    overall = medians.pop("overall")
    per = ", ".join(f"{v} {_num(m, '.1%')}" for v, m in medians.items())
    verdict = (
        "no predicted tier"
        if pd.isna(overall)
        else ("met" if overall <= TARGET_ERROR else "NOT met")
    )
    out.append(
        f"Median |error| of predicted tiers: {per}; overall {_num(overall, '.1%')}"
    )
    out.append(f"Target median |error| <= {TARGET_ERROR:.0%}: {verdict}")
    if result.excluded:
        out.append("Excluded (tier not complete): " + "; ".join(result.excluded))
    out += [f"Note: {n}" for n in result.notes]
    out.append(TIER_LEGEND)
    return "\n".join(out)
