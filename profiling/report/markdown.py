"""Markdown rendering of the comparison (pure: analysis frames in, text out).

:func:`render_report` lays out ``report.md``; :func:`render_compare` the side-by-side of two
runs; :func:`run_notes` says what limited a run, from the variants table, the per-tier table,
the memory breakdown and the launch table.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from trtbench.core import methods, stacks
from trtbench.core.units import format_bytes
from trtbench.profiling.report.comparison import COMPARED_METRICS
from trtbench.profiling.report.uncertainty import INTERVAL_LEGEND, thin_notes

Format = Callable[[object], str]


def _missing(v: object) -> bool:
    return (
        v is None or (isinstance(v, float) and np.isnan(v)) or v is pd.NA or v is pd.NaT
    )


def fmt_num(spec: str, suffix: str = "") -> Format:
    """A formatter applying ``format(value, spec)`` + ``suffix``; ``-`` for missing values."""
    return lambda v: "-" if _missing(v) else format(float(v), spec) + suffix


def fmt_bytes(v: object, signed: bool = False) -> str:
    """Bytes via :func:`trtbench.core.units.format_bytes` (binary units); ``-`` when missing."""
    return "-" if _missing(v) else format_bytes(float(v), signed=signed)


def _signed_bytes(v: object) -> str:
    return fmt_bytes(v, signed=True)


def fmt_text(v: object) -> str:
    """Strings as they are; booleans as yes/no; ``-`` when missing."""
    if _missing(v):
        return "-"
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "no"
    return str(v)


def markdown_table(
    frame: pd.DataFrame, columns: Sequence[tuple[str, str, Format]]
) -> str:
    """A Markdown table of ``frame`` with (column, header, formatter) per column."""
    head = "| " + " | ".join(h for _, h, _ in columns) + " |"
    rule = "|" + "|".join("---" for _ in columns) + "|"
    body = [
        "| " + " | ".join(f(row[c]) if c in row else "-" for c, _, f in columns) + " |"
        for _, row in frame.iterrows()
    ]
    return "\n".join([head, rule, *body])


_x = fmt_num(".2f")
MATRIX_TABLE = (
    ("variant", "variant", fmt_text),
    ("mode", "mode", fmt_text),
    ("extra_memory_bytes", "extra memory vs baseline", _signed_bytes),
    ("low_concurrency", "low C", fmt_num("g")),
    ("speedup_low_text", "{ratio} @ low C", fmt_text),
    ("high_concurrency", "high C", fmt_num("g")),
    ("speedup_high_text", "{ratio} @ high C", fmt_text),
    ("crossover_concurrency", "slower from C", fmt_num("g")),
    ("crossover_interpolated", "crossover ≈ C", fmt_num(".1f")),
    ("tokens_per_step", "tokens/step", _x),
    ("ttft_p50_ms", "TTFT p50 ms (low C)", fmt_num(".1f")),
    ("ttft_p95_ms", "TTFT p95 ms (low C)", fmt_num(".1f")),
    ("tpot_mean_ms", "TPOT ms (low C)", _x),
    ("output_tokens_per_s_high", "output tok/s (high C)", fmt_num(".1f")),
    ("cuda_graphs", "CUDA graphs", fmt_text),
    ("streaming", "streams", fmt_text),
)
TIER_TABLE = (
    ("variant", "variant", fmt_text),
    ("tier", "tier", fmt_text),
    ("tier_status", "status", fmt_text),
    ("ttft_p50_ms", "TTFT p50 ms", fmt_num(".1f")),
    ("ttft_p95_text", "TTFT p95 ms", fmt_text),
    ("ttft_p99_text", "TTFT p99 ms", fmt_text),
    ("tpot_mean_ms", "TPOT mean ms", _x),
    ("tpot_p50_ms", "TPOT p50 ms", _x),
    ("e2e_p50_ms", "E2E p50 ms", fmt_num(".1f")),
    ("output_tokens_per_s", "output tok/s", fmt_num(".1f")),
    ("tokens_per_step", "tokens/step", _x),
    ("speedup_text", "{ratio}", fmt_text),
    ("tpot_speedup_text", "TPOT speedup (mean) [≥ 95 % CI]", fmt_text),
    ("error_count", "errors", fmt_num("g")),
)
MEMORY_TABLE = (
    ("variant", "variant", fmt_text),
    ("weights_bytes", "weights", fmt_bytes),
    ("extra_weights_bytes", "extra weights", _signed_bytes),
    ("peak_bytes", "peak", fmt_bytes),
    ("peak_source", "peak source", fmt_text),
    ("extra_peak_bytes", "extra peak", _signed_bytes),
)
LAUNCH_TABLE = (
    ("trace", "trace", fmt_text),
    ("cuda_graphs", "CUDA graphs", fmt_text),
    ("steps", "steps", fmt_num("g")),
    ("launch_overhead_mean_ms", "launch overhead/step mean ms", fmt_num(".3f")),
    ("launch_overhead_p50_ms", "p50 ms", fmt_num(".3f")),
    ("launch_calls_per_step", "launch calls/step", fmt_num(".1f")),
    ("graph_launches_per_step", "graph launches/step", fmt_num(".1f")),
    ("kernels_per_step", "kernels/step", fmt_num(".1f")),
    ("gpu_idle_per_step_ms", "GPU idle/step ms", fmt_num(".3f")),
)


def named_columns(
    columns: Sequence[tuple[str, str, Format]], ratio: str
) -> list[tuple[str, str, Format]]:
    """``columns`` (:data:`MATRIX_TABLE`, :data:`TIER_TABLE`) with ``{ratio}`` in their
    headers replaced by the speedup's name, e.g. ``output tok/s vs baseline``."""
    return [(c, h.replace("{ratio}", ratio), f) for c, h, f in columns]


