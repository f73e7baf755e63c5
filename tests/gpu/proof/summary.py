"""GPU proof, reporting side: the memory breakdown per mode and dtype, and ``summary.json``.

``summary.json`` keys: ``gpu_proof_version``, ``settings``, ``environment``, ``elapsed_s``,
``cuda_only`` (per CUDA-only figure — ``cuda_graphs``, ``kineto_launch_analysis``, ``nvml``,
``torch_cuda_memory`` — a ``status`` ``ok`` or ``n/a`` and the ``reason``), ``lossless``
(``all``, ``rule``, ``failed``), ``errors`` (configurations or traces that failed, with the
error), ``speedups`` and ``launch`` (rows of decode_timing.csv and kineto.csv) and ``files``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import pandas as pd
import torch

from tests.gpu.proof.tables import NA, TIE_ULPS
from trtbench.core.json_files import read_json_object
from trtbench.profiling.memory.breakdown import (
    VariantMemoryInputs,
    dtype_bytes,
    kv_bytes_per_token,
    memory_breakdown,
    weight_file_bytes,
)

OUTPUT_FILES = (
    "decode_timing.csv",
    "lossless.csv",
    "kineto.csv",
    "memory.csv",
    "memory_breakdown.csv",
    "table.txt",
    "summary.json",
)
LOSSLESS_RULE = (
    "speculative tokens == baseline tokens per request (same dtype, batch size, graphs); "
    "float32 exact; lower precision: a divergence is excused when the baseline's top-2 "
    f"logit gap there is <= {TIE_ULPS} ulp of the top logit in that dtype"
)


def breakdown_frame(
    dirs: dict[str, Path],
    modes: Sequence[str],
    dtypes: Sequence[str],
    memory: pd.DataFrame,
) -> pd.DataFrame:
    """trtbench's memory breakdown, one row per ``<mode>-<dtype>``; its peaks are over the
    sampler readings of that mode and dtype's runs (phases ``run:<mode>:<dtype>:…``)."""

    def config(role: str) -> dict:
        fix = "carry or rebuild the tiny models (scripts/make_tiny_models.py --force)"
        return read_json_object(
            dirs[role] / "config.json", label=f"{role} ", missing_fix=fix, bad_fix=fix
        )

    rows = []
    for dtype in dtypes:
        for mode in modes:
            extra = {"draft_target": "draft", "medusa": "medusa", "eagle3": "eagle3"}
            roles = ["target"] + ([extra[mode]] if mode in extra else [])
            size = dtype_bytes(dtype)
            inputs = VariantMemoryInputs(
                variant=f"{mode}-{dtype}",
                mode=mode,
                weight_bytes={r: weight_file_bytes(dirs[r]) for r in roles},
                weight_source="files",
                kv_bytes_per_token={
                    r: kv_bytes_per_token(config(r), size)
                    for r in roles
                    if r != "medusa"
                },
                memory=memory,
            )
            rows.append(memory_breakdown([inputs], phase_prefix=f"run:{mode}:{dtype}:"))
    return pd.concat(rows, ignore_index=True)


def _records(frame: pd.DataFrame, columns: Sequence[str]) -> list[dict]:
    """Rows as JSON-ready dicts (NaN and NA become null, numpy scalars plain numbers)."""
    if frame.empty:
        return []
    return json.loads(frame[list(columns)].to_json(orient="records"))


def _status(ok: bool, reason: str) -> dict[str, str]:
    return {"status": "ok" if ok else NA, "reason": "" if ok else reason}


def cuda_only(
    device: torch.device,
    timing: pd.DataFrame,
    kineto: pd.DataFrame,
    memory_info: dict,
) -> dict[str, dict]:
    """Status and reason of each CUDA-only figure (n/a on a CPU, or where it failed)."""
    graphs = timing[timing["graphs"] == "graphs"]
    graph_na = graphs[graphs["graphs_status"] == NA]
    kineto_na = kineto[kineto["analysis_status"] == NA] if len(kineto) else kineto
    graph_reason = "; ".join(sorted(set(graph_na["graphs_reason"].astype(str))))
    kineto_reason = "; ".join(sorted(set(kineto_na["analysis_reason"].astype(str))))
    nvml_ok = memory_info.get("source") == "nvml"
    return {
        "cuda_graphs": _status(graph_na.empty and not graphs.empty, graph_reason),
        "kineto_launch_analysis": _status(
            kineto_na.empty and not kineto.empty, kineto_reason or "no trace taken"
        ),
        "nvml": {
            **_status(nvml_ok, str(memory_info.get("unavailable_reason", ""))),
            "sampler": memory_info,
        },
        "torch_cuda_memory": _status(
            device.type == "cuda",
            f"torch.cuda allocator statistics need a CUDA device (ran on {device})",
        ),
    }


def build_summary(
    settings,
    device: torch.device,
    env: dict,
    timing: pd.DataFrame,
    lossless: pd.DataFrame,
    kineto: pd.DataFrame,
    memory_info: dict,
    elapsed_s: float,
) -> dict[str, object]:
    """The contents of ``summary.json`` (keys in the module docstring)."""
    failed = lossless[~lossless["lossless"].astype(bool)] if len(lossless) else lossless
    keys = ["mode", "dtype", "batch_size", "graphs"]
    errors = timing[timing["graphs_status"] == "error"]
    trace_errors = kineto[kineto["analysis_status"] == "error"]
    speed_cols = [*keys, "graphs_status", "step_ms_mean", "tokens_per_step"]
    speed_cols += ["output_tok_s", "speedup_vs_baseline"]
    launch_cols = [*keys, "steps_requested", "decode_step_ranges", "analysis_status"]
    launch_cols += ["launch_calls_per_step", "launch_overhead_mean_ns"]
    launch_cols += ["graph_launches_per_step", "gpu_idle_mean_ns", "wall_mean_ns"]
    return {
        "gpu_proof_version": 1,
        "settings": json.loads(json.dumps(asdict(settings), default=str)),
        "environment": env,
        "elapsed_s": round(elapsed_s, 3),
        "cuda_only": cuda_only(device, timing, kineto, memory_info),
        "lossless": {
            "all": bool(len(lossless)) and failed.empty,
            "rule": LOSSLESS_RULE,
            "compared": len(lossless),
            "failed": _records(failed, [*keys, "compared_to", "mismatches"]),
        },
        "errors": _records(errors, [*keys, "graphs_reason"])
        + _records(trace_errors, [*keys, "analysis_reason"]),
        "speedups": _records(timing, speed_cols),
        "launch": _records(kineto, launch_cols),
        "files": list(OUTPUT_FILES),
    }
