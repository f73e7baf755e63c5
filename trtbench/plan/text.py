"""Plain-text rendering of a :class:`trtbench.plan.plan_run.PlanResult` (what ``plan`` prints);
the fit to a run is rendered by :mod:`trtbench.plan.fit_text`."""

from __future__ import annotations

from trtbench.core.units import format_bytes
from trtbench.plan.bands import Band, plan_uncertainty
from trtbench.plan.engines import engine_terms
from trtbench.plan.fit_text import render_fit, render_tier_fit, table
from trtbench.plan.inputs import FOUR_BIT
from trtbench.plan.parallel import allreduce_s
from trtbench.plan.plan_run import PlanResult
from trtbench.plan.planner import Plan, estimate_memory, medusa_head_params
from trtbench.plan.speculation import expected_tokens_per_step

FORMULA = (
    "step = max(bytes / HBM bandwidth, FLOPs / dense peak) per forward pass; bytes = "
    "weights + B x context x KV bytes/token; FLOPs = 2 x matmul params x tokens + attention "
    "(roofline). Draft step = γ draft passes + a (γ+1)-token verify; Medusa step = a "
    "(1+nodes)-token verify + heads. E[N] = (1-α^(γ+1))/(1-α) (Leviathan et al. 2023); "
    "Medusa E = 1 + Σ Π a_i(k_i) over tree nodes (Cai et al. 2024); EAGLE-3 / MTP / n-gram "
    "E = 1 + Σ_j Π_{i<=j} a_i, step = K head passes (n-gram: B x CPU lookup) + a (K+1)-token "
    "verify (an EAGLE tree: depth head passes over top-k candidates, a (tokens+1)-token "
    "verify). With tp > 1: 2 all-reduces per layer, each latency + 2(tp-1)/tp x B x T x "
    "hidden x 2 B / link bandwidth (ring); memory and times are per GPU. Every pass adds "
    "its kernel-launch cost, memory time is at the achieved bandwidth, FLOP time at the "
    "stack's compute efficiency, every step its per-sequence cost and every speculative "
    "step the speculation machinery (--engine; docs/planner.md). A MoE pass reads the "
    "experts its B x T tokens touch: E (1 - (1 - k/E)^(B T)) per layer."
)


