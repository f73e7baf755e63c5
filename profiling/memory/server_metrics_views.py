"""Pure views of the ``server_metrics.csv`` frame (DataFrame in → DataFrame out, no I/O).

The frame is long format (:data:`~trtbench.profiling.memory.server_metrics.SERVER_METRICS_SCHEMA`).
Families and their category labels (triton-inference-server/server
``docs/user_guide/metrics.md``; NVIDIA/TensorRT-LLM
``triton_backend/inflight_batcher_llm/src/custom_metrics_reporter/``):

- ``nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=max|free|used|tokens_per|reused|
  fraction}`` — KV-cache blocks (counts; fraction = used/max);
- ``nv_trt_llm_request_metrics{request_type=active|max|scheduled|context|waiting}`` and Triton's
  ``nv_inference_pending_request_count`` — requests (counts);
- ``nv_trt_llm_runtime_memory_metrics{memory_type=cpu|gpu|pinned}`` (bytes) and Triton's
  ``nv_gpu_memory_{used,total}_bytes{gpu_uuid}``;
- Triton's cumulative counters ``nv_inference_request_success``, ``…_failure{reason}``,
  ``nv_inference_count``, ``nv_inference_exec_count``, ``nv_inference_*_duration_us``.

Counter delta of a phase (:func:`counter_deltas`): the value at the first reading of the next
phase (the boundary reading ``mark()`` takes) — or, for the last phase, its own last reading
(the one ``stop()`` takes) — minus the value at the phase's first reading.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

KV_FAMILY = "nv_trt_llm_kv_cache_block_metrics"
REQUEST_FAMILY = "nv_trt_llm_request_metrics"
RUNTIME_MEMORY_FAMILY = "nv_trt_llm_runtime_memory_metrics"
PENDING_FAMILY = "nv_inference_pending_request_count"
KEYS = ["variant", "phase", "t_ns", "model"]

KV_COLUMNS = {
    "max": "max_blocks",
    "free": "free_blocks",
    "used": "used_blocks",
    "tokens_per": "tokens_per_block",
    "reused": "reused_blocks",
    "fraction": "used_fraction",
}
REQUEST_COLUMNS = {
    "active": "active_requests",
    "scheduled": "scheduled_requests",
    "context": "context_requests",
    "waiting": "waiting_requests",
    "max": "max_requests",
}
RUNTIME_MEMORY_COLUMNS = {
    "cpu": "runtime_cpu_bytes",
    "gpu": "runtime_gpu_bytes",
    "pinned": "runtime_pinned_bytes",
}


def _label(frame: pd.DataFrame, name: str) -> pd.Series:
    return frame["labels_json"].map(lambda text: json.loads(text).get(name, ""))


def _wide(
    rows: pd.DataFrame, keys: list[str], column: str, names: dict[str, str]
) -> pd.DataFrame:
    """``keys`` + one column ``names[v]`` per value ``v`` of ``rows[column]`` (last value
    per key; NaN where absent), sorted by ``keys``."""
    wide = rows.pivot_table(index=keys, columns=column, values="value", aggfunc="last")
    wide = wide.reindex(columns=list(names)).rename(columns=names)
    wide.columns.name = None
    return wide.reset_index().sort_values(keys, ignore_index=True)


def pivot_family(
    frame: pd.DataFrame,
    family: str,
    label: str,
    columns: dict[str, str],
    keys: list[str] | None = None,
) -> pd.DataFrame:
    """One row per reading of ``family``, one column per value of its category ``label``.

    Args:
        frame: server-metrics rows.
        family: e.g. ``nv_trt_llm_kv_cache_block_metrics``.
        label: the category label, e.g. ``kv_cache_block_type``.
        columns: category value → output column name (the output has exactly these, NaN
            where the server did not expose a category; other categories are dropped).
        keys: row identity (default variant, phase, t_ns, model).

    Returns:
        ``keys`` + ``columns.values()``, sorted by ``keys``; empty when the family is absent.
    """
    keys = KEYS if keys is None else keys
    rows = frame[frame["family"] == family]
    if rows.empty:
        return pd.DataFrame(columns=[*keys, *columns.values()])
    rows = rows.assign(_cat=_label(rows, label))
    return _wide(rows[rows["_cat"].isin(list(columns))], keys, "_cat", columns)


def kv_cache_blocks(frame: pd.DataFrame) -> pd.DataFrame:
    """KV-cache block gauges per reading: ``max_blocks`` … ``used_fraction`` (see KV_COLUMNS)."""
    return pivot_family(frame, KV_FAMILY, "kv_cache_block_type", KV_COLUMNS)


def request_gauges(frame: pd.DataFrame) -> pd.DataFrame:
    """Requests per reading: Triton's ``pending_requests`` and TRT-LLM's active/scheduled/….

    Returns:
        KEYS + ``pending_requests`` + REQUEST_COLUMNS values (NaN where not exposed).
    """
    trt = pivot_family(frame, REQUEST_FAMILY, "request_type", REQUEST_COLUMNS)
    pending = frame.loc[frame["family"] == PENDING_FAMILY, [*KEYS, "value"]]
    pending = pending.groupby(KEYS, as_index=False)["value"].sum()
    pending = pending.rename(columns={"value": "pending_requests"})
    out = pending.merge(trt, on=KEYS, how="outer")
    return out.sort_values(KEYS, ignore_index=True)


def gpu_memory(frame: pd.DataFrame) -> pd.DataFrame:
    """Triton's per-GPU memory gauges: variant, phase, t_ns, gpu_uuid, used/total bytes."""
    keys = ["variant", "phase", "t_ns", "gpu_uuid"]
    names = {
        "nv_gpu_memory_used_bytes": "gpu_memory_used_bytes",
        "nv_gpu_memory_total_bytes": "gpu_memory_total_bytes",
    }
    rows = frame[frame["family"].isin(list(names))]
    if rows.empty:
        return pd.DataFrame(columns=[*keys, *names.values()])
    return _wide(rows.assign(gpu_uuid=_label(rows, "gpu_uuid")), keys, "family", names)


