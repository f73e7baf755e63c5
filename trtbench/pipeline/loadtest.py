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

from trtbench.errors import ConfigError, LoadTestError
from trtbench.export import records_to_frame, write_csv
from trtbench.profiling.loadtest.grpc_client import (
    ENDPOINTS,
    RequestOptions,
    probe_model,
)
from trtbench.profiling.loadtest.metrics import osl_warnings, summarize
from trtbench.profiling.loadtest.prompts import (
    Prompt,
    TextTokenizer,
    load_dataset,
    synthetic_prompts,
)
from trtbench.profiling.loadtest.runner import (
    INTERRUPTED,
    LoadResult,
    LoadSettings,
    LoadTarget,
    Progress,
    run_load,
)
from trtbench.profiling.loadtest.schedule import Tier, plan_tiers
from trtbench.profiling.loadtest.schemas import (
    REQUESTS_SCHEMA,
    RESPONSES_SCHEMA,
    SUMMARY_SCHEMA,
    read_records_csv,
    requests_table,
)
from trtbench.run_dir import RunDir
from trtbench.spec import LoadtestSpec

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
    """

    summary: pd.DataFrame
    run_dir: RunDir
    interrupted: bool = False
    warnings: list[str] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)


def open_tokenizer(path: Path | None) -> TextTokenizer | None:
    """Load the tokenizer at ``path`` (None → None). Raises ConfigError if absent."""
    return None if path is None else TextTokenizer.load(Path(path))


def make_prompts(spec: LoadtestSpec, tokenizer: TextTokenizer | None) -> list[Prompt]:
    """The dataset's prompts, or synthetic ones seeded with ``spec.seed``.

    One prompt per request of a tier (a pool of 256 for duration-bounded tiers), reused
    in the same order by every tier and variant.
    """
    if spec.dataset is not None:
        return load_dataset(spec.dataset, tokenizer)
    n = spec.tier_requests or DURATION_PROMPT_POOL
    rng = np.random.default_rng(spec.seed)
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
        return plan_tiers(spec.concurrency, spec.request_rate)
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
    )


def connect(
    url: str,
    model: str,
    *,
    endpoint: str | None = None,
    fixed_output_len: bool = True,
    extra_inputs: Mapping[str, object] | None = None,
) -> LoadTarget:
    """Probe ``model`` at ``url`` and choose the endpoint kind (default from its config).

    Raises:
        LoadTestError: unreachable, unknown model, mismatched inputs, unknown endpoint.
        ConfigError: an extra input the model does not have.
    """
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
    tokenizer: TextTokenizer | None = None,
    progress: Progress | None = None,
) -> LoadResult:
    """Warm up and run every tier of ``spec`` against one served model."""
    return run_load(
        target,
        prompts,
        tiers_of(spec),
        settings_of(spec),
        variant,
        tokenizer=tokenizer,
        progress=progress,
        seed=spec.seed,
    )


def _existing(path: Path, replace: set[str]) -> pd.DataFrame | None:
    if not path.is_file():
        return None
    old = read_records_csv(path)
    return old[~old["variant"].isin(replace)]


def write_loadtest(
    run_dir: RunDir,
    results: Mapping[str, LoadResult],
    slos: Mapping[str, float] | None = None,
    baseline: str | None = None,
) -> tuple[pd.DataFrame, list[str]]:
    """Write requests/responses/summary CSVs; rows of other variants already there stay.

    Requests still in flight at Ctrl-C are dropped (never measured). The summary is
    recomputed from every request in the files.

    Returns:
        (summary frame, warnings).
    """
    replace = set(results)
    req = records_to_frame(r for res in results.values() for r in res.requests)
    resp = records_to_frame(r for res in results.values() for r in res.responses)
    if len(req):
        gone = req.loc[req["error"] == INTERRUPTED, "request_id"]
        req = req[req["error"] != INTERRUPTED]
        resp = resp[~resp["request_id"].isin(gone)] if len(resp) else resp
    req = _concat(_existing(run_dir.requests_csv, replace), req)
    resp = _concat(_existing(run_dir.responses_csv, replace), resp)
    if req.empty:
        raise LoadTestError("no request finished; nothing to write")
    base = baseline if baseline in set(req["variant"]) else None
    summary = summarize(req, resp, slos, base)
    write_csv(requests_table(req), run_dir.requests_csv, REQUESTS_SCHEMA)
    write_csv(resp, run_dir.responses_csv, RESPONSES_SCHEMA)
    write_csv(summary, run_dir.summary_csv, SUMMARY_SCHEMA)
    return summary, osl_warnings(req)


def _concat(old: pd.DataFrame | None, new: pd.DataFrame) -> pd.DataFrame:
    if old is None or old.empty:
        return new.reset_index(drop=True)
    if new.empty:
        return old.reset_index(drop=True)
    return pd.concat([old, new], ignore_index=True)


def run_loadtest(
    url: str,
    model: str,
    spec: LoadtestSpec,
    out: Path,
    *,
    variant: str | None = None,
    tokenizer_dir: Path | None = None,
    endpoint: str | None = None,
    baseline: str | None = None,
    progress: Progress | None = None,
) -> LoadtestOutcome:
    """``trtbench loadtest``: measure one served model, write ``out/loadtest/*.csv``.

    Rows already in the CSVs for other variants are kept, so several runs with different
    ``--variant`` labels (and ``--baseline``) build one comparison.

    Raises:
        LoadTestError: unreachable server, unknown model, mismatched inputs, text-only
            model without a tokenizer, or every warmup request failed.
        ConfigError: bad dataset line or tokenizer path.
    """
    tokenizer = open_tokenizer(tokenizer_dir)
    prompts = make_prompts(spec, tokenizer)
    target = connect(url, model, endpoint=endpoint,
                     fixed_output_len=spec.fixed_output_len)  # fmt: skip
    label = variant or model
    result = measure(target, spec, label, prompts, tokenizer, progress)
    run_dir = RunDir(out)
    summary, warnings = write_loadtest(run_dir, {label: result}, spec.slos, baseline)
    run_dir.update_run_json(
        "loadtest",
        {label: {"url": url, "model": model, "endpoint": target.endpoint,
                 "tiers_done": result.tiers_done, "interrupted": result.interrupted}},
    )  # fmt: skip
    for w in warnings:
        log.warning("%s", w)
    return LoadtestOutcome(summary, run_dir, result.interrupted, warnings)
