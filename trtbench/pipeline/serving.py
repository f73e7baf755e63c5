"""Serve one variant and measure it: the per-variant step of ``trtbench run``.

A variant is served by its own tritonserver (``server: triton``, the default: its model
repository is rendered first), by its own vLLM server (``server: vllm``:
:mod:`trtbench.pipeline.vllm_deploy`) or by its own trtllm-serve (``server: trtllm-serve``:
:mod:`trtbench.pipeline.trtllm_deploy`). Either way the server starts inside the memory
sampler (phase ``load``), its Prometheus text is scraped throughout (``/metrics``; trtllm-serve's
``/prometheus/metrics``), the load generator warms up (phase ``warmup``) and runs every tier
(phases ``tier:<label>``), and the server is stopped with its whole process group. Triton is
driven over gRPC streaming; vLLM and trtllm-serve over OpenAI completions (SSE), their
speculative counts read from each server's own counters around each tier
(``profiling/loadtest/clients/counter_reader.py``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

import pandas as pd

from trtbench.core import stacks
from trtbench.pipeline.context import RunContext
from trtbench.pipeline.deploy import deploy_variant, server_config
from trtbench.pipeline.loadtest import connect, make_prompts, measure, open_tokenizer
from trtbench.pipeline.preflight import check_served_prompts
from trtbench.pipeline.stages import RunProgress, cell_label
from trtbench.pipeline.tier_capture import TierCapture, analyze_capture, capture_for
from trtbench.profiling.loadtest.clients.health import Health, HealthCheck
from trtbench.profiling.loadtest.clients.target import API_COMPLETIONS, LoadTarget
from trtbench.profiling.loadtest.files.rounds_table import CellTiming
from trtbench.profiling.loadtest.records.host_load import HostLoadMeter, HostSnapshot
from trtbench.profiling.loadtest.records.outcome import LoadResult
from trtbench.profiling.loadtest.workload.prompts import Prompt, TextTokenizer
from trtbench.profiling.loadtest.workload.repeats import TierPass, combine_results
from trtbench.profiling.loadtest.workload.schedule import Tier
from trtbench.profiling.memory.sampler import MemorySampler
from trtbench.profiling.memory.server_metrics import ServerMetricsScraper
from trtbench.profiling.traces.nsys_session import nsys_launch_argv
from trtbench.spec.bench import BenchSpec, VariantSpec
from trtbench.triton_repo.interface import RepoMetadata, read_repo_metadata
from trtbench.triton_repo.server import TritonServer
from trtbench.trtllm_server.server import TrtllmServer
from trtbench.vllm_server.server import VllmServer

OpenAIServer = VllmServer | TrtllmServer  # the servers driven over OpenAI completions

log = logging.getLogger(__name__)


class ManagedServer(Protocol):
    """What the run needs of a server it started (TritonServer, VllmServer,
    TrtllmServer)."""

    process: object
    metrics_url: str

    def health(self, timeout_s: float = 0.5) -> str | None: ...


def own_tree() -> list[int]:
    """trtbench's own process tree: this process, whose descendants are its client
    workers and every server it started."""
    return [os.getpid()]


@dataclass
class Collected:
    """What the variants of a run produced so far (kept when a later one fails).

    ``cells``: when each tier pass ran and what else used the host meanwhile, measured by
    ``meter`` around every pass (rounds.csv).
    """

    results: dict[str, LoadResult] = field(default_factory=dict)
    memory: dict[str, pd.DataFrame] = field(default_factory=dict)
    metrics: dict[str, pd.DataFrame] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    traces: dict[str, list[Path]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    cells: list[CellTiming] = field(default_factory=list)
    warned_nvml: bool = False
    meter: HostLoadMeter = field(default_factory=lambda: HostLoadMeter(own_tree))

    _nvml_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def first_to_warn(self) -> bool:
        """Whether this server's memory sampler is the first of the run (it alone warns
        that NVML is missing); safe when servers start in threads."""
        with self._nvml_lock:
            first, self.warned_nvml = not self.warned_nvml, True
        return first

    def keep_samples(self, variant: str, samplers: list) -> None:
        """Keep what ``variant``'s samplers read (after an earlier start's, if any)."""
        for sampler in samplers:
            store = self.memory if isinstance(sampler, MemorySampler) else self.metrics
            frame, old = sampler.frame(), store.get(variant)
            both = [f for f in (old, frame) if f is not None and not f.empty]
            store[variant] = pd.concat(both, ignore_index=True) if both else frame


class TierMarking:
    """The driver's tier progress: labels the samplers' phases with the tier (``tier:c8``),
    opens and closes the nsys collection around the profiled tier, records each pass's
    :class:`CellTiming` (its round: the passes of that variant and tier before it) with the
    host's load meanwhile into ``cells``, and advances the run's progress by one cell as
    each pass ends (:func:`~trtbench.pipeline.stages.cell_label`)."""

    def __init__(
        self,
        inner: RunProgress | None,
        samplers: list,
        capture: TierCapture | None = None,
        got: Collected | None = None,
    ) -> None:
        self.inner, self.samplers, self.capture, self.got = (
            inner,
            samplers,
            capture,
            got,
        )
        self._open: tuple[str, str, int, float, HostSnapshot | None] | None = None

    def tier_started(self, variant: str, tier: Tier, total: int | None) -> None:
        if self.capture is not None:
            self.capture.tier_started(tier)
        for sampler in self.samplers:
            sampler.mark(f"tier:{tier.label}")
        if self.got is not None:
            snapshot = self.got.meter.start()
            self._open = (
                variant,
                tier.label,
                time.perf_counter_ns(),
                time.time(),
                snapshot,
            )

    def request_done(self, ok: bool) -> None:
        pass  # the run's progress counts cells, not requests

    def tier_ended(self) -> None:
        if self.capture is not None:
            self.capture.tier_ended()
        if self.got is not None and self._open is not None:
            variant, label, start_ns, unix_s, snapshot = self._open
            host = self.got.meter.stop(snapshot)
            rounds = sum(
                c.variant == variant and c.tier == label for c in self.got.cells
            )
            self.got.cells.append(
                CellTiming(
                    variant,
                    label,
                    rounds,
                    start_ns,
                    time.perf_counter_ns(),
                    unix_s,
                    host,
                )
            )
            self._open = None
            if self.inner is not None:
                self.inner.advance(cell_label(variant, label, rounds))


def endpoint_of(meta: RepoMetadata) -> str:
    """The generator's endpoint kind for a deployed repository (its ``trtbench.json``)."""
    if not meta.decoupled:
        return "unary"
    return "stream" if meta.streaming else "nostream"


