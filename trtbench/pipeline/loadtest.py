"""The load-test stage: prompts + tiers against served models → ``RUN_DIR/loadtest/*.csv``.

Library behind ``trtbench loadtest`` (any Triton, NGC or CPU) and the measuring step of
``trtbench run`` (:mod:`trtbench.pipeline.run`). It joins the bench spec with the profiling
subsystem, which only sees plain data.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from trtbench.core.errors import ConfigError, LoadTestError
from trtbench.core.run_dir import RunDir
from trtbench.pipeline.loadtest_files import record_files, write_loadtest
from trtbench.profiling.loadtest.clients.grpc_client import (
    ENDPOINTS,
    RequestOptions,
    probe_model,
)
from trtbench.profiling.loadtest.clients.health import HealthCheck
from trtbench.profiling.loadtest.clients.openai_client import connect_openai
from trtbench.profiling.loadtest.clients.target import (
    API_GRPC,
    LoadSettings,
    LoadTarget,
    Progress,
    check_workers_api,
)
from trtbench.profiling.loadtest.driver.runner import run_load
from trtbench.profiling.loadtest.driver.workers import run_in_parts
from trtbench.profiling.loadtest.records.outcome import (  # noqa: F401 (result_json, failure_lines: re-exported)
    LoadResult,
    failure_lines,
    result_json,
)
from trtbench.profiling.loadtest.records.record_sink import CsvRecordSink
from trtbench.profiling.loadtest.workload.datasets import Source, mix_prompts
from trtbench.profiling.loadtest.workload.prompts import (
    Prompt,
    TextTokenizer,
    load_dataset,
    synthetic_prompts,
)
from trtbench.profiling.loadtest.workload.repeats import TierPass
from trtbench.profiling.loadtest.workload.schedule import Tier, plan_tiers
from trtbench.profiling.loadtest.workload.tokenizer_source import load_tokenizer
from trtbench.spec.bench import LoadtestSpec

log = logging.getLogger(__name__)

DURATION_PROMPT_POOL = 256


@dataclass(frozen=True)
class LoadtestOutcome:
    """What a load test wrote and found.

    Attributes:
        summary: the summary.csv frame (one row per variant × tier).
        run_dir: where the CSVs are.
        interrupted: stopped by Ctrl-C (what was measured is kept).
        warnings: output-length mismatches and other notes, one line each.
        files: other files the stage wrote besides the load-test CSVs (``trtbench run``:
            report.md, plots/*.png, trace CSVs).
        stop_signal: the stop signal that ended it (SIGINT/SIGTERM/SIGHUP), if any.
        failures: one line per variant whose server died or stopped answering.
    """

    summary: pd.DataFrame
    run_dir: RunDir
    interrupted: bool = False
    warnings: list[str] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    stop_signal: int | None = None
    failures: list[str] = field(default_factory=list)


def open_tokenizer(ref: str | Path | None) -> TextTokenizer | None:
    """The tokenizer ``ref`` names: a model directory or a Hugging Face hub id (None → None;
    :func:`~trtbench.profiling.loadtest.workload.tokenizer_source.load_tokenizer`).

    Raises:
        ConfigError: neither a directory with tokenizer.json nor a loadable hub id.
    """
    return None if ref is None else load_tokenizer(ref)


def dataset_sources(spec: LoadtestSpec) -> list[Source]:
    """``loadtest.datasets`` as plain sources, each labelled by its place in the spec."""
    return [
        Source(**s.model_dump(), label=f"loadtest.datasets[{i}]")
        for i, s in enumerate(spec.datasets or [])
    ]


def make_prompts(spec: LoadtestSpec, tokenizer: TextTokenizer | None) -> list[Prompt]:
    """The dataset's prompts, the ``datasets`` sources mixed by weight, or synthetic ones;
    the last two seeded with ``spec.seed``.

    One prompt per request of a tier (a pool of 256 for duration-bounded tiers), reused
    in the same order by every tier and variant; a single ``dataset`` gives every line,
    in file order.
    """
    if spec.dataset is not None:
        return load_dataset(spec.dataset, tokenizer)
    n = spec.tier_requests or DURATION_PROMPT_POOL
    rng = np.random.default_rng(spec.seed)
    if spec.datasets:
        sources = dataset_sources(spec)
        return mix_prompts(sources, n, rng, tokenizer, spec.output_len_mean)
    return synthetic_prompts(
        n,
        spec.input_len_mean,
        spec.input_len_std,
        spec.output_len_mean,
        spec.output_len_std,
        rng,
        tokenizer,
    )


def tiers_of(spec: LoadtestSpec) -> list[Tier]:
    """The spec's tiers (request rates when given, else concurrencies)."""
    try:
        return plan_tiers(spec.concurrency, spec.request_rate, spec.max_concurrency)
    except ValueError as exc:
        raise ConfigError(f"loadtest: {exc}") from None


def settings_of(spec: LoadtestSpec) -> LoadSettings:
    """Per-tier size and timing from the spec."""
    return LoadSettings(
        requests_per_tier=spec.tier_requests,
        duration_s=spec.duration_s,
        warmup_requests=spec.warmup_requests,
        request_timeout_s=spec.request_timeout_s,
        arrival=spec.arrival,
        burstiness=spec.burstiness,
        ramp_up_s=spec.ramp_up_s,
        repeats=spec.repeats,
    )


def connect(
    url: str,
    model: str,
    *,
    endpoint: str | None = None,
    fixed_output_len: bool = True,
    extra_inputs: Mapping[str, object] | None = None,
    api: str = API_GRPC,
    has_tokenizer: bool = False,
) -> LoadTarget:
    """Probe ``model`` at ``url`` and choose the endpoint kind (default from its config);
    an OpenAI ``api``: :func:`~trtbench.profiling.loadtest.clients.openai_client.connect_openai`.

    Raises:
        LoadTestError: unreachable, unknown model, mismatched inputs, unknown endpoint.
        ConfigError: an extra input the model does not have; an OpenAI server that returns
            no token ids and no tokenizer.
    """
    if api != API_GRPC:
        return connect_openai(
            url,
            model,
            api,
            fixed_output_len=fixed_output_len,
            extra=dict(extra_inputs or {}),
            has_tokenizer=has_tokenizer,
        )
    interface = asyncio.run(probe_model(url, model))
    kind = endpoint or interface.default_endpoint()
    if kind not in ENDPOINTS:
        raise LoadTestError(f"unknown endpoint {kind!r}; use {', '.join(ENDPOINTS)}")
    extra = dict(extra_inputs or {})
    unknown = [k for k in extra if k not in interface.inputs]
    if unknown:
        raise ConfigError(
            f"model {model!r} has no input {unknown[0]!r}; drop it from the extra inputs"
        )
    options = RequestOptions(
        stream=kind == "stream", fixed_output_len=fixed_output_len, extra=extra
    )
    return LoadTarget(url, interface, kind, options)


def measure(
    target: LoadTarget,
    spec: LoadtestSpec,
    variant: str,
    prompts: Sequence[Prompt],
    run_dir: RunDir,
    tokenizer: TextTokenizer | None = None,
    progress: Progress | None = None,
    health: HealthCheck | None = None,
    passes: Sequence[TierPass] | None = None,
    fresh: bool = True,
) -> LoadResult:
    """Warm up and run ``passes`` (default: every tier of ``spec``, ``repeats`` times)
    against one served model, streaming its records to :func:`record_files`. ``fresh``:
    remove old parts of ``variant`` first (False: append, a later round of the ``rounds``
    design)."""
    check_workers_api(target.api, spec.workers)
    files = record_files(run_dir, variant)
    for path in (files.requests, files.responses, files.outputs) if fresh else ():
        path.unlink(missing_ok=True)
    if spec.workers > 1:  # N client processes, parts merged into ``files``
        return run_in_parts(
            files,
            spec.workers,
            target,
            prompts,
            tiers_of(spec),
            settings_of(spec),
            variant,
            tokenizer,
            progress,
            spec.seed,
            health=health,
            passes=passes,
        )
    with CsvRecordSink(files) as sink:
        return run_load(
            target,
            prompts,
            tiers_of(spec),
            settings_of(spec),
            variant,
            tokenizer=tokenizer,
            progress=progress,
            seed=spec.seed,
            sink=sink,
            health=health,
            passes=passes,
        )


def run_loadtest(
    url: str,
    model: str,
    spec: LoadtestSpec,
    out: Path,
    *,
    variant: str | None = None,
    tokenizer_dir: str | Path | None = None,
    endpoint: str | None = None,
    baseline: str | None = None,
    progress: Progress | None = None,
    prompts: Sequence[Prompt] | None = None,
    api: str = API_GRPC,
) -> LoadtestOutcome:
    """``trtbench loadtest``: measure one served model, write ``out/loadtest/*.csv``.

    ``prompts``: the ones :func:`~trtbench.pipeline.preflight.preflight_loadtest` made
    and checked (default: made from ``spec`` here). ``api``: ``triton-grpc`` (``url`` =
    HOST:PORT) or ``openai-chat`` / ``openai-completions`` (``url`` = http://HOST:PORT/v1).

    Rows already in the CSVs for other variants are kept, so several runs with different
    ``--variant`` labels (and ``--baseline``) build one comparison; without ``baseline``
    the one recorded in ``run.json`` (by ``trtbench run`` or an earlier ``--baseline``)
    keeps the speedups of every row.

    Raises:
        LoadTestError: unreachable server, unknown model, mismatched inputs, text-only
            model without a tokenizer, or every warmup request failed.
        ConfigError: bad dataset line or tokenizer path.
    """
    tokenizer = open_tokenizer(tokenizer_dir)
    if prompts is None:
        prompts = make_prompts(spec, tokenizer)
    target = connect(
        url,
        model,
        endpoint=endpoint,
        api=api,
        has_tokenizer=tokenizer is not None,
        fixed_output_len=spec.fixed_output_len,
    )
    label = variant or model
    run_dir = RunDir(out)
    result = measure(target, spec, label, prompts, run_dir, tokenizer, progress)
    known = run_dir.read_run_json().get("baseline")
    baseline = baseline or (known if isinstance(known, str) else None)
    summary, warnings = write_loadtest(
        run_dir, {label: result}, spec.slos, baseline, spec.warmup_s
    )
    if baseline is not None:
        run_dir.update_run_json("baseline", baseline)
    run_dir.update_run_json(
        "loadtest",
        {
            label: {
                "url": url,
                "model": model,
                "endpoint": target.endpoint,
                "api": api,
                **result_json(result),
            }
        },
    )
    for w in warnings:  # the terminal prints them from the outcome; the log keeps them
        log.info("warning: %s", w)
    return LoadtestOutcome(
        summary,
        run_dir,
        result.interrupted,
        warnings,
        stop_signal=result.stop_signal,
        failures=failure_lines({label: result}),
    )
