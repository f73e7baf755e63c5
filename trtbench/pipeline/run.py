"""``trtbench run``: build → deploy (one server per variant, stopped after) → tiers → CSVs.

For each variant in spec order: render its model repository, start its tritonserver with the
memory sampler already running (phase ``load``), warm up (phase ``warmup``), run every tier
(phases ``tier:<label>``, with Triton's ``/metrics`` scraped throughout), stop the server.
Then write ``loadtest/{requests,responses,summary}.csv``, ``memory.csv``,
``server_metrics.csv`` and ``memory_breakdown.csv``, and last ``report.md`` with
``plots/*.png`` (the library call behind ``trtbench report``). A failure or Ctrl-C in the
middle keeps what was measured: the CSVs are written for what finished and the server is
stopped; a report that cannot be rendered is a warning, never a lost CSV.

With ``profile.nsys`` each server runs under an nsys session that records one tier
(:mod:`trtbench.pipeline.tier_capture`); nsys is looked up before anything is built.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

import pandas as pd

from trtbench.builders.build import build_variants, describe_build
from trtbench.errors import TrtbenchError
from trtbench.pipeline.deploy import deploy_variant, server_config
from trtbench.pipeline.loadtest import (
    LoadtestOutcome,
    connect,
    failure_lines,
    make_prompts,
    measure,
    open_tokenizer,
    result_json,
    write_loadtest,
)
from trtbench.pipeline.preflight import check_served_prompts
from trtbench.pipeline.report import write_report
from trtbench.pipeline.tier_capture import (
    TierCapture,
    analyze_capture,
    capture_for,
    check_nsys,
)
from trtbench.profiling.loadtest.health import Health, HealthCheck
from trtbench.profiling.loadtest.outcome import LoadResult
from trtbench.profiling.loadtest.prompts import Prompt, TextTokenizer
from trtbench.profiling.loadtest.schedule import Tier
from trtbench.profiling.loadtest.target import Progress
from trtbench.profiling.memory.breakdown import (
    load_variant_inputs,
    memory_breakdown,
    write_memory_breakdown_csv,
)
from trtbench.profiling.memory.sampler import MemorySampler, write_memory_csv
from trtbench.profiling.memory.server_metrics import (
    ServerMetricsScraper,
    write_server_metrics_csv,
)
from trtbench.profiling.traces.nsys_session import nsys_launch_argv
from trtbench.run_dir import RunDir
from trtbench.spec import BenchSpec, VariantSpec
from trtbench.stop_signals import StopSignal, signal_name
from trtbench.triton_repo.interface import RepoMetadata, read_repo_metadata
from trtbench.triton_repo.server import TritonServer

log = logging.getLogger(__name__)


class RunProgress(Progress, Protocol):
    """Tier progress plus one line per finished stage (a build, a server ready)."""

    def stage(self, message: str) -> None: ...


@dataclass
class _Collected:
    """What the variants produced so far (kept when a later one fails)."""

    results: dict[str, LoadResult] = field(default_factory=dict)
    memory: dict[str, pd.DataFrame] = field(default_factory=dict)
    metrics: dict[str, pd.DataFrame] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    traces: dict[str, list[Path]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


class _Marking:
    """Progress that also labels the samplers' phases with the tier (``tier:c8``) and
    opens/closes the nsys collection around the profiled tier."""

    def __init__(
        self, inner: Progress | None, samplers: list, capture: TierCapture | None = None
    ) -> None:
        self.inner, self.samplers, self.capture = inner, samplers, capture

    def tier_started(self, variant: str, tier: Tier, total: int | None) -> None:
        if self.capture is not None:
            self.capture.tier_started(tier)
        for sampler in self.samplers:
            sampler.mark(f"tier:{tier.label}")
        if self.inner is not None:
            self.inner.tier_started(variant, tier, total)

    def request_done(self, ok: bool) -> None:
        if self.inner is not None:
            self.inner.request_done(ok)

    def tier_ended(self) -> None:
        if self.capture is not None:
            self.capture.tier_ended()
        if self.inner is not None:
            self.inner.tier_ended()


def endpoint_of(meta: RepoMetadata) -> str:
    """The generator's endpoint kind for a deployed repository (its ``trtbench.json``)."""
    if not meta.decoupled:
        return "unary"
    return "stream" if meta.streaming else "nostream"