def matrix_markdown(matrix: pd.DataFrame, ratio: str, legend: str) -> str:
    """The comparison matrix (:data:`MATRIX_TABLE`, its speedup named ``ratio``) and its
    legend: ``legend`` (what the speedup is), then what its columns mean."""
    return "\n".join(
        [
            markdown_table(matrix, named_columns(MATRIX_TABLE, ratio)),
            "",
            f"{legend} 'slower from C': the first measured concurrency where the speedup "
            "is below 1; 'crossover ≈ C': the Recommendation's, where it first falls from ≥ 1 "
            "to below 1, in log2(C) (both by point value). TTFT and TPOT at the lowest "
            "concurrency, output tok/s at the highest.",
        ]
    )


def tiers_markdown(tiers: pd.DataFrame, ratio: str) -> str:
    """The per-tier table (:data:`TIER_TABLE`, the speedup named ``ratio`` as in the
    matrix, the TPOT speedup by its own name) and its legend."""
    table = markdown_table(tiers, named_columns(TIER_TABLE, ratio))
    return "\n".join(
        [table, "", f"'{ratio}': as in the comparison matrix. {INTERVAL_LEGEND}"]
    )


def _is_false(v: object) -> bool:
    return not _missing(v) and isinstance(v, (bool, np.bool_)) and not v


def _no_gpu(v: pd.Series) -> bool:
    gpus = v.get("gpus")
    if not _missing(gpus):
        return int(gpus) == 0
    reason = str(v.get("cuda_graphs_reason") or "").lower()
    return v.get("cuda_graphs") == "unavailable" or "cuda" in reason or "gpu" in reason