def server_health(server: ManagedServer) -> HealthCheck:
    """The load generator's check of a managed server: its process (an exit is fatal at
    once) and its HTTP readiness (a failure must repeat before it counts)."""

    def check() -> Health:
        reason = server.health()  # it names the exit once the process has gone
        proc = server.process
        gone = proc is None or proc.poll() is not None  # type: ignore[attr-defined]
        return Health(reason, fatal=reason is not None and gone)

    return check


@contextlib.contextmanager
def sampled(
    server: TritonServer | OpenAIServer,
    variant: str,
    spec: BenchSpec,
    warn: bool = True,
) -> Iterator[list]:
    """Start ``server`` inside the memory sampler (its whole process tree) and, with
    ``profile.scrape_metrics``, the ``/metrics`` scraper; stop it (whole process group) on
    exit. ``warn``: say at WARNING when NVML is missing (the first variant of a run).

    Yields:
        The samplers (memory first), whose phase the tier hooks mark.
    """

    def pid() -> int | None:
        return server.process.pid if server.process is not None else None

    memory = MemorySampler(
        pid,
        variant=variant,
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
                variant=variant,
                interval_ms=spec.profile.metrics_interval_ms,
                phase="warmup",
            )
            samplers.append(stack.enter_context(scraper))
        yield samplers


@dataclass(frozen=True)
class Served:
    """A variant whose server is up and connected (inside :func:`served`)."""

    variant: str
    target: LoadTarget
    tokenizer: TextTokenizer | None
    prompts: list[Prompt]
    marking: TierMarking
    health: HealthCheck
    stop_soon: Callable[[], None]
    """End the server's scrapes (their last read while it still serves) and send it
    SIGTERM without waiting; leaving :func:`served` then waits for the exit. For a caller
    that holds several servers, so they shut down side by side."""


