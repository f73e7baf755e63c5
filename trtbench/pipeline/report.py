"""``trtbench report`` and ``trtbench compare`` as library calls: run directory in, files out.

Reads only the run directory (``trtbench.profiling.report.run_data.load_run``), analyses it with the pure
functions of ``trtbench.profiling.report.comparison``, draws ``plots/*.png``
(``trtbench.profiling.report.plots``) and renders Markdown (``trtbench.profiling.report.markdown``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from trtbench.core import methods
from trtbench.core.data_files import read_json_document
from trtbench.core.errors import ConfigError
from trtbench.core.export import records_to_frame
from trtbench.core.run_dir import RunDir, write_json_atomic
from trtbench.pipeline.peers import load_any, load_peer, split_label, with_peers
from trtbench.pipeline.recommend import (
    RECOMMENDATION_JSON,
    read_kv_pressure,
    recommend_run,
)
from trtbench.plan.fit import fit_run
from trtbench.profiling.loadtest.files.outputs import OUTPUTS_CSV, read_outputs_csv
from trtbench.profiling.loadtest.stats.decisions import recorded_schedule
from trtbench.profiling.report import plots
from trtbench.profiling.report.acceptance_section import acceptance_lines
from trtbench.profiling.report.category_section import category_lines
from trtbench.profiling.report.comparison import (
    compare_keyed,
    compare_tiers,
    comparison_matrix,
    crossovers,
    launch_per_step,
    memory_extra,
    tier_table,
)
from trtbench.profiling.report.design_section import design_lines
from trtbench.profiling.report.followup_check import (
    CHECK_JSON,
    CHECK_SCHEMA_VERSION,
    FOLLOW_UP_DIR,
    check_lines,
)
from trtbench.profiling.report.inputs import RUN_CSV_SCHEMAS
from trtbench.profiling.report.kv_section import kv_lines
from trtbench.profiling.report.lossless_section import lossless_lines
from trtbench.profiling.report.markdown import (
    matrix_markdown,
    render_compare,
    render_report,
    run_notes,
    tiers_markdown,
)
from trtbench.profiling.report.page import write_page, write_run_page
from trtbench.profiling.report.ratios import (
    objective_tiers,
    open_note,
    pair_lines,
    ratio_legend,
    ratio_name,
)
from trtbench.profiling.report.recommendation import Recommendation
from trtbench.profiling.report.run_data import RunData, load_run

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunAnalysis:
    """Every table the report shows, computed from one run (frames; None: no such data)."""

    run: RunData
    variants: pd.DataFrame
    tiers: pd.DataFrame
    crossover: pd.DataFrame
    matrix: pd.DataFrame
    memory: pd.DataFrame | None
    launches: pd.DataFrame | None
    notes: list[str] = field(default_factory=list)


def variants_frame(run: RunData) -> pd.DataFrame:
    """The run's variants as a table (``variant`` plus every VariantInfo field)."""
    frame = records_to_frame(run.variants.values())
    return frame.rename(columns={"name": "variant"})


def analyze_run(run: RunData, rec: Recommendation | None = None) -> RunAnalysis:
    """Tier table, crossovers, memory, launches, matrix and notes of one run (no I/O).

    Args:
        run: the loaded run.
        rec: its recommendation: the speedups, crossovers and notes are then the
            objective's ratios (``ratios.py``), the TPOT ratio kept by name; None: the
            load test's TPOT speedups (``trtbench compare``, and the recommendation's input).
    """
    variants = variants_frame(run)
    tiers = tier_table(run.summary, variants, run.baseline)
    if rec is not None:
        tiers = objective_tiers(tiers, rec.ratios, run.baseline)
    memory = None
    if run.memory_breakdown is not None and len(run.memory_breakdown):
        memory = memory_extra(run.memory_breakdown, run.baseline)
    launches = launch_per_step(run.steps) if run.steps is not None else None
    notes = _stopped(run.run, set(tiers["variant"]))
    notes += run_notes(variants, tiers, memory, launches)
    raced = recorded_schedule(run.run.get("design")).sequential
    notes += open_note(rec.ratios, raced) if rec is not None else []
    if run.baseline is None:
        notes.insert(0, "No baseline variant in this run: speedups are not available.")
    measured = complete_tiers(tiers)
    return RunAnalysis(
        run,
        variants,
        tiers,
        crossovers(measured),
        comparison_matrix(measured, variants, memory),
        memory,
        launches,
        notes,
    )


def complete_tiers(tiers: pd.DataFrame) -> pd.DataFrame:
    """The tiers that are measurements (``tier_status`` complete); the others are listed in
    the per-tier table and the notes, never plotted or summarized."""
    return tiers[tiers["tier_status"] == "complete"].reset_index(drop=True)


