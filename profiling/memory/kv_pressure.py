"""Capacity under KV pressure, per variant and load-test tier, from ``server_metrics.csv`` rows.

Pure (DataFrame in → DataFrame out). Sources: TensorRT-LLM's gauges
``nv_trt_llm_request_metrics{request_type=active|waiting}`` and
``nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=max|used}`` (NVIDIA/TensorRT-LLM
``triton_backend/inflight_batcher_llm/src/custom_metrics_reporter/``; the reference engine
publishes them too), and the reference engine's counters
``trtbench_reference_counters{counter=…}`` (``triton_repo/templates/python/
trtbench_model_utils.py``; per phase as :func:`~.server_metrics_views.counter_deltas`).

Definitions, per variant × tier phase (``tier:…``) × model:

- ``max_waiting_requests``: the largest ``waiting`` reading (requests queued for a batch slot
  or KV blocks, including those that arrived during a step: a snapshot, transient);
- ``kv_waits``, ``preemptions``: Δ of those counters (requests held back at the head of the
  queue for KV blocks; running requests preempted for them);
- a closed-loop tier is *served without queueing* when its concurrency is at most the batch
  slots (``request_type=max``) and, with the reference counters, no request waited for KV
  blocks or was preempted (``kv_waits`` + ``preemptions`` = 0); without them (a TensorRT-LLM
  server), when ``max_waiting_requests`` is 0;
- ``speculative_block_share``: Δ``speculative_block_steps`` / Δ``block_steps`` — of the KV
  blocks held summed over decode steps, the share held only for verifying drafts / tree nodes
  (NaN when no step ran or the counters are absent, e.g. a TensorRT-LLM server);
- ``draft_skipped_for_kv``: Δ of that counter (sequence-steps that drafted nothing because
  their verification blocks could not be had).
"""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd

from trtbench.profiling.memory.server_metrics_views import (
    counter_deltas,
    kv_cache_blocks,
    request_gauges,
)

COUNTER_FAMILY = "trtbench_reference_counters"
TIER_PREFIX = "tier:"
INDEX = ["variant", "phase", "model"]
COLUMNS = [
    *INDEX,
    "concurrency",
    "max_requests",
    "max_active_requests",
    "max_waiting_requests",
    "kv_waits",
    "kv_max_blocks",
    "max_kv_used_blocks",
    "preemptions",
    "draft_skipped_for_kv",
    "speculative_block_share",
]


def _concurrency(phase: str) -> float:
    """``tier:c8`` → 8 (the closed-loop tier label); NaN for other tiers."""
    match = re.fullmatch(r"tier:c(\d+)(?:\D.*)?", phase)
    return float(match.group(1)) if match else np.nan


def kv_pressure(frame: pd.DataFrame) -> pd.DataFrame:
    """Per variant × tier × model: the columns of :data:`COLUMNS` (see the module docstring),
    rows in the order the tiers began; empty when no tier reading has the gauges."""
    tiers = frame[frame["phase"].astype(str).str.startswith(TIER_PREFIX)]
    requests = request_gauges(tiers)
    requests = requests[requests["model"] != ""]
    kv = kv_cache_blocks(tiers)
    out = pd.DataFrame(
        {
            "max_requests": requests.groupby(INDEX)["max_requests"].max(),
            "max_active_requests": requests.groupby(INDEX)["active_requests"].max(),
            "max_waiting_requests": requests.groupby(INDEX)["waiting_requests"].max(),
            "kv_max_blocks": kv.groupby(INDEX)["max_blocks"].max(),
            "max_kv_used_blocks": kv.groupby(INDEX)["used_blocks"].max(),
        }
    )
    if out.empty:
        return pd.DataFrame(columns=COLUMNS)
    deltas = counter_deltas(frame)
    deltas = deltas[deltas["family"] == COUNTER_FAMILY]
    if not deltas.empty:
        name = deltas["labels_json"].map(lambda t: json.loads(t).get("counter", ""))
        wide = deltas.assign(_name=name).pivot_table(
            index=INDEX, columns="_name", values="delta", aggfunc="sum"
        )
        for col in ("preemptions", "kv_waits", "draft_skipped_for_kv"):
            if col in wide:
                out[col] = wide[col]
        if {"block_steps", "speculative_block_steps"} <= set(wide.columns):
            steps = wide["block_steps"].where(wide["block_steps"] > 0)
            out["speculative_block_share"] = wide["speculative_block_steps"] / steps
    out = out.reset_index()
    out["concurrency"] = out["phase"].map(_concurrency)
    began = tiers.groupby(["variant", "phase"])["t_ns"].min().rename("_began")
    out = out.join(began, on=["variant", "phase"]).sort_values(["_began", "model"])
    return out.reindex(columns=COLUMNS).reset_index(drop=True)


def largest_unqueued_concurrency(table: pd.DataFrame) -> pd.Series:
    """Per variant: the largest closed-loop concurrency served without queueing (module
    docstring), from :func:`kv_pressure`; NaN if none."""
    tiers = table.dropna(subset=["concurrency"])
    counted = tiers["kv_waits"].notna() & tiers["preemptions"].notna()
    queued = (tiers["kv_waits"] + tiers["preemptions"]).where(
        counted, tiers["max_waiting_requests"]
    )
    queued = queued + (tiers["concurrency"] > tiers["max_requests"])
    tiers = tiers.assign(_queued=queued)
    waited = tiers.groupby(["variant", "concurrency"])["_queued"].max()
    calm = waited[waited == 0].reset_index()
    variants = pd.Index(table["variant"].unique(), name="variant")
    best = calm.groupby("variant")["concurrency"].max()
    return best.reindex(variants).rename("largest_unqueued_concurrency")