def run_notes(
    variants: pd.DataFrame,
    tiers: pd.DataFrame,
    memory: pd.DataFrame | None,
    launches: pd.DataFrame | None,
) -> list[str]:
    """Sentences on what limited the run (streaming, CUDA graphs, errors, missing data)."""
    notes = []
    for _, v in variants.iterrows():
        name = v["variant"]
        if _is_false(v.get("streaming")):
            notes.append(
                f"`{name}` does not stream (e.g. draft-target through the BLS model, a "
                "documented TensorRT-LLM limit): one response per request, so TTFT = E2E and "
                "TPOT cannot be measured (no TPOT speedup)."
            )
        if v.get("cuda_graphs") == "unavailable":
            reason = v.get("cuda_graphs_reason") or "not supported here"
            notes.append(
                f"`{name}`: CUDA graphs were requested but unavailable ({reason})."
            )
    guessed = [
        f"`{v['variant']}`"
        for _, v in variants.iterrows()
        if v.get("mode_source") == "name"
    ]
    if guessed:
        notes.append(
            f"No build.json or repository metadata for {', '.join(guessed)}: the mode was "
            "guessed from the name, and draft length / tree size are unknown."
        )
    cpu = [
        f"`{v['variant']}`"
        for _, v in variants.iterrows()
        if stacks.has("backend", v.get("backend"), "reference_engine")
        and not stacks.has("server", v.get("server"), "own_engine")
        and _no_gpu(v)
    ]
    vllm_cpu = [
        f"`{v['variant']}`"
        for _, v in variants.iterrows()
        if stacks.has("server", v.get("server"), "own_engine") and _no_gpu(v)
    ]
    if vllm_cpu:
        notes.append(
            f"{', '.join(vllm_cpu)} were served by vLLM on a machine without a GPU (its CPU "
            "build): absolute times are CPU times; compare ratios, not milliseconds."
        )
    if cpu:
        notes.append(
            f"{', '.join(cpu)} ran on the reference backend without a GPU: absolute times "
            "are CPU times and CUDA graphs cannot be used; compare ratios, not milliseconds."
        )
    stand_in = [
        f"`{v['variant']}`"
        for _, v in variants.iterrows()
        if stacks.has("backend", v.get("backend"), "llmapi")
        and v.get("runtime") == "reference"
    ]
    if stand_in:
        notes.append(
            f"{', '.join(stand_in)}: TensorRT-LLM LLM-API plans served by trtbench's reference "
            "engine behind Triton's llmapi model (deploy.llmapi_runtime: reference), not by "
            "TensorRT-LLM: the interface and the plans are TensorRT-LLM's, the figures the "
            "reference engine's."
        )
    noisy = tiers[tiers["tpot_mean_ms"] > 2 * tiers["tpot_p50_ms"]]
    if len(noisy):
        where = ", ".join(f"`{r['variant']}` {r['tier']}" for _, r in noisy.iterrows())
        notes.append(
            f"TPOT mean is more than twice its median in {where}: a few slow requests (a "
            "busy host?) dominate the mean and the TPOT speedup; compare the p50 column."
        )
    unfinished = tiers[tiers["tier_status"] != "complete"]
    notes += [
        f"`{r['variant']}` {r['tier']} is **{r['tier_status']}** ({r['tier_status_reason']}): "
        "not a measurement; no speedup or crossover is computed from it."
        for _, r in unfinished.iterrows()
    ]
    bad = tiers[tiers["error_count"].fillna(0) > 0]
    notes += [
        f"`{r['variant']}` {r['tier']}: {int(r['error_count'])} failed requests."
        for _, r in bad.iterrows()
    ]
    spec = tiers[tiers["mode"].notna() & ~tiers["mode"].isin(methods.NON_DRAFTING)]
    if len(spec) and spec["tokens_per_step"].isna().all():
        notes.append(
            "No tokens-per-step figure: the server reported no draft counts and no variant streamed."
        )
    if memory is None or memory.empty:
        notes.append("No memory_breakdown.csv: memory was not measured.")
    elif (memory["peak_source"] == "peak_rss_bytes").any():
        notes.append(
            "Memory peaks are process-tree RSS (no NVML): host memory, not GPU memory."
        )
    if launches is None or launches.empty:
        notes.append(
            "No traces/**/steps.csv: launch overhead per step was not measured."
        )
    notes += thin_notes(tiers)  # uncertainty.py
    return list(dict.fromkeys(notes))


def demoted(lines: Sequence[str]) -> list[str]:
    """``lines`` with every Markdown heading one level down (``## X`` → ``### X``), code
    blocks left alone: a section rendered under the appendix's heading."""
    out, code = [], False
    for line in lines:
        if line.startswith("```"):
            code = not code
        out.append("#" + line if not code and line.startswith("#") else line)
    return out