def draw_plots(
    a: RunAnalysis, plots_dir: Path, ratio: str = "TPOT speedup"
) -> list[tuple[str, Path]]:
    """Every plot the data allows, as (caption, path), the speedup first; complete tiers
    only. ``ratio``: the name of the speedup the tier table holds (``ratios.ratio_name``)."""
    t = complete_tiers(a.tiers)
    out = [
        (
            "TTFT p50 (solid) and p95 (dashed)",
            plots.plot_vs_load(
                t,
                plots_dir / "ttft.png",
                [("ttft_p50_ms", "p50"), ("ttft_p95_ms", "p95")],
                "time to first token (ms)",
                "TTFT vs load (p50 solid, p95 dashed)",
            ),
        ),
        (
            "TPOT",
            plots.plot_vs_load(
                t,
                plots_dir / "tpot.png",
                [("tpot_mean_ms", "mean"), ("tpot_p50_ms", "p50")],
                "time per output token (ms)",
                "TPOT vs load (mean solid, p50 dashed)",
            ),
        ),
        (
            "Output throughput",
            plots.plot_vs_load(
                t,
                plots_dir / "throughput.png",
                [("output_tokens_per_s", "")],
                "output tokens/s (system)",
                "Output token throughput vs load",
            ),
        ),
    ]
    if a.run.baseline is not None:  # first: the answer's own figure
        out.insert(
            0,
            (
                f"Speedup ({ratio}) with its intervals, crossover marked",
                plots.plot_speedup(t, a.crossover, plots_dir / "speedup.png", ratio),
            ),
        )
    if (~t["mode"].isin(methods.NON_DRAFTING)).any():
        out.append(
            ("Tokens per step", plots.plot_acceptance(t, plots_dir / "acceptance.png"))
        )
    if a.memory is not None:
        memory_png = plots_dir / "memory.png"
        out.append(
            (
                "Memory breakdown",
                plots.plot_memory(a.run.memory_breakdown, a.memory, memory_png),
            )
        )
    if a.launches is not None and len(a.launches):
        out.append(
            (
                "Launch overhead per step",
                plots.plot_launch_overhead(
                    a.launches, plots_dir / "launch_overhead.png"
                ),
            )
        )
    return out


def _stopped(run: dict, measured: set[str]) -> list[str]:
    """A line when ``trtbench run`` was stopped by a signal: which variants it never reached."""
    section = run.get("run") if isinstance(run.get("run"), dict) else {}
    if not section.get("interrupted"):
        return []
    spec = (run.get("build") or {}).get("spec") or {}
    names = [v.get("name") for v in spec.get("variants") or [] if isinstance(v, dict)]
    missing = [f"`{n}`" for n in names if n and n not in measured]
    never = f"; never measured: {', '.join(missing)}" if missing else ""
    return [
        f"**The run was stopped by {section.get('stop_signal') or 'a signal'}**{never}. "
        "Tiers it finished are measurements; see each tier's status below."
    ]


def _header(a: RunAnalysis) -> list[str]:
    run = a.run.run
    lines = [f"Run directory: `{a.run.root}`. Baseline: `{a.run.baseline or 'none'}`."]
    host = run.get("host") if isinstance(run.get("host"), dict) else {}
    if host:
        gpus = host.get("gpus") or "none"
        lines.append(f"Host: {host.get('hostname', '?')}, GPUs: {gpus}.")
    lines += design_lines(run, a.run.rounds)
    fits, _ = fit_run(a.run.summary, a.run.variants, a.run.baseline)
    for f in fits:
        alpha = f"α = {f.alpha:.3f}, " if f.alpha is not None else ""
        cost = (
            ""
            if f.cost_ratio is None
            else (
                f"draft cost c = {f.cost_ratio:.3f}"
                if f.cost_kind == "c"
                else f"step cost v = {f.cost_ratio:.3f} x baseline"
            )
        )
        lines.append(
            f"Fitted (`trtbench plan --from-run`): `{f.variant}` E = {f.tokens_per_step:.2f} "
            f"tokens/step, {alpha}{cost}."
        )
    return lines


@dataclass(frozen=True)
class ReportResult:
    """What ``trtbench report`` wrote, the matrix it prints and the answer it ends with
    (recommendation.json's sentence)."""

    report_path: Path
    plot_paths: list[Path]
    matrix_markdown: str
    notes: list[str]
    answer: str | None = None
    page_path: Path | None = None