def runtime_memory(frame: pd.DataFrame) -> pd.DataFrame:
    """TRT-LLM runtime memory per reading and model: cpu / gpu / pinned bytes."""
    return pivot_family(
        frame, RUNTIME_MEMORY_FAMILY, "memory_type", RUNTIME_MEMORY_COLUMNS
    )


def counter_deltas(frame: pd.DataFrame) -> pd.DataFrame:
    """Increase of every counter series over each phase (definition in the module docstring).

    Returns:
        variant, phase, family, sample, labels_json, model, start_t_ns, end_t_ns,
        start_value, end_value, delta — one row per (series, phase), phases in time order.
    """
    series = ["variant", "family", "sample", "labels_json", "model"]
    cols = [
        *series,
        "phase",
        "start_t_ns",
        "end_t_ns",
        "start_value",
        "end_value",
        "delta",
    ]
    rows = frame[frame["metric_type"] == "counter"].sort_values("t_ns", kind="stable")
    if rows.empty:
        return pd.DataFrame(columns=cols)
    per_phase = rows.groupby([*series, "phase"], sort=False).agg(
        start_t_ns=("t_ns", "first"),
        start_value=("value", "first"),
        last_t_ns=("t_ns", "last"),
        last_value=("value", "last"),
    )
    per_phase = per_phase.reset_index().sort_values([*series, "start_t_ns"])
    nxt = per_phase.groupby(series, sort=False)[["start_t_ns", "start_value"]].shift(-1)
    per_phase["end_t_ns"] = nxt["start_t_ns"].fillna(per_phase["last_t_ns"])
    per_phase["end_value"] = nxt["start_value"].fillna(per_phase["last_value"])
    per_phase["end_t_ns"] = per_phase["end_t_ns"].astype("int64")
    per_phase["delta"] = per_phase["end_value"] - per_phase["start_value"]
    return per_phase[cols].sort_values(
        ["variant", "start_t_ns", *series], ignore_index=True
    )


def _delta(deltas: pd.DataFrame, sample: str) -> pd.Series:
    rows = deltas[deltas["sample"] == sample]
    return rows.groupby(["variant", "phase", "model"])["delta"].sum()


def phase_summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Per variant × phase × model: request counts, server-side mean times, KV and queue peaks.

    Rows are in the order the phases began.

    Columns: variant, phase, model, requests_success, requests_failed, inferences,
    executions, mean_request_us (Δnv_inference_request_duration_us / Δsuccess),
    mean_queue_us (Δnv_inference_queue_duration_us / Δsuccess; NaN when no request
    succeeded), max_pending_requests, max_kv_used_blocks, max_kv_used_fraction,
    mean_kv_used_fraction (over the phase's readings).
    """
    deltas = counter_deltas(frame)
    index = ["variant", "phase", "model"]
    parts = {
        "requests_success": _delta(deltas, "nv_inference_request_success"),
        "requests_failed": _delta(deltas, "nv_inference_request_failure"),
        "inferences": _delta(deltas, "nv_inference_count"),
        "executions": _delta(deltas, "nv_inference_exec_count"),
    }
    out = pd.DataFrame(parts)
    success = out["requests_success"].where(out["requests_success"] > 0)
    out["mean_request_us"] = (
        _delta(deltas, "nv_inference_request_duration_us") / success
    )
    out["mean_queue_us"] = _delta(deltas, "nv_inference_queue_duration_us") / success
    queue = request_gauges(frame).groupby(index)["pending_requests"].max()
    kv = kv_cache_blocks(frame).groupby(index)
    extra = pd.DataFrame(
        {
            "max_pending_requests": queue,
            "max_kv_used_blocks": kv["used_blocks"].max(),
            "max_kv_used_fraction": kv["used_fraction"].max(),
            "mean_kv_used_fraction": kv["used_fraction"].mean(),
        }
    )
    out = out.join(extra, how="outer")
    out.index = out.index.set_names(index)
    out = out.reset_index().replace({np.inf: np.nan})
    began = frame.groupby(["variant", "phase"])["t_ns"].min().rename("_began")
    out = out.join(began, on=["variant", "phase"]).sort_values(["_began", "model"])
    return out.drop(columns="_began").reset_index(drop=True)