@contextlib.contextmanager
def _sampled_server(
    rd: RunDir,
    variant: VariantSpec,
    spec: BenchSpec,
    meta: RepoMetadata,
    capture: TierCapture | None = None,
    warn: bool = True,
) -> Iterator[tuple[TritonServer, list]]:
    """Start the variant's server inside the memory sampler (and the /metrics scraper),
    under ``nsys launch`` when ``capture`` is given; ``warn``: say at WARNING when NVML is
    missing (the first variant of a run; later ones at INFO)."""
    config = server_config(rd, variant.name, meta, spec.deploy)
    if capture is not None:
        config = replace(config, wrapper_argv=tuple(nsys_launch_argv(capture.session)))
    server = TritonServer(config)

    def pid() -> int | None:
        return server.process.pid if server.process is not None else None

    memory = MemorySampler(
        pid,
        variant=variant.name,
        interval_ms=spec.profile.memory_interval_ms,
        phase="load",
        warn_unavailable=warn,
    )
    with memory, server, contextlib.ExitStack() as stack:
        memory.mark("warmup")
        samplers: list = [memory]
        if spec.profile.scrape_metrics:
            scraper = ServerMetricsScraper(
                server.metrics_url,
                variant=variant.name,
                interval_ms=spec.profile.metrics_interval_ms,
                phase="warmup",
            )
            samplers.append(stack.enter_context(scraper))
        yield server, samplers


def _measure_variant(
    rd: RunDir,
    spec: BenchSpec,
    variant: VariantSpec,
    prompts: list[Prompt] | None,
    progress: RunProgress | None,
    got: _Collected,
    nsys: Path | None = None,
) -> list[Prompt]:
    """Deploy, serve and load-test one variant; record its results in ``got``.

    With ``nsys`` (``profile.nsys``) the server runs under an nsys session that records the
    profiled tier; the trace is analyzed once the server is stopped.
    """
    start = time.monotonic()
    repo = deploy_variant(rd, variant.name, spec.deploy)
    meta = read_repo_metadata(repo)
    tokenizer: TextTokenizer | None = open_tokenizer(Path(meta.tokenizer_dir))
    prompts = prompts or make_prompts(spec.loadtest, tokenizer)
    check_served_prompts(prompts, meta, tokenizer)
    samplers: list = []
    capture = capture_for(rd, spec, variant.name, nsys)
    try:
        warn = not got.memory  # NVML missing: a WARNING for the first variant only
        served = _sampled_server(rd, variant, spec, meta, capture, warn)
        with served as (server, samplers):
            _stage(
                progress,
                f"{variant.name}: serving {meta.model_name} at {server.grpc_url} "
                f"(ready after {time.monotonic() - start:.1f} s)",
            )
            target = connect(
                server.grpc_url,
                meta.model_name,
                endpoint=endpoint_of(meta),
                fixed_output_len=spec.loadtest.fixed_output_len,
                extra_inputs=meta.extra_inputs,
            )
            marking = _Marking(progress, samplers, capture)
            got.results[variant.name] = measure(
                target,
                spec.loadtest,
                variant.name,
                prompts,
                rd,
                tokenizer,
                marking,
                health=server_health(server),
            )
    finally:
        for sampler in samplers:
            frame = sampler.frame()
            if isinstance(sampler, MemorySampler):
                got.memory[variant.name] = frame
            else:
                got.metrics[variant.name] = frame
        got.seconds[variant.name] = round(time.monotonic() - start, 3)
        if capture is not None:
            capture.close()
            got.traces[variant.name], notes = analyze_capture(capture)
            got.notes.extend(notes)
    return prompts