def render_report(
    title: str,
    matrix: str,
    tiers: str,
    memory: pd.DataFrame | None,
    launches: pd.DataFrame | None,
    notes: Sequence[str],
    plots: Sequence[tuple[str, str]],
    header: Sequence[str] = (),
    sections: Sequence[str] = (),
    lead: Sequence[str] = (),
) -> str:
    """``report.md`` text: the answer first (``lead``: the Recommendation and the follow-up
    check), the comparison ``matrix`` (Markdown, its legend included), the plots, what
    limited the run; then ``## Appendix: the measurements in detail``: ``header`` (how the
    run was measured), the per-tier ``tiers`` (Markdown, with the tables that go with it),
    memory, launches and ``sections`` (more Markdown, each with its heading, rendered one
    level down). ``plots`` are (caption, path relative to the report)."""
    parts = [f"# {title}", "", *([*lead, ""] if lead else [])]
    parts += ["## Comparison matrix", "", matrix, "", "## Plots", ""]
    parts += [f"![{caption}]({rel})" for caption, rel in plots] or ["(no plot)"]
    parts += ["", "## What limited this run", ""]
    parts += [f"- {n}" for n in notes] or ["- nothing noted"]
    parts += ["", "## Appendix: the measurements in detail", "", *header]
    parts += ["", "### Per tier", "", tiers]
    if memory is not None and len(memory):
        parts += ["", "### Memory", "", markdown_table(memory, MEMORY_TABLE)]
    if launches is not None and len(launches):
        parts += [
            "",
            "### Launch overhead per decode step",
            "",
            "Launch overhead per step = host time of the kernel- and graph-launch API "
            "calls that start inside the step (steps.csv `launch_overhead_ns`).",
            "",
            markdown_table(launches, LAUNCH_TABLE),
        ]
    parts += ["", *demoted(sections)] if sections else []
    return "\n".join(parts).rstrip() + "\n"


_LABEL = {
    "ttft_p50_ms": "TTFT p50 ms",
    "ttft_p95_ms": "TTFT p95 ms",
    "tpot_mean_ms": "TPOT ms",
    "e2e_p50_ms": "E2E p50 ms",
    "output_tokens_per_s": "tok/s",
    "tokens_per_step": "tokens/step",
    "speedup_ratio": "TPOT speedup",
    "weights_gib": "weights GiB",
    "peak_gib": "peak GiB",
    "launch_overhead_mean_ms": "launch overhead/step ms",
    "launch_calls_per_step": "launch calls/step",
}


def compare_table(
    frame: pd.DataFrame,
    keys: Sequence[str],
    metrics: Sequence[str],
    labels: dict[str, str],
) -> str:
    """Markdown of a side-by-side frame: keys, then A, B and B/A per metric."""
    cols: list[tuple[str, str, Format]] = [(k, k, fmt_text) for k in keys]
    for m in metrics:
        cols += [
            (f"{m}_a", f"{labels.get(m, m)} A", fmt_num(".4g")),
            (f"{m}_b", "B", fmt_num(".4g")),
            (f"{m}_b_over_a", "B/A", fmt_num(".3f")),
        ]
    return markdown_table(frame, cols)


def render_compare(
    name_a: str,
    name_b: str,
    tiers: pd.DataFrame,
    memory: pd.DataFrame | None,
    launches: pd.DataFrame | None,
) -> str:
    """Markdown comparing run A and run B (values side by side with B/A ratios)."""
    parts = [
        f"# Compare: A = {name_a}, B = {name_b}",
        "",
        "Ratios are B / A. For times (TTFT, TPOT, E2E) below 1 means B is faster; "
        "for tok/s, tokens/step and speedup above 1 means B is better.",
        "",
    ]
    for metric_group in (COMPARED_METRICS[:4], COMPARED_METRICS[4:]):
        parts += [compare_table(tiers, ["variant", "tier"], metric_group, _LABEL), ""]
    if memory is not None and len(memory):
        parts += [
            "## Memory",
            "",
            compare_table(memory, ["variant"], ["weights_gib", "peak_gib"], _LABEL),
            "",
        ]
    if launches is not None and len(launches):
        parts += [
            "## Launch overhead per step",
            "",
            compare_table(
                launches,
                ["trace"],
                ["launch_overhead_mean_ms", "launch_calls_per_step"],
                _LABEL,
            ),
            "",
        ]
    return "\n".join(parts).rstrip() + "\n"