def _header(plan: Plan) -> list[str]:
    i = plan.inputs
    g, t = i.gpu, i.target
    kv = i.kv_dtype
    if kv == "auto":
        kv = "bfloat16" if i.dtype in FOUR_BIT else i.dtype
    lines = [
        f"Plan: {t.name} ({t.params / 1e9:.2f} B params, {i.dtype}, KV {kv}) on "
        f"{g.label} ({g.hbm_bandwidth_bytes_per_s / 1e12:.3g} TB/s, "
        f"{i.peak_flops_per_s / 1e12:.0f} TFLOP/s dense, {format_bytes(g.memory_bytes)})",
        _parallel_line(plan),
        *_overhead_lines(plan),
        f"  input {i.input_len} + output {i.output_len} tokens; decode context "
        f"{i.decode_context_len:.0f}; memory budget {i.memory_fraction:.0%} = "
        f"{format_bytes(i.memory_fraction * g.memory_bytes)}",
    ]
    if i.calibration is not None:
        lines.insert(1, f"  {i.calibration.describe(t)}")
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
    if t.moe is not None:
        m = t.moe
        lines.append(
            f"  mixture of experts: {m.layers} MoE layers x {m.experts} experts, top-{m.top_k}"
            f"; {t.read_params(1) / 1e9:.1f} B params read at 1 token per pass, "
            f"{t.read_params(64) / 1e9:.1f} B at 64"
        )
    for c in i.chains:
        rates = ",".join(f"{a:.3g}" for a in c.rates)
        shape = f"K={c.draft_len}"
        if c.is_tree:
            shape = f"tree depth {c.draft_len}, top-{c.tree_topk}, {c.verify_tokens - 1} tokens"
        given = " (published length)" if c.measured_tokens_per_step else ""
        line = f"  {c.mode}: {shape}, rates {rates} → E={c.tokens_per_step:.2f}{given}"
        if c.head is not None:
            line += (
                f"; head {c.head.read_params(1) / 1e9:.2f} B params read per drafted token, "
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


def _overhead_lines(plan: Plan) -> list[str]:
    """The terms beyond the roofline (``overheads`` module doc), one line each."""
    i = plan.inputs
    m = i.machinery
    if i.pure_roofline:
        return [
            "  pure roofline (--no-overheads): full bandwidth, no launch cost, no "
            "speculation machinery"
        ]
    _, where = engine_terms(i.engine or "default")
    lines = [
        f"  {where}",
        f"  {i.launch.describe()}; kernels of at least {i.launch.kernel_us:g} µs",
        f"  achieved bandwidth {i.bandwidth_efficiency:.0%} of peak, compute "
        f"{i.compute_efficiency:.0%}; per step {m.sequence_us:g} µs x B, per speculative "
        f"step {m.pass_us:g} µs x passes + {m.token_us:g} µs x B x verified tokens",
    ]
    if i.draft and i.draft_tp is not None:
        lines.append(f"  draft model on tp {i.draft_parallel.tp}")
    return lines


def _rows(plan: Plan, bands: dict[tuple[str, int], Band]) -> str:
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
            f"{r.speedup_ratio:.2f}x"
            + (
                f" ±{bands[r.mode, r.concurrency].width:.0%}"
                if (r.mode, r.concurrency) in bands
                else ""
            ),
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


def _band_kinds(bands: dict[tuple[str, int], Band]) -> str:
    """Each distinct band's kind and row count, once."""
    seen = dict.fromkeys(f"{b.kind} ({b.rows} rows)" for b in bands.values())
    return "; ".join(seen) or "no speculative mode"


def _qps_lines(result: PlanResult) -> list[str]:
    """The ``--qps`` section: each mode's concurrency, TPOT and latency at each rate."""
    if not result.qps:
        return []
    rows = [
        (
            f"{p.qps:g}",
            p.mode,
            f"{p.concurrency}" + (" (saturated)" if p.saturated else ""),
            f"{p.tpot_s * 1e3:.4g}",
            f"{p.latency_s:.3g}",
            "-" if p.speedup_ratio != p.speedup_ratio else f"{p.speedup_ratio:.2f}x",
        )
        for p in result.qps
    ]
    header = ("QPS", "mode", "B = QPS x W", "TPOT ms", "W s", "speedup")
    return [
        "",
        "At a request rate (Little's law, B = QPS x W, W = prefill + output x TPOT(B)):",
        table(header, rows),
    ]


def render_plan(result: PlanResult) -> str:
    """Everything ``trtbench plan`` prints, as one string."""
    parts = []
    if result.plan is not None:
        plan = result.plan
        bands, notes = plan_uncertainty(plan)
        parts += [*_header(plan), "", _rows(plan, bands), "", *_memory(plan)]
        parts += [*_verdicts(plan), *(f"Note: {n}" for n in notes)]
        parts += [*_qps_lines(result)]
        parts += [
            "",
            "± = the 80th percentile of |error| of the "
            + ("pure roofline's" if plan.inputs.pure_roofline else "planner's")
            + " speedups on held-out published rows of the same kind (stack, method, "
            "batch range; widened when it has fewer than 3 rows): "
            + _band_kinds(bands)
            + " (docs/planner.md, the scored table).",
            "",
            FORMULA,
        ]
    if result.run_dir is not None:
        parts += ["", render_fit(result)]
    if result.tier_fit is not None:
        parts += ["", render_tier_fit(result.tier_fit)]
    if result.tier_fit_path is not None:
        parts += ["", f"wrote {result.tier_fit_path}"]
    if result.csv_path is not None:
        parts += ["", f"wrote {result.csv_path}"]
    return "\n".join(parts).strip("\n")