def write_report(
    root: Path, peers: Sequence[str | Path] = (), objective: str | None = None
) -> ReportResult:
    """Render ``report.md`` (opening with the Recommendation), ``recommendation.json`` and
    ``plots/*.png`` into the run directory from its CSVs.

    Args:
        root: the run directory.
        peers: AIPerf runs (``[NAME=]DIR``, ``pipeline/peers.py``) shown beside its variants.
        objective: the recommendation's objective (None: run.json's ``report.objective``).

    Raises:
        ConfigError: the run directory or its summary.csv is missing, a peer is not a
            readable AIPerf artifact directory, or the objective is unknown or needs SLOs
            the run lacks.
    """
    loaded = [load_peer(p) for p in peers]
    run = with_peers(load_run(root, RUN_CSV_SCHEMAS), loaded)
    first = analyze_run(run)
    kv = read_kv_pressure(run.root)
    advice = recommend_run(
        run, first.tiers, first.variants, first.memory, objective, kv
    )
    rec = advice.recommendation
    a = analyze_run(run, rec)  # every speedup on the objective's ratio
    a.notes.extend(note for peer in loaded for note in peer.notes)
    rd = RunDir(run.root)
    name = ratio_name(rec.objective)
    drawn = draw_plots(a, rd.plots_dir, name)
    rel = [(caption, str(path.relative_to(run.root))) for caption, path in drawn]
    outputs = rd.loadtest_dir / OUTPUTS_CSV
    lossless = lossless_lines(
        run.summary,
        read_outputs_csv(outputs) if outputs.is_file() else None,
        run.baseline,
    )
    legend = ratio_legend(rec.objective, rec.ratios)
    matrix_md = matrix_markdown(a.matrix, name, legend)
    tiers_md = tiers_markdown(a.tiers, name)
    if rec.pairs:
        tiers_md += "\n\n" + "\n".join(pair_lines(rec.pairs, rec.objective))
    text = render_report(
        f"trtbench report: {run.name}",
        matrix_md,
        tiers_md,
        a.memory,
        a.launches,
        a.notes,
        rel,
        _header(a),
        [
            *([*advice.appendix, ""] if advice.appendix else []),
            *lossless,
            "",
            *acceptance_lines(run.acceptance, run.summary),
            *category_lines(run.categories, run.baseline, run.category_acceptance),
            *([""] + kv_lines(kv) if kv is not None else []),
        ],
        [*advice.lines, *follow_up_lines(run.root)],
    )
    write_json_atomic(run.root / RECOMMENDATION_JSON, advice.document)
    path = rd.report_md
    path.write_text(text)
    answer = advice.document.get("answer")
    page = write_run_page(path, answer, run, complete_tiers(a.tiers), a.crossover, name)
    return ReportResult(
        path,
        [p for _, p in drawn],
        "## Comparison matrix\n\n" + matrix_md,
        a.notes,
        answer,
        page,
    )


def follow_up_lines(root: Path) -> list[str]:
    """The "Follow-up check" section from ``RUN/follow-up/check.json`` (``trtbench
    follow-up``), after a blank line; [] when there is none.

    Raises:
        DataFileError: check.json is damaged or newer than this code reads.
    """
    path = Path(root) / FOLLOW_UP_DIR / CHECK_JSON
    if not path.is_file():
        return []
    fix = f"run `trtbench follow-up {root}` again, or delete it"
    doc = read_json_document(path, max_schema_version=CHECK_SCHEMA_VERSION, fix=fix)
    return ["", *check_lines(doc)]


MEMORY_GIB = ("weights_gib", "peak_gib")


def _gib(memory: pd.DataFrame) -> pd.DataFrame:
    """:func:`memory_extra` output with weights and peak in GiB (for the side-by-side)."""
    out = memory[["variant"]].copy()
    out["weights_gib"] = memory["weights_bytes"] / 1024**3
    out["peak_gib"] = memory["peak_bytes"] / 1024**3
    return out


@dataclass(frozen=True)
class CompareResult:
    """The comparison as Markdown, and where it was written (None: only printed)."""

    markdown: str
    path: Path | None


def compare_runs(
    run_a: str | Path, run_b: str | Path, out: Path | None = None
) -> CompareResult:
    """Compare two runs tier by tier, by memory and by launch overhead. Either may be an
    AIPerf run (``[NAME=]DIR``, ``pipeline/peers.py``); rows pair up by (variant, tier).

    Raises:
        ConfigError: either run directory or its summary.csv is missing, or an AIPerf
            directory is malformed.
    """
    for arg in (run_a, run_b):  # both named before either is searched
        if not (path := Path(split_label(arg)[1])).exists():
            raise ConfigError(
                f"{path} does not exist; give a run directory (or an AIPerf artifact "
                "directory, [NAME=]DIR)"
            )
    loaded_a, loaded_b = (
        load_any(run_a, RUN_CSV_SCHEMAS),
        load_any(run_b, RUN_CSV_SCHEMAS),
    )
    a, b = analyze_run(loaded_a.run), analyze_run(loaded_b.run)
    tiers = compare_tiers(a.tiers, b.tiers)
    memory = None
    if a.memory is not None and b.memory is not None:
        memory = compare_keyed(_gib(a.memory), _gib(b.memory), "variant", MEMORY_GIB)
    launches = None
    if a.launches is not None and b.launches is not None:
        metrics = ("launch_overhead_mean_ms", "launch_calls_per_step")
        launches = compare_keyed(a.launches, b.launches, "trace", metrics)
    text = render_compare(a.run.name, b.run.name, tiers, memory, launches)
    peer_notes = [*loaded_a.notes, *loaded_b.notes]
    if peer_notes:
        text += "\n" + "\n".join(f"- {note}" for note in peer_notes) + "\n"
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        write_page(out)  # report.html beside it (the tables; no figures)
    return CompareResult(text, out)
