"""Plain-text rendering of a :class:`trtbench.plan.settings.PlanResult` (what ``plan`` prints)."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from trtbench.core.units import format_bytes
from trtbench.plan.parallel import allreduce_s
from trtbench.plan.planner import Plan, estimate_memory, medusa_head_params
from trtbench.plan.settings import PlanResult
from trtbench.plan.speculation import expected_tokens_per_step
from trtbench.plan.tier_fit import TARGET_ERROR, TierFitResult, error_medians

FORMULA = (
    "step = max(bytes / HBM bandwidth, FLOPs / dense peak) per forward pass; bytes = "
    "weights + B x context x KV bytes/token; FLOPs = 2 x matmul params x tokens + attention "
    "(roofline). Draft step = γ draft passes + a (γ+1)-token verify; Medusa step = a "
    "(1+nodes)-token verify + heads. E[N] = (1-α^(γ+1))/(1-α) (Leviathan et al. 2023); "
    "Medusa E = 1 + Σ Π a_i(k_i) over tree nodes (Cai et al. 2024); EAGLE-3 / MTP / n-gram "
    "E = 1 + Σ_j Π_{i<=j} a_i, step = K head passes (n-gram: B x CPU lookup) + a (K+1)-token "
    "verify. With tp > 1: 2 all-reduces per layer, each latency + 2(tp-1)/tp x B x T x "
    "hidden x 2 B / link bandwidth (ring); memory and times are per GPU."
)


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned fixed-width columns, two spaces apart."""
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=True)]
    lines = [header, *rows]
    return "\n".join(
        "  ".join(str(x).ljust(w) for x, w in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )


def _header(plan: Plan) -> list[str]:
    i = plan.inputs
    g, t = i.gpu, i.target
    kv = i.dtype if i.kv_dtype == "auto" else i.kv_dtype
    lines = [
        f"Plan: {t.name} ({t.params / 1e9:.2f} B params, {i.dtype}, KV {kv}) on "
        f"{g.label} ({g.hbm_bandwidth_bytes_per_s / 1e12:.3g} TB/s, "
        f"{i.peak_flops_per_s / 1e12:.0f} TFLOP/s dense, {format_bytes(g.memory_bytes)})",
        _parallel_line(plan),
        f"  input {i.input_len} + output {i.output_len} tokens; decode context "
        f"{i.decode_context_len:.0f}; memory budget {i.memory_fraction:.0%} = "
        f"{format_bytes(i.memory_fraction * g.memory_bytes)}",
    ]
    if i.draft:
        d = i.draft
        e = expected_tokens_per_step(d.alpha, d.draft_len)
        line = (
            f"  draft: {d.model.name} ({d.model.params / 1e9:.2f} B), γ={d.draft_len}, "
            f"α={d.alpha:.3f} → E[N]={e:.2f}"
        )
        if plan.draft_cost_ratio is not None and plan.optimal_draft:
            gopt, sopt = plan.optimal_draft
            line += (
                f"; c = {plan.draft_cost_ratio:.3f} at B=1; optimal γ = {gopt} "
                f"({sopt:.2f}x)"
            )
        lines.append(line)
    for c in i.chains:
        rates = ",".join(f"{a:g}" for a in c.rates)
        line = f"  {c.mode}: K={c.draft_len}, rates {rates} → E={c.tokens_per_step:.2f}"
        if c.head is not None:
            line += (
                f"; head {c.head.params / 1e9:.2f} B params read per drafted token, "
                f"{c.extra_params / 1e9:.2f} B in memory"
            )
        else:
            line += f"; no model, CPU lookup {c.lookup_s * 1e6:.0f} µs per sequence"
        lines.append(line)
    if i.medusa:
        m = i.medusa
        heads = medusa_head_params(t, m.num_heads, m.num_layers)
        lines.append(
            f"  medusa: {m.num_heads} heads x {m.num_layers} layer(s) "
            f"({heads / 1e9:.2f} B params, {format_bytes(heads * i.weight_bytes_per_param)}), "
            f"tree {len(m.choices)} nodes, E = {m.tokens_per_step:.2f}"
        )
    return lines


def _parallel_line(plan: Plan) -> str:
    """GPUs, split and link; the all-reduce time of one baseline step at B = 1."""
    i, par = plan.inputs, plan.inputs.parallel
    text = f"  {par.gpus} GPU(s): tp {par.tp} x pp {par.pp}"
    if par.gpus == 1:
        return text + "; memory and times per GPU"
    one = allreduce_s(par, i.target.hidden * 2.0)
    return (
        f"{text}, {i.gpu.link_label} {par.link_bytes_per_s / 1e9:.0f} GB/s per direction, "
        f"all-reduce latency {par.allreduce_latency_s * 1e6:.0f} µs; one all-reduce at B=1 "
        f"{one * 1e6:.2f} µs x {2 * i.target.layers} per target pass; memory per GPU"
    )


def _rows(plan: Plan) -> str:
    header = (
        "B",
        "mode",
        "step ms",
        "comm ms",
        "tok/step",
        "TPOT ms",
        "tok/s",
        "speedup",
        "bound",
        "memory/GPU",
        "fits",
    )
    rows = [
        (
            str(r.concurrency),
            r.mode,
            f"{r.step_time_ms:.4g}",
            f"{r.communication_ms:.3g}",
            f"{r.tokens_per_step:.2f}",
            f"{r.tpot_ms:.4g}",
            f"{r.output_tokens_per_s:.0f}",
            f"{r.speedup_ratio:.2f}x",
            r.bound,
            format_bytes(r.total_memory_bytes),
            "yes" if r.fits else "NO",
        )
        for r in plan.rows
    ]
    return table(header, rows)


def _memory(plan: Plan) -> list[str]:
    """Per mode: weights, draft/heads weights and KV cache per sequence (binary units)."""
    lines = [
        "Memory per GPU and mode: weights + draft/heads + (KV + logits) per sequence x B"
        + (" + overhead:" if plan.inputs.overhead_bytes else ":")
    ]
    for mode in plan.inputs.modes:
        m = estimate_memory(plan.inputs, mode, 1)
        line = (
            f"  {mode}: {format_bytes(m.weights_bytes)} + "
            f"{format_bytes(m.extra_weights_bytes)} + "
            f"({format_bytes(m.kv_per_sequence_bytes)} + "
            f"{format_bytes(m.logits_per_sequence_bytes)}) x B"
        )
        if m.overhead_bytes:
            line += f" + {format_bytes(m.overhead_bytes)}"
        lines.append(line)
    return lines


def _verdicts(plan: Plan) -> list[str]:
    rec = ", ".join(f"B={b}: {m}" for b, m in plan.recommended.items())
    lines = [f"Recommended: {rec}"]
    for mode, batch in plan.crossover.items():
        fit = plan.max_concurrency.get(mode, 0)
        if batch is None:
            text = f"pays off at every B up to {plan.inputs.crossover_limit}"
        else:
            text = f"slower than baseline from B = {batch}"
        if batch is None or batch > fit:
            text += f" (memory fits up to B = {fit})"
        lines.append(f"Crossover {mode}: {text}")
    fits = ", ".join(f"{m} {n}" for m, n in plan.max_concurrency.items())
    lines.append(f"Max concurrency that fits memory: {fits}")
    return lines


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


def render_plan(result: PlanResult) -> str:
    """Everything ``trtbench plan`` prints, as one string."""
    parts = []
    if result.plan is not None:
        plan = result.plan
        parts += [*_header(plan), "", _rows(plan), "", *_memory(plan), *_verdicts(plan)]
        parts += ["", FORMULA]
    if result.run_dir is not None:
        parts += ["", render_fit(result)]
    if result.tier_fit is not None:
        parts += ["", render_tier_fit(result.tier_fit)]
    if result.tier_fit_path is not None:
        parts += ["", f"wrote {result.tier_fit_path}"]
    if result.csv_path is not None:
        parts += ["", f"wrote {result.csv_path}"]
    return "\n".join(parts).strip("\n")
