"""Hand-made run directories written through the real schemas and writers (for report/plan tests).

Every CSV goes through ``trtbench.core.export.write_csv`` with the producer's schema constant, build
manifests through ``builders.manifest.write_manifest`` and repository metadata through
``RepoMetadata.to_json``, so a schema change breaks these tests instead of passing silently.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from trtbench.builders.manifest import (
    BuildManifest,
    CudaGraphs,
    MedusaInfo,
    write_manifest,
)
from trtbench.core.export import write_csv
from trtbench.core.run_dir import RunDir
from trtbench.profiling.loadtest.files.schemas import SUMMARY_SCHEMA
from trtbench.profiling.loadtest.stats.speedups import add_speedups
from trtbench.profiling.memory.breakdown import MEMORY_BREAKDOWN_SCHEMA
from trtbench.profiling.report.comparison import summary_column
from trtbench.triton_repo.interface import METADATA_NAME, RepoMetadata


def summary_row(variant: str, concurrency: int, **metrics: float) -> dict[str, Any]:
    """One summary.csv row. ``metrics`` keys: ``ttft_p50``, ``ttft_p95``, ``tpot``,
    ``tpot_p50``, ``tok_s``, ``accept``, ``per_response``, ``e2e_p50``, ``errors``."""
    names = {
        "ttft_p50": summary_column("time_to_first_token", "p50"),
        "ttft_p95": summary_column("time_to_first_token", "p95"),
        "tpot": summary_column("time_per_output_token", "mean"),
        "tpot_p50": summary_column("time_per_output_token", "p50"),
        "accept": "acceptance_length_tokens",
        "per_response": summary_column("tokens_per_response", "mean"),
        "e2e_p50": summary_column("request_latency", "p50"),
        "tok_s": "output_token_throughput_tokens_per_s",
        "errors": "error_count",
    }
    row: dict[str, Any] = {
        "variant": variant,
        "tier": f"c{concurrency}",
        "concurrency": concurrency,
        "request_count": 16,
        "error_count": 0,
        "osl_mismatch_count": 0,
        "duration_s": 1.0,
        "output_token_throughput_tokens_per_s": 0.0,
        "request_throughput_per_s": 1.0,
    }
    row.update({names[k]: v for k, v in metrics.items()})
    return row


def throughput_intervals(
    lo: float, hi: float, ratio_lo: float, ratio_hi: float, repeats: int = 3
) -> dict[str, Any]:
    """The summary.csv columns of repeated tiers: the output tok/s 95 % interval and the
    speedup ratio's (to ``row.update`` a :func:`summary_row`)."""
    return {
        "repeats_count": repeats,
        "output_token_throughput_tokens_per_s_ci95_low": lo,
        "output_token_throughput_tokens_per_s_ci95_high": hi,
        "output_token_throughput_speedup_ratio_ci95_low": ratio_lo,
        "output_token_throughput_speedup_ratio_ci95_high": ratio_hi,
    }


def write_summary(
    root: Path, rows: list[dict[str, Any]], baseline: str | None = "baseline"
) -> Path:
    """Write ``loadtest/summary.csv`` (SUMMARY_SCHEMA) with the load test's own speedup
    columns (``speedups.add_speedups``: baseline mean TPOT / variant mean TPOT, same tier)."""
    frame = add_speedups(pd.DataFrame(rows), baseline)
    return write_csv(frame, RunDir(root).summary_csv, SUMMARY_SCHEMA)


def write_build(
    root: Path,
    variant: str,
    mode: str,
    *,
    draft_len: int | None = None,
    choices: list[list[int]] | None = None,
    graphs: tuple[bool, bool, str] = (False, False, "no CUDA device"),
    host: dict[str, Any] | None = None,
    server: str = "triton",
) -> Path:
    """Write ``engines/<variant>/build.json`` through the real manifest model."""
    manifest = BuildManifest(
        backend="reference",
        variant={"name": variant, "mode": mode, "server": server},
        mode=mode,
        max_draft_len=draft_len
        if mode in ("draft_target", "ngram")
        else (len(choices or []) or None),
        models={"target": None},
        tokenizer_dir="/nonexistent/tokenizer",
        medusa=MedusaInfo(num_heads=3, num_layers=1, choices=choices)
        if choices
        else None,
        cuda_graphs=CudaGraphs(
            requested=graphs[0], available=graphs[1], reason=graphs[2]
        ),
        host=host or {},
    )
    return write_manifest(RunDir(root).engine_dir(variant), manifest)


def write_repo_metadata(
    root: Path,
    variant: str,
    mode: str,
    *,
    streaming: bool,
    graphs: tuple[bool, bool, str] = (False, False, "no CUDA device"),
) -> Path:
    """Write ``model_repo/<variant>/trtbench.json`` through RepoMetadata."""
    meta = RepoMetadata(
        variant=variant,
        backend="reference",
        mode=mode,
        model_name="ensemble",
        models=["ensemble"],
        streaming=streaming,
        inputs={"text_input": "BYTES"},
        outputs={"output_ids": "INT32"},
        speculative_counts="none" if mode == "baseline" else "per_response",
        max_batch_size=8,
        max_input_len=64,
        max_seq_len=256,
        tokenizer_dir="/nonexistent",
        cuda_graphs={"requested": graphs[0], "enabled": graphs[1], "reason": graphs[2]},
    )
    path = RunDir(root).model_repo(variant) / METADATA_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(meta.to_json())
    return path


def write_breakdown(root: Path, rows: list[dict[str, Any]]) -> Path:
    """Write ``memory_breakdown.csv`` with MEMORY_BREAKDOWN_SCHEMA."""
    return write_csv(
        pd.DataFrame(rows), RunDir(root).memory_breakdown_csv, MEMORY_BREAKDOWN_SCHEMA
    )


def write_steps(
    root: Path, trace: str, overheads_ns: list[int], graph_launches: int = 0
) -> Path:
    """Write ``traces/<trace>/steps.csv`` (STEP_SCHEMA) with one step per overhead value."""
    from trtbench.profiling.traces.schemas import STEP_SCHEMA

    rows = [
        {
            "step": i,
            "s_name": "decode_step",
            "pid": 1,
            "start_ns": i * 10**6,
            "end_ns": i * 10**6 + 900_000,
            "wall_ns": 900_000,
            "launch_calls": graph_launches if graph_launches else 10,
            "graph_launches": graph_launches,
            "launch_overhead_ns": ns,
            "kernels": 10,
            "graph_kernels": 10 if graph_launches else 0,
            "launch_delay_calls": 10,
            "gpu_busy_ns": 500_000,
            "gpu_idle_ns": 100_000,
        }
        for i, ns in enumerate(overheads_ns)
    ]
    path = RunDir(root).traces_dir / trace / "steps.csv"
    return write_csv(pd.DataFrame(rows), path, STEP_SCHEMA)