def server_health(server: TritonServer) -> HealthCheck:
    """The load generator's check of a managed server: its process (an exit is fatal at
    once) and its HTTP readiness (a failure must repeat before it counts)."""

    def check() -> Health:
        reason = server.health()  # it names the exit once the process has gone
        proc = server.process
        gone = proc is None or proc.poll() is not None
        return Health(reason, fatal=reason is not None and gone)

    return check


def _stage(progress: RunProgress | None, message: str) -> None:
    """A finished stage: an INFO record (for RUN_DIR/trtbench.log) and a progress line."""
    log.info("%s", message)
    if progress is not None:
        progress.stage(message)


def _write_profiles(rd: RunDir, got: _Collected) -> None:
    """memory.csv, server_metrics.csv and memory_breakdown.csv from what was sampled."""
    frames = [f for f in got.memory.values() if not f.empty]
    if frames:
        write_memory_csv(pd.concat(frames, ignore_index=True), rd.memory_csv)
    metrics = [f for f in got.metrics.values() if not f.empty]
    if metrics:
        write_server_metrics_csv(
            pd.concat(metrics, ignore_index=True), rd.server_metrics_csv
        )
    inputs = [
        load_variant_inputs(
            rd.build_json(name),
            memory=memory,
            server_metrics=got.metrics.get(name),
        )
        for name, memory in got.memory.items()
        if rd.build_json(name).is_file()
    ]
    if inputs:
        write_memory_breakdown_csv(memory_breakdown(inputs), rd.memory_breakdown_csv)


def baseline_of(spec: BenchSpec, names: list[str]) -> str | None:
    """The first measured variant whose mode is baseline (the speedups' reference)."""
    return next((v.name for v in spec.variants if v.mode == "baseline"
                 and v.name in names), None)  # fmt: skip


def run_bench(
    spec: BenchSpec,
    out: RunDir,
    variants: tuple[str, ...] = (),
    progress: RunProgress | None = None,
    prompts: list[Prompt] | None = None,
) -> LoadtestOutcome:
    """Build, deploy, load-test and profile the variants of ``spec`` into ``out``.

    Args:
        spec: the validated bench spec.
        out: the run directory.
        variants: variant names (default: all, in spec order).
        progress: per-tier progress and stage lines (the CLI's rich bar).
        prompts: the prompts :func:`~trtbench.pipeline.preflight.preflight_run` made
            (default: made from the spec with the first variant's tokenizer).

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
    for manifest in build_variants(spec, [v.name for v in selected], None, out):
        if progress is not None:  # build_variants logged it already
            progress.stage(describe_build(manifest, dry_run=False))
    got = _Collected()
    failure: TrtbenchError | None = None
    stopped: int | None = None
    try:
        for variant in selected:
            prompts = _measure_variant(out, spec, variant, prompts, progress, got, nsys)
            result = got.results[variant.name]
            if result.interrupted:
                break
            if result.server_failure is not None:  # the next variant has its own server
                log.info("%s: %s", variant.name, result.server_failure)
    except TrtbenchError as exc:
        failure = exc
    except (
        StopSignal
    ) as exc:  # outside a tier (deploy, server start): keep what finished
        stopped = exc.signum
    finally:
        outcome = _finish(out, spec, got, stopped)
    if failure is not None:
        raise failure
    return outcome


def _finish(
    out: RunDir, spec: BenchSpec, got: _Collected, stopped: int | None = None
) -> LoadtestOutcome:
    signals = [r.stop_signal for r in got.results.values() if r.stop_signal]
    stop_signal = stopped or (signals[0] if signals else None)
    failures = failure_lines(got.results)
    _write_profiles(out, got)
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
        },
    )
    traces = [p for files in got.traces.values() for p in files]
    outcome = LoadtestOutcome(
        pd.DataFrame(), out, stop_signal is not None, list(got.notes), traces,
        stop_signal=stop_signal, failures=failures,
    )  # fmt: skip
    if not any(r.tiers for r in got.results.values()):
        return outcome
    baseline = baseline_of(spec, list(got.results))
    summary, warnings = write_loadtest(
        out, got.results, spec.loadtest.slos, baseline, spec.loadtest.warmup_s
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
