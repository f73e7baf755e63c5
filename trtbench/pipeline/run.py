"""``trtbench run``: build → deploy → tiers in rounds → CSVs → report.

Each variant's server (its tritonserver with a rendered model repository, or for ``server:
vllm`` its vLLM server) starts with the memory sampler already running (phase ``load``), is
warmed up (phase ``warmup``) and measured tier by tier (phases ``tier:<label>``, ``/metrics``
scraped throughout), in the run's design (:mod:`trtbench.pipeline.measuring`): by default
every server up at once and the (tier, variant) cells interleaved in shuffled rounds, so each
ratio pairs two variants measured side by side in time. Then write
``loadtest/{requests,responses,summary,rounds}.csv``, ``memory.csv``, ``server_metrics.csv``
and ``memory_breakdown.csv``, and last ``report.md`` with ``plots/*.png`` (the library call
behind ``trtbench report``). A failure or Ctrl-C in the middle keeps what was measured: the
CSVs are written for what finished and every server is stopped; a report that cannot be
rendered is a warning, never a lost CSV.

With ``profile.nsys`` each server runs under an nsys session that records one tier
(:mod:`trtbench.pipeline.tier_capture`); nsys is looked up before anything is built.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import pandas as pd

from trtbench.builders.build import build_variants
from trtbench.core import methods
from trtbench.core.errors import TrtbenchError
from trtbench.core.run_dir import RunDir
from trtbench.core.stop_signals import StopSignal, signal_name
from trtbench.pipeline.context import RunContext
from trtbench.pipeline.loadtest import (
    LoadtestOutcome,
    failure_lines,
    result_json,
    write_loadtest,
)
from trtbench.pipeline.measuring import measure_variants, plan_design
from trtbench.pipeline.report import write_report
from trtbench.pipeline.serving import Collected, own_tree
from trtbench.pipeline.stages import BUILD, RunProgress
from trtbench.pipeline.tier_capture import check_nsys
from trtbench.profiling.loadtest.records.host_load import HostLoadMeter
from trtbench.profiling.loadtest.workload.prompts import Prompt
from trtbench.profiling.memory.breakdown import (
    load_variant_inputs,
    memory_breakdown,
    write_memory_breakdown_csv,
)
from trtbench.profiling.memory.nvml import try_open_nvml
from trtbench.profiling.memory.sampler import write_memory_csv
from trtbench.profiling.memory.server_metrics import write_server_metrics_csv
from trtbench.spec.bench import BenchSpec

__all__ = ["RunProgress", "baseline_of", "render_report", "run_bench"]

log = logging.getLogger(__name__)


def _write_profiles(rd: RunDir, got: Collected, order: list[str]) -> None:
    """memory.csv, server_metrics.csv and memory_breakdown.csv from what was sampled,
    variants in spec ``order`` (servers may finish in any order)."""
    memory = {n: got.memory[n] for n in order if n in got.memory}
    frames = [f for f in memory.values() if not f.empty]
    if frames:
        write_memory_csv(pd.concat(frames, ignore_index=True), rd.memory_csv)
    metrics = [got.metrics[n] for n in order if n in got.metrics]
    metrics = [f for f in metrics if not f.empty]
    if metrics:
        write_server_metrics_csv(
            pd.concat(metrics, ignore_index=True), rd.server_metrics_csv
        )
    inputs = [
        load_variant_inputs(
            rd.build_json(name),
            memory=frame,
            server_metrics=got.metrics.get(name),
        )
        for name, frame in memory.items()
        if rd.build_json(name).is_file()
    ]
    if inputs:
        write_memory_breakdown_csv(memory_breakdown(inputs), rd.memory_breakdown_csv)


def baseline_of(spec: BenchSpec, names: list[str]) -> str | None:
    """The first measured variant whose mode is baseline (the speedups' reference)."""
    baselines = (
        v.name
        for v in spec.variants
        if methods.drafts_nothing(v.mode) and v.name in names
    )
    return next(baselines, None)


def run_bench(
    spec: BenchSpec,
    out: RunDir,
    variants: tuple[str, ...] = (),
    progress: RunProgress | None = None,
    prompts: list[Prompt] | None = None,
    tiers_of_variant: Mapping[str, Sequence[str]] | None = None,
    checked: bool = False,
) -> LoadtestOutcome:
    """Build, deploy, load-test and profile the variants of ``spec`` into ``out``.

    Args:
        spec: the validated bench spec.
        out: the run directory.
        variants: variant names (default: all, in spec order).
        progress: where the stages are reported (:mod:`trtbench.pipeline.stages`: the
            builds, the server starts, the cells; the CLI's one line per stage).
        prompts: the prompts :func:`~trtbench.pipeline.preflight.preflight_run` made
            (default: made from the spec with the first variant's tokenizer).
        tiers_of_variant: variant → the tier labels it measures (default: every tier;
            the follow-up measures each best fixed variant where it was best).
        checked: the variants' build checks ran already
            (:func:`~trtbench.pipeline.preflight.preflight_run`); not again before the build.

    Returns:
        The load-test outcome (summary, warnings, interrupted flag) whose ``files`` are
        report.md and the plots (see :func:`render_report`).

    Raises:
        ConfigError, BuildError, ModelMismatchError: build stage; ConfigError also for a
            ``profile.nsys_tier`` that is not a tier (checked before building).
        NotAvailableError: ``profile.nsys`` without nsys installed (before building).
        DeployError, ServerStartError, LoadTestError: a variant could not be served or
            measured (the CSVs of the variants before it are written first).
    """
    selected = spec.select(variants)
    nsys = check_nsys(spec)
    plan = plan_design(spec, selected, tiers_of_variant)
    names = [v.name for v in selected]
    built = None if progress is None else (lambda m: progress.advance(m.name))
    if progress is not None:
        progress.start(BUILD, len(names), "variant")
    build_variants(spec, names, None, out, checked=checked, on_built=built)
    got = Collected(meter=HostLoadMeter(own_tree, try_open_nvml()[0]))
    design, cells = plan
    ctx = RunContext(
        out, spec, tuple(selected), design, tuple(cells), progress, got, nsys
    )
    failure: TrtbenchError | None = None
    stopped: int | None = None
    try:
        measure_variants(ctx, prompts)
    except TrtbenchError as exc:
        failure = exc
    except (
        StopSignal
    ) as exc:  # outside a tier (deploy, server start): keep what finished
        stopped = exc.signum
    finally:
        if progress is not None:
            progress.stop()  # the last stage's line, before the files are written
        outcome = _finish(out, spec, got, stopped, failure)
    if failure is not None:
        raise failure
    return outcome


def _finish(
    out: RunDir,
    spec: BenchSpec,
    got: Collected,
    stopped: int | None = None,
    failure: TrtbenchError | None = None,
) -> LoadtestOutcome:
    signals = [r.stop_signal for r in got.results.values() if r.stop_signal]
    stop_signal = stopped or (signals[0] if signals else None)
    failures = failure_lines(got.results)
    _write_profiles(out, got, [v.name for v in spec.variants])
    out.update_run_json(
        "run",
        {
            "variants": {
                name: {
                    **result_json(r),
                    "seconds": got.seconds.get(name),
                    "nsys_files": [str(p) for p in got.traces.get(name, [])],
                }
                for name, r in got.results.items()
            },
            "interrupted": stop_signal is not None,
            "stop_signal": None if stop_signal is None else signal_name(stop_signal),
            # why the run stopped early (a server that did not start, a deploy error):
            # the terminal's line, kept with the results
            "failure": None
            if failure is None
            else {"error": type(failure).__name__, "message": str(failure)},
        },
    )
    traces = [p for files in got.traces.values() for p in files]
    outcome = LoadtestOutcome(
        pd.DataFrame(),
        out,
        stop_signal is not None,
        list(got.notes),
        traces,
        stop_signal=stop_signal,
        failures=failures,
    )
    if not any(r.tiers for r in got.results.values()):
        return outcome
    baseline = baseline_of(spec, list(got.results))
    summary, warnings = write_loadtest(
        out,
        got.results,
        spec.loadtest.slos,
        baseline,
        spec.loadtest.warmup_s,
        got.cells,
    )
    if baseline is not None:  # later `trtbench loadtest --out` runs compare against it
        out.update_run_json("baseline", baseline)
    files, problems = render_report(out)
    return replace(
        outcome,
        summary=summary,
        warnings=warnings + got.notes + problems,
        files=traces + files,
    )


def render_report(out: RunDir) -> tuple[list[Path], list[str]]:
    """``report.md`` and ``plots/*.png`` from the CSVs just written (as ``trtbench report``).

    Runs after every CSV is on disk, so a failure here loses no measurement: it becomes a
    warning that says how to render the report again.

    Returns:
        (files written: report.md first, then the plots; warnings).
    """
    try:
        result = write_report(out.root)
    except Exception as exc:  # noqa: BLE001 - the CSVs are kept; the user reruns report
        log.debug("report failed", exc_info=True)
        return [], [
            f"report.md was not written ({type(exc).__name__}: {exc}); the CSVs are kept, "
            f"render it with `trtbench report {out.root}`"
        ]
    log.info("wrote %s and %d plots", result.report_path, len(result.plot_paths))
    return [result.report_path, *result.plot_paths], []
