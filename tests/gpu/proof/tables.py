"""GPU proof, analysis side (pure): the CSV schemas, decode-timing rows, speedups, the
lossless rule with its tie margin, Kineto launch rows and the printed table.

Definitions:

- A **full-batch step** is a decode step over all ``batch_size`` rows (every request of the
  run admitted and none finished); the figures of ``decode_timing.csv`` are over those steps:
  ``output_tok_s = full_batch_tokens / full_batch_decode_ns × 1e9`` and
  ``speedup_vs_baseline = output_tok_s / output_tok_s(baseline)`` at the same dtype, batch
  size and graphs — equivalently the baseline's time per emitted token over the mode's.
- **Lossless**: every request of a speculative mode returns the baseline's tokens for the
  same prompt (same dtype, batch size and graphs). float32 must be exact. In a lower
  precision a divergence is a numeric tie, and excused, when at its first index the
  baseline's top-2 logit gap is at most :data:`TIE_ULPS` units in the last place of the top
  logit in that dtype (``TIE_ULPS × eps × 2^floor(log2 |top1|)``). This is the rule of the
  batched lossless tests (``tests/unit/builders/reference/test_batching.py``: a greedy pick
  can flip only when the top-2 gap is within the rounding of the arithmetic; there float64
  and MARGIN = 1e-6) with the margin scaled to a dtype of 8 significant bits.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from trtbench.core.export import Column
from trtbench.profiling.loadtest.stats.lossless import first_divergence

TIE_ULPS = 8
EPS = {"float32": 2.0**-23, "bfloat16": 2.0**-7, "float16": 2.0**-10}
NA = "n/a"

CONFIG_COLUMNS = (
    Column("mode", "decoding mode of the reference engine"),
    Column("dtype", "float32 / bfloat16 (weights, activations, KV cache)"),
    Column(
        "batch_size",
        "requests submitted together = max_batch_size (in-flight batching)",
    ),
    Column("graphs", "eager or graphs (the engine's cuda_graphs option)"),
)

TIMING_SCHEMA: tuple[Column, ...] = (
    *CONFIG_COLUMNS,
    Column(
        "graphs_status",
        "eager | captured | n/a (graphs asked for, not available) | error (the run failed)",
    ),
    Column("graphs_reason", "the engine's cuda_graphs reason (why n/a), or the error"),
    Column("engine_build_s", "engine assembly incl. CUDA-graph capture (s)", False),
    Column("full_batch_steps", "decode steps over all batch_size rows", False),
    Column("full_batch_decode_ns", "their summed wall time (ns)", False),
    Column("full_batch_tokens", "tokens they emitted over all rows", False),
    Column("step_ms_mean", "mean time of a full-batch decode step (ms)", False),
    Column("step_ms_median", "median of the same (ms)", False),
    Column("clock", "cuda_events (CUDA) or host_perf_counter (CPU): what timed a step"),
    Column("repeats", "timed runs of the configuration (after its warm-up)", False),
    Column(
        "step_ms_low",
        "interval: the smallest step_ms_mean over the repeats (ms)",
        False,
    ),
    Column("step_ms_high", "interval: the largest (ms)", False),
    Column("tokens_per_step", "full_batch_tokens / full_batch_steps (all rows)", False),
    Column("output_tok_s", "full_batch_tokens / full_batch_decode_ns x 1e9", False),
    Column(
        "speedup_vs_baseline",
        "output_tok_s / baseline output_tok_s (same dtype, batch, graphs)",
        False,
    ),
    Column("all_steps", "every decode step of the run (the shrinking tail too)", False),
    Column(
        "all_decode_tok_s",
        "all decode tokens / all decode time (prefill excluded)",
        False,
    ),
    Column(
        "first_iteration_ms",
        "first batcher iteration: every prefill + one decode step (ms)",
        False,
    ),
    Column("param_bytes", "parameters of the engine's models in dtype", False),
    Column(
        "kv_cache_bytes", "KV-cache buffers allocated by the engine's runners", False
    ),
    Column(
        "torch_max_allocated_bytes",
        "torch.cuda.max_memory_allocated over build + run (CUDA only)",
        False,
    ),
    Column(
        "torch_max_reserved_bytes",
        "torch.cuda.max_memory_reserved over build + run (CUDA only)",
        False,
    ),
    Column(
        "mode_peak_bytes",
        "this configuration's own peak: max allocated - allocated at its reset "
        "(after reset_peak_memory_stats) + param_bytes of its mode (CUDA only)",
        False,
    ),
    Column(
        "graphs_vs_eager",
        "graphs rows: eager step_ms_mean / graphs step_ms_mean (< 1: graphs slower)",
        False,
    ),
    Column("graphs_flag", "graphs rows slower than eager: flagged, with the reason"),
)

LOSSLESS_SCHEMA: tuple[Column, ...] = (
    *CONFIG_COLUMNS,
    Column("compared_to", "the outputs compared against"),
    Column("requests", "requests compared"),
    Column("exact", "requests whose tokens equal the reference's"),
    Column("ties", "diverging requests excused: top-2 gap within the tie margin"),
    Column("mismatches", "diverging requests not excused"),
    Column(
        "first_divergence_min_tokens", "smallest output index of a divergence", False
    ),
    Column(
        "min_gap_at_divergence",
        "smallest baseline top-2 logit gap at a divergence",
        False,
    ),
    Column(
        "margin_at_min_gap",
        "the tie margin at that divergence (0: exact required)",
        False,
    ),
    Column("lossless", "True when mismatches == 0"),
)

KINETO_SCHEMA: tuple[Column, ...] = (
    *CONFIG_COLUMNS,
    Column("steps_requested", "decode steps profiled (--trace-steps)"),
    Column("steps_run", "decode steps the batcher ran under the profiler", False),
    Column(
        "decode_step_ranges", "decode_step#N annotations counted in the trace", False
    ),
    Column(
        "analysis_status",
        "ok | n/a (trtbench analyze kineto refused the trace) | error (tracing failed)",
    ),
    Column("analysis_reason", "why n/a (the analyzer's message)"),
    Column("steps_analyzed", "steps in the analysis (annotation windows)", False),
    Column(
        "launch_calls_per_step",
        "kernel + graph launch API calls per step (mean)",
        False,
    ),
    Column(
        "launch_overhead_mean_ns", "host time in those calls per step (mean, ns)", False
    ),
    Column("launch_overhead_median_ns", "the same, median (ns)", False),
    Column("graph_launches_per_step", "cudaGraphLaunch calls per step (mean)", False),
    Column(
        "kernels_per_step", "kernels run per step, graph nodes included (mean)", False
    ),
    Column(
        "gpu_idle_mean_ns",
        "GPU idle inside the step: span - busy union (mean, ns)",
        False,
    ),
    Column(
        "launch_delay_mean_ns",
        "first GPU start - API end, over launch calls (ns)",
        False,
    ),
    Column("wall_mean_ns", "step wall time under the profiler (mean, ns)", False),
)


INT_COLUMNS = frozenset(
    {"batch_size", "full_batch_steps", "full_batch_decode_ns", "full_batch_tokens"}
    | {"all_steps", "param_bytes", "kv_cache_bytes", "torch_max_allocated_bytes"}
    | {"torch_max_reserved_bytes", "requests", "exact", "ties", "mismatches"}
    | {"first_divergence_min_tokens", "steps_requested", "steps_run"}
    | {"decode_step_ranges", "steps_analyzed", "repeats", "mode_peak_bytes"}
)


def typed_frame(rows: Sequence[dict], schema: Sequence[Column]) -> pd.DataFrame:
    """Rows as a frame in schema order; counts as nullable integers (empty when n/a)."""
    frame = pd.DataFrame(list(rows), columns=[c.name for c in schema])
    ints = [c for c in frame.columns if c in INT_COLUMNS]
    return frame.astype({c: "Int64" for c in ints})


def config_key(mode: str, dtype: str, batch: int, graphs: str) -> dict[str, object]:
    """The four configuration columns as a row fragment."""
    return {"mode": mode, "dtype": dtype, "batch_size": batch, "graphs": graphs}


def timing_row(
    rows: Sequence[int],
    step_ns: Sequence[int],
    step_tokens: Sequence[int],
    batch: int,
    first_iteration_ns: int,
) -> dict[str, object]:
    """Timing columns of one run (definitions in the module docstring).

    Args:
        rows, step_ns, step_tokens: per decode step after the first iteration: rows
            stepped, wall time (ns), tokens emitted.
        batch: the batch size (a step is full when it stepped ``batch`` rows).
        first_iteration_ns: the first iteration's wall time (ns).
    """
    rows_a, ns, tok = (
        np.asarray(x, dtype=np.int64) for x in (rows, step_ns, step_tokens)
    )
    full = rows_a == batch
    n, t, k = int(full.sum()), int(ns[full].sum()), int(tok[full].sum())
    return {
        "full_batch_steps": n,
        "full_batch_decode_ns": t,
        "full_batch_tokens": k,
        "step_ms_mean": float(ns[full].mean() / 1e6) if n else math.nan,
        "step_ms_median": float(np.median(ns[full]) / 1e6) if n else math.nan,
        "tokens_per_step": k / n if n else math.nan,
        "output_tok_s": k / (t / 1e9) if t else math.nan,
        "all_steps": len(ns),
        "all_decode_tok_s": float(tok.sum() / (ns.sum() / 1e9))
        if ns.sum()
        else math.nan,
        "first_iteration_ms": first_iteration_ns / 1e6,
    }


def repeated_timing_row(runs: Sequence[dict[str, object]]) -> dict[str, object]:
    """One row from the :func:`timing_row` of each repeat: the repeat whose
    ``step_ms_mean`` is the median (the lower median for an even count), so every figure
    of the row comes from one run and agrees with the others (tok/s = tokens / time), plus
    the interval ``step_ms_low..step_ms_high`` (min..max of ``step_ms_mean`` over repeats).
    """
    ordered = sorted(runs, key=lambda r: _num(r["step_ms_mean"]))
    means = [_num(r["step_ms_mean"]) for r in ordered]
    return {
        **ordered[(len(ordered) - 1) // 2],
        "repeats": len(runs),
        "step_ms_low": means[0],
        "step_ms_high": means[-1],
    }


def _num(value: object) -> float:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan


GRAPHS_NOISE = (
    "graphs slower than eager within the repeats' intervals (noise, not a cost)"
)
GRAPHS_SLOWER = (
    "graphs slower than eager beyond the repeats' intervals: the replay's copies into its "
    "static inputs and the step's eager remainder (host work, Medusa heads, acceptance) "
    "cost more than the launches the graph saves at this shape (see kineto.csv)"
)


def with_graph_flags(timing: pd.DataFrame) -> pd.DataFrame:
    """``graphs_vs_eager`` and ``graphs_flag`` on every graphs row whose eager twin (same
    mode, dtype, batch size) ran (pure; a copy). A graphs row slower than eager is flagged
    as noise when the two repeat intervals overlap, else as a real cost."""
    out = timing.copy()
    out["graphs_vs_eager"] = math.nan
    out["graphs_flag"] = ""
    keys = ["mode", "dtype", "batch_size"]
    eager = out[out["graphs"] == "eager"].set_index(keys)
    for i, row in out[out["graphs"] == "graphs"].iterrows():
        key = tuple(row[k] for k in keys)
        if key not in eager.index:
            continue
        twin = eager.loc[key]
        ratio = _num(twin["step_ms_mean"]) / _num(row["step_ms_mean"])
        out.at[i, "graphs_vs_eager"] = ratio
        if ratio < 1:
            overlap = _num(row["step_ms_low"]) <= _num(twin["step_ms_high"])
            out.at[i, "graphs_flag"] = GRAPHS_NOISE if overlap else GRAPHS_SLOWER
    return out


def with_speedups(timing: pd.DataFrame) -> pd.DataFrame:
    """``speedup_vs_baseline`` filled for every row whose baseline ran (pure; a copy)."""
    out = timing.copy()
    keys = ["dtype", "batch_size", "graphs"]
    base = out[out["mode"] == "baseline"].set_index(keys)["output_tok_s"]
    joined = out.join(base.rename("base_tok_s"), on=keys)
    out["speedup_vs_baseline"] = pd.to_numeric(
        joined["output_tok_s"], errors="coerce"
    ) / pd.to_numeric(joined["base_tok_s"], errors="coerce")
    return out


def tie_margin(dtype: str, top1: float) -> float:
    """The largest top-2 gap a numeric tie may have (0 for float32: exact required)."""
    if dtype == "float32" or top1 == 0 or not math.isfinite(top1):
        return 0.0
    return TIE_ULPS * EPS[dtype] * 2.0 ** math.floor(math.log2(abs(top1)))


@dataclass(frozen=True)
class Comparison:
    """A speculative mode's outputs against the reference's (see :data:`LOSSLESS_SCHEMA`)."""

    requests: int
    exact: int
    ties: int
    mismatches: int
    first_divergence_min_tokens: int | None
    min_gap_at_divergence: float | None
    margin_at_min_gap: float | None

    @property
    def lossless(self) -> bool:
        return self.mismatches == 0


def compare_outputs(
    reference: Sequence[Sequence[int]],
    outputs: Sequence[Sequence[int]],
    dtype: str,
    gap_at: Callable[[int, int], tuple[float, float]],
) -> Comparison:
    """Apply the lossless rule request by request.

    Args:
        reference: per request, the baseline's tokens.
        outputs: per request, the mode's tokens (same prompts, same order).
        dtype: the engines' dtype (float32: exact).
        gap_at: ``(request, index) -> (top-2 gap, top1)`` of the baseline's logits before
            output ``index`` of that request (called only at divergences).
    """
    exact = ties = 0
    firsts: list[int] = []
    gaps: list[tuple[float, float]] = []
    for i, (want, got) in enumerate(zip(reference, outputs, strict=True)):
        at = first_divergence(list(want), list(got))
        if at is None:
            exact += 1
            continue
        firsts.append(at)
        gap, top1 = gap_at(i, at) if at < len(want) else (math.inf, math.nan)
        margin = tie_margin(dtype, top1)
        gaps.append((gap, margin))
        ties += gap <= margin
    gap_min = min(gaps) if gaps else None
    return Comparison(
        requests=len(reference),
        exact=exact,
        ties=ties,
        mismatches=len(firsts) - ties,
        first_divergence_min_tokens=min(firsts) if firsts else None,
        min_gap_at_divergence=gap_min[0] if gap_min else None,
        margin_at_min_gap=gap_min[1] if gap_min else None,
    )


def kineto_row(summary: object | None, reason: str = "") -> dict[str, object]:
    """Kineto columns from a ``StepSummary`` (None: the analysis is n/a for ``reason``)."""
    if summary is None:
        return {"analysis_status": NA, "analysis_reason": reason}
    steps = summary.steps
    return {
        "analysis_status": "ok",
        "analysis_reason": "",
        "steps_analyzed": steps,
        "launch_calls_per_step": summary.launch_calls_mean,
        "launch_overhead_mean_ns": summary.launch_overhead_mean_ns,
        "launch_overhead_median_ns": summary.launch_overhead_median_ns,
        "graph_launches_per_step": summary.graph_launches_total / steps
        if steps
        else math.nan,
        "kernels_per_step": summary.kernels_mean,
        "gpu_idle_mean_ns": summary.gpu_idle_mean_ns,
        "launch_delay_mean_ns": summary.launch_delay_mean_ns,
        "wall_mean_ns": summary.wall_mean_ns,
    }


def _fmt(value: object, spec: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return NA
    if isinstance(value, str):
        return value
    return format(value, spec)


def render_table(
    timing: pd.DataFrame, lossless: pd.DataFrame, kineto: pd.DataFrame
) -> str:
    """Plain-text tables. First the unprofiled runs, one line per configuration: step time
    (its statistic said in the title: the median repeat's mean full-batch step, with the
    min..max over repeats), tok/s and speedup of that same run, lossless, graphs vs eager
    with a flag. Then, apart, the profiled runs (torch.profiler attached, which inflates
    steps): launch overhead, launch calls, graph launches, GPU idle and the step's wall
    time under the profiler — only comparable with each other."""
    keys = [c.name for c in CONFIG_COLUMNS]
    merged = timing.merge(lossless[[*keys, "lossless"]], on=keys, how="left")
    clocks = sorted({str(c) for c in timing.get("clock", pd.Series()).dropna()})
    title = (
        "Unprofiled runs. step ms: mean full-batch decode step of the median repeat "
        f"[min..max of the repeats' means]; tok/s and speedup from that run; clock: "
        f"{', '.join(clocks) or 'n/a'}"
    )
    head = (
        f"{'mode':13}{'dtype':9}{'batch':>6} {'graphs':7}{'step ms':>9}{'interval':>19}"
        f"{'tok/s':>10}{'speedup':>8} {'lossless':9}{'g/e':>6} flag"
    )
    lines = [title, head, "-" * len(head)]
    flags: dict[str, int] = {}
    for r in merged.to_dict("records"):
        loss = r.get("lossless")
        lossless_text = "base" if r["mode"] == "baseline" else _fmt(loss, "")
        status = r["graphs_status"]
        graphs = status if status in (NA, "error") else r["graphs"]
        low, high = r.get("step_ms_low"), r.get("step_ms_high")
        interval = f"[{_fmt(low, '.3f')}..{_fmt(high, '.3f')}]"
        flag = r.get("graphs_flag") or ""
        mark = ""
        if flag:
            mark = f"*{flags.setdefault(flag, len(flags) + 1)}"
        lines.append(
            f"{r['mode']:13}{r['dtype']:9}{r['batch_size']:>6} {graphs:7}"
            f"{_fmt(r.get('step_ms_mean'), '.3f'):>9}{interval:>19}"
            f"{_fmt(r.get('output_tok_s'), ',.0f'):>10}"
            f"{_fmt(r.get('speedup_vs_baseline'), '.2f'):>8} {lossless_text:9}"
            f"{_fmt(r.get('graphs_vs_eager'), '.2f'):>6} {mark}"
        )
    lines += [f"  *{n}: {text}" for text, n in flags.items()]
    if len(kineto):
        lines += ["", *render_profiled(kineto)]
    return "\n".join(lines)


def render_profiled(kineto: pd.DataFrame) -> list[str]:
    """The profiled runs' table (see :func:`render_table`)."""
    head = (
        f"{'mode':13}{'dtype':9}{'batch':>6} {'graphs':7}{'wall ms':>9}{'launch us':>10}"
        f"{'calls':>7}{'graphs':>7}{'idle us':>9}"
    )
    lines = [
        "Profiled runs (torch.profiler attached: steps are slower than unprofiled; "
        "compare only within this table). Means per step.",
        head,
        "-" * len(head),
    ]
    for r in kineto.to_dict("records"):
        us, idle, wall = (
            r.get(k)
            for k in ("launch_overhead_mean_ns", "gpu_idle_mean_ns", "wall_mean_ns")
        )
        lines.append(
            f"{r['mode']:13}{r['dtype']:9}{r['batch_size']:>6} {r['graphs']:7}"
            f"{_fmt(wall / 1e6 if isinstance(wall, float) else None, '.3f'):>9}"
            f"{_fmt(us / 1e3 if isinstance(us, float) else None, '.1f'):>10}"
            f"{_fmt(r.get('launch_calls_per_step'), '.1f'):>7}"
            f"{_fmt(r.get('graph_launches_per_step'), '.1f'):>7}"
            f"{_fmt(idle / 1e3 if isinstance(idle, float) else None, '.1f'):>9}"
        )
    return lines