@contextlib.contextmanager
def served(
    ctx: RunContext,
    variant: VariantSpec,
    prompts: list[Prompt] | None,
    nsys: Path | None = None,
) -> Iterator[Served]:
    """Deploy and start ``variant``'s server inside its samplers and connect to it; on exit
    stop it and keep what its samplers read in ``ctx.got`` (appended to an earlier start's).

    With ``nsys`` (``profile.nsys``) a Triton server runs under an nsys session that records
    the profiled tier; the trace is analyzed once the server is stopped. The memory sampler
    warns about a missing NVML for the first server of a run only.

    Raises:
        DeployError, ServerStartError, LoadTestError, ConfigError: the variant could not be
            deployed, started or connected to (what was sampled is kept in ``ctx.got``).
    """
    rd, spec, progress, got = ctx.rd, ctx.spec, ctx.progress, ctx.got
    start = time.monotonic()
    warn = got.first_to_warn()  # NVML missing: one WARNING
    capture: TierCapture | None = None
    meta: RepoMetadata | None = None
    server: TritonServer | OpenAIServer
    serving = stacks.server(variant.server)
    if serving.launch is not None and serving.tokenizer_dir is not None:
        server = stacks.load(serving.launch)(rd, variant.name, spec)
        tokenizer = open_tokenizer(stacks.load(serving.tokenizer_dir)(rd, variant.name))
        prompts = prompts or make_prompts(spec.loadtest, tokenizer)
    else:
        repo = deploy_variant(rd, variant.name, spec.deploy)
        meta = read_repo_metadata(repo)
        tokenizer = open_tokenizer(Path(meta.tokenizer_dir))
        prompts = prompts or make_prompts(spec.loadtest, tokenizer)
        check_served_prompts(prompts, meta, tokenizer)
        capture = capture_for(rd, spec, variant.name, nsys)
        config = server_config(rd, variant.name, meta, spec.deploy)
        if capture is not None:
            config = replace(
                config, wrapper_argv=tuple(nsys_launch_argv(capture.session))
            )
        server = TritonServer(config)
    samplers: list = []
    try:
        with sampled(server, variant.name, spec, warn) as samplers:
            target, how = _connect(server, serving, spec, tokenizer, meta)
            log.info(
                "%s: serving %s (ready after %.1f s)",
                variant.name,
                how,
                time.monotonic() - start,
            )
            marking = TierMarking(progress, samplers, capture, got)

            def stop_soon() -> None:
                for sampler in samplers[1:]:  # the scrapers; memory samples to the end
                    sampler.stop()
                server.signal_stop()

            yield Served(
                variant.name,
                target,
                tokenizer,
                prompts,
                marking,
                server_health(server),
                stop_soon,
            )
    finally:
        got.keep_samples(variant.name, samplers)
        got.seconds[variant.name] = round(
            got.seconds.get(variant.name, 0.0) + time.monotonic() - start, 3
        )
        if capture is not None:
            capture.close()
            got.traces[variant.name], notes = analyze_capture(capture)
            got.notes.extend(notes)


def measure_variant(
    ctx: RunContext,
    variant: VariantSpec,
    prompts: list[Prompt] | None,
    nsys: Path | None = None,
    passes: Sequence[TierPass] | None = None,
) -> list[Prompt]:
    """Serve ``variant`` (under ``nsys``, if given) and run ``passes`` on it (default: every
    tier, every repeat); its result in ``ctx.got`` (merged with an earlier start's: the
    ``rounds`` design serves a variant once per round).

    Returns:
        The prompts used (made here from the variant's tokenizer when ``prompts`` is None).

    Raises:
        DeployError, ServerStartError, LoadTestError, ConfigError: the variant could not be
            deployed, started or measured (what was sampled is kept in ``ctx.got``).
    """
    got = ctx.got
    earlier = got.results.get(variant.name)
    with served(ctx, variant, prompts, nsys) as s:
        result = measure(
            s.target,
            ctx.spec.loadtest,
            variant.name,
            s.prompts,
            ctx.rd,
            s.tokenizer,
            s.marking,
            health=s.health,
            passes=passes,
            fresh=earlier is None,
        )
    got.results[variant.name] = (
        result if earlier is None else combine_results(earlier, result)
    )
    return s.prompts


def _connect(
    server: TritonServer | OpenAIServer,
    serving: stacks.Server,
    spec: BenchSpec,
    tokenizer: TextTokenizer | None,
    meta: RepoMetadata | None,
) -> tuple[LoadTarget, str]:
    """The load target of a started server and what serves it (for the stage line):
    Triton over gRPC (endpoint from its repository's ``meta``), vLLM and trtllm-serve over
    OpenAI completions with token ids."""
    fixed = spec.loadtest.fixed_output_len
    if serving.protocol == "openai" or meta is None:
        target = connect(
            server.base_url,
            server.model_name,
            api=API_COMPLETIONS,
            has_tokenizer=tokenizer is not None,
            fixed_output_len=fixed,
        )
        return target, f"{server.model_name} with {serving.label} at {server.base_url}"
    target = connect(
        server.grpc_url,
        meta.model_name,
        endpoint=endpoint_of(meta),
        fixed_output_len=fixed,
        extra_inputs=meta.extra_inputs,
    )
    return target, f"{meta.model_name} at {server.grpc_url}"
