"""Serve one variant and measure it: the per-variant step of ``trtbench run``.

A variant is served by its own tritonserver (``server: triton``, the default: its model
repository is rendered first) or by its own vLLM server (``server: vllm``:
:mod:`trtbench.pipeline.vllm_deploy`). Either way the server starts inside the memory sampler
(phase ``load``), ``/metrics`` is scraped throughout, the load generator warms up (phase
``warmup``) and runs every tier (phases ``tier:<label>``), and the server is stopped with its
whole process group. Triton is driven over gRPC streaming; vLLM over OpenAI completions (SSE),
its speculative counts taken from its Prometheus counters around each tier.
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

from trtbench.pipeline.deploy import deploy_variant, server_config
from trtbench.pipeline.loadtest import connect, make_prompts, measure, open_tokenizer
from trtbench.pipeline.preflight import check_served_prompts
from trtbench.pipeline.tier_capture import TierCapture, analyze_capture, capture_for
from trtbench.pipeline.vllm_deploy import vllm_server_for, vllm_tokenizer_dir
from trtbench.profiling.loadtest.health import Health, HealthCheck
from trtbench.profiling.loadtest.outcome import LoadResult
from trtbench.profiling.loadtest.prompts import Prompt, TextTokenizer
from trtbench.profiling.loadtest.schedule import Tier
from trtbench.profiling.loadtest.target import API_COMPLETIONS, LoadTarget, Progress
from trtbench.profiling.memory.sampler import MemorySampler
from trtbench.profiling.memory.server_metrics import ServerMetricsScraper
from trtbench.profiling.traces.nsys_session import nsys_launch_argv
from trtbench.run_dir import RunDir
from trtbench.spec import BenchSpec, VariantSpec
from trtbench.triton_repo.interface import RepoMetadata, read_repo_metadata
from trtbench.triton_repo.server import TritonServer
from trtbench.vllm_server.server import VllmServer

log = logging.getLogger(__name__)


class RunProgress(Progress, Protocol):
    """Tier progress plus one line per finished stage (a build, a server ready)."""

    def stage(self, message: str) -> None: ...


class ManagedServer(Protocol):
    """What the run needs of a server it started (TritonServer, VllmServer)."""

    process: object
    metrics_url: str

    def health(self, timeout_s: float = 0.5) -> str | None: ...


@dataclass
class Collected:
    """What the variants of a run produced so far (kept when a later one fails)."""

    results: dict[str, LoadResult] = field(default_factory=dict)
    memory: dict[str, pd.DataFrame] = field(default_factory=dict)
    metrics: dict[str, pd.DataFrame] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    traces: dict[str, list[Path]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


class TierMarking:
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
    server: TritonServer | VllmServer, variant: str, spec: BenchSpec, warn: bool = True
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


def measure_variant(
    rd: RunDir,
    spec: BenchSpec,
    variant: VariantSpec,
    prompts: list[Prompt] | None,
    progress: RunProgress | None,
    got: Collected,
    nsys: Path | None = None,
) -> list[Prompt]:
    """Deploy, serve and load-test one variant; record its results in ``got``.

    With ``nsys`` (``profile.nsys``) a Triton server runs under an nsys session that records
    the profiled tier; the trace is analyzed once the server is stopped.

    Returns:
        The prompts used (made here from the variant's tokenizer when ``prompts`` is None).

    Raises:
        DeployError, ServerStartError, LoadTestError, ConfigError: the variant could not be
            deployed, started or measured (what was sampled is kept in ``got``).
    """
    start = time.monotonic()
    warn = not got.memory  # NVML missing: a WARNING for the first variant only
    capture: TierCapture | None = None
    meta: RepoMetadata | None = None
    server: TritonServer | VllmServer
    if variant.server == "vllm":
        server = vllm_server_for(rd, variant.name, spec)
        tokenizer = open_tokenizer(vllm_tokenizer_dir(rd, variant.name))
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
            target, served = _connect(server, spec, tokenizer, meta)
            _stage(progress, f"{variant.name}: serving {served} "
                             f"(ready after {time.monotonic() - start:.1f} s)")  # fmt: skip
            marking = TierMarking(progress, samplers, capture)
            got.results[variant.name] = measure(
                target, spec.loadtest, variant.name, prompts, rd, tokenizer, marking,
                health=server_health(server),
            )  # fmt: skip
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


def _connect(
    server: TritonServer | VllmServer,
    spec: BenchSpec,
    tokenizer: TextTokenizer | None,
    meta: RepoMetadata | None,
) -> tuple[LoadTarget, str]:
    """The load target of a started server and what serves it (for the stage line):
    Triton over gRPC (endpoint from its repository's ``meta``), vLLM over OpenAI
    completions with token ids."""
    fixed = spec.loadtest.fixed_output_len
    if isinstance(server, VllmServer) or meta is None:
        target = connect(server.base_url, server.model_name, api=API_COMPLETIONS,
                         has_tokenizer=tokenizer is not None,
                         fixed_output_len=fixed)  # fmt: skip
        return target, f"{server.model_name} with vLLM at {server.base_url}"
    target = connect(
        server.grpc_url,
        meta.model_name,
        endpoint=endpoint_of(meta),
        fixed_output_len=fixed,
        extra_inputs=meta.extra_inputs,
    )
    return target, f"{meta.model_name} at {server.grpc_url}"


def _stage(progress: RunProgress | None, message: str) -> None:
    """A finished stage: an INFO record (for RUN_DIR/trtbench.log) and a progress line."""
    log.info("%s", message)
    if progress is not None:
        progress.stage(message)
