"""``scripts/gpu_proof.py --device cpu``: the GPU proof runs here too, so it cannot rot.

One real run of the script (a subprocess, the tiny models passed with ``--models``) at the
smallest settings: batch sizes 1 and 4, float32, 10 tokens per request, 5 profiled decode
steps. Expected values come from definitions, not from the code under test:

- baseline emits exactly one token per row and step, and its requests all end together:
  the first iteration takes the prefill token and the first decode step, so
  ``MAX_TOKENS - 2`` full-batch steps remain, each of ``batch`` tokens;
- tok/s and the speedup are recomputed from the CSV's raw sums (tokens, ns); the speedup is
  also the baseline's time per token over the mode's (step time / tokens per step);
- a speculative step emits 1..K+1 tokens per row (draft_target, ngram, eagle3 K = 4; Medusa:
  1..depth+1 = 4);
- KV-cache bytes = layers × 2 (K, V) × batch × KV heads × cache length × head_dim × 4 bytes,
  read from the target's config.json, cache length = max_seq_len + the widest step (1 for
  baseline) where max_seq_len = prompt 32 + max(MAX_TOKENS, (TRACE_STEPS + 2) × 5);
- weight bytes are the sizes of the ``*.safetensors`` files on disk;
- each trace holds exactly TRACE_STEPS ``decode_step#N`` ranges and no prefill, counted here
  in the raw traces that ``--keep-traces`` keeps.

Bad input is checked in process (``main(argv)``) per case, and once through a subprocess for
the exit status.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

from tests.support.data import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "gpu_proof.py"
MAX_TOKENS = 10
TRACE_STEPS = 5
BATCHES = (1, 4)
PROMPT_LEN = 32
MODES = ("baseline", "draft_target", "ngram", "medusa", "eagle3")  # the default: all
MAX_PER_STEP = {"baseline": 1, "draft_target": 5, "ngram": 5, "medusa": 4, "eagle3": 5}
SUMMARY_KEYS = {
    "gpu_proof_version",
    "settings",
    "environment",
    "elapsed_s",
    "cuda_only",
    "lossless",
    "errors",
    "speedups",
    "launch",
    "files",
}
CUDA_ONLY = {"cuda_graphs", "kineto_launch_analysis", "nvml", "torch_cuda_memory"}


@pytest.fixture(scope="module")
def proof(tiny_models, tmp_path_factory):
    """Run the script once; return (out dir, completed process)."""
    out = tmp_path_factory.mktemp("gpu_proof") / "out"
    argv = [
        sys.executable,
        str(SCRIPT),
        "--device",
        "cpu",
        "--out",
        str(out),
        "--models",
        str(tiny_models["target"].parent),
        "--dtypes",
        "float32",
        "--batch-sizes",
        ",".join(map(str, BATCHES)),
        "--max-tokens",
        str(MAX_TOKENS),
        "--trace-steps",
        str(TRACE_STEPS),
        "--threads",
        "1",
        "--keep-traces",
        "--quiet",
    ]
    done = subprocess.run(
        argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out, done


def read(out: Path, name: str) -> pd.DataFrame:
    """A CSV with only empty cells as missing (the literal ``n/a`` stays text)."""
    return pd.read_csv(out / name, keep_default_na=False, na_values=[""])


def test_summary_keys_and_cpu_na(proof):
    out, done = proof
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary) == SUMMARY_KEYS
    assert set(summary["cuda_only"]) == CUDA_ONLY
    for name, item in summary["cuda_only"].items():
        assert item["status"] == "n/a", name
        assert item["reason"], name  # every CUDA-only figure says why it is missing
    assert "no CUDA device" in summary["cuda_only"]["cuda_graphs"]["reason"]
    assert (
        "no CUDA activity" in summary["cuda_only"]["kineto_launch_analysis"]["reason"]
    )
    assert summary["cuda_only"]["nvml"]["sampler"]["source"] == "rss"
    assert summary["lossless"]["all"] is True
    assert summary["errors"] == []
    assert summary["environment"]["device"] == "cpu"
    for name in summary["files"]:
        assert (out / name).is_file(), name
    assert "lossless: all" in done.stdout and "speedup" in done.stdout
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    assert size < 3 * 2**20


def test_graphs_rows_are_na_with_reason(proof):
    out, _ = proof
    timing = read(out, "decode_timing.csv")
    graphs = timing[timing["graphs"] == "graphs"]
    assert len(graphs) == len(MODES) * len(BATCHES)
    assert (graphs["graphs_status"] == "n/a").all()
    assert graphs["graphs_reason"].str.contains("no CUDA device").all()
    assert (
        graphs[["step_ms_mean", "output_tok_s", "speedup_vs_baseline"]]
        .isna()
        .all()
        .all()
    )
    eager = timing[timing["graphs"] == "eager"]
    assert (
        eager[["torch_max_allocated_bytes", "torch_max_reserved_bytes"]]
        .isna()
        .all()
        .all()
    )


def test_baseline_step_counts_from_the_definition(proof):
    out, _ = proof
    timing = read(out, "decode_timing.csv")
    base = timing[(timing["mode"] == "baseline") & (timing["graphs"] == "eager")]
    for row in base.itertuples():
        assert row.full_batch_steps == MAX_TOKENS - 2
        assert row.all_steps == MAX_TOKENS - 2
        assert row.full_batch_tokens == row.batch_size * (MAX_TOKENS - 2)
        assert row.tokens_per_step == row.batch_size


def test_speedup_recomputed_from_raw_sums(proof):
    out, _ = proof
    timing = read(out, "decode_timing.csv")
    eager = timing[timing["graphs"] == "eager"].set_index(["mode", "batch_size"])
    for (mode, batch), row in eager.iterrows():
        tok_s = row.full_batch_tokens / (row.full_batch_decode_ns / 1e9)
        assert row.output_tok_s == pytest.approx(tok_s, rel=1e-9)
        base = eager.loc[("baseline", batch)]
        base_tok_s = base.full_batch_tokens / (base.full_batch_decode_ns / 1e9)
        assert row.speedup_vs_baseline == pytest.approx(tok_s / base_tok_s, rel=1e-9)
        # the same ratio as time per emitted token: baseline's over the mode's
        per_token = row.step_ms_mean / row.tokens_per_step
        base_per_token = base.step_ms_mean / base.tokens_per_step
        assert row.speedup_vs_baseline == pytest.approx(
            base_per_token / per_token, rel=1e-9
        )
        assert batch <= row.tokens_per_step <= batch * MAX_PER_STEP[mode]


def test_lossless_every_mode_exact_in_float32(proof):
    out, _ = proof
    lossless = read(out, "lossless.csv")
    got = {(r.mode, r.batch_size) for r in lossless.itertuples()}
    assert got == {(m, b) for m in MODES[1:] for b in BATCHES}
    assert (lossless["compared_to"] == "baseline").all()
    assert lossless["lossless"].all()
    assert (lossless["exact"] == lossless["batch_size"]).all()
    assert (lossless["requests"] == lossless["batch_size"]).all()
    assert (lossless["mismatches"] == 0).all() and (lossless["ties"] == 0).all()


def test_kineto_rows_count_the_requested_steps(proof):
    out, _ = proof
    kineto = read(out, "kineto.csv")
    got = {(r.mode, r.batch_size, r.graphs) for r in kineto.itertuples()}
    assert got == {(m, b, "eager") for m in MODES for b in BATCHES}
    assert (kineto["steps_requested"] == TRACE_STEPS).all()
    assert (kineto["steps_run"] == TRACE_STEPS).all()
    assert (kineto["decode_step_ranges"] == TRACE_STEPS).all()
    assert (kineto["analysis_status"] == "n/a").all()
    assert kineto["analysis_reason"].str.contains("no CUDA activity").all()
    assert kineto["launch_overhead_mean_ns"].isna().all()
    for row in kineto.itertuples():  # the kept raw trace, counted independently
        trace = (
            out / "kineto" / f"{row.mode}-float32-b{row.batch_size}-eager/trace.json.gz"
        )
        events = json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
        names = [e.get("name", "") for e in events if e.get("cat") == "user_annotation"]
        assert (
            sum(bool(re.fullmatch(r"decode_step#\d+", n)) for n in names) == TRACE_STEPS
        )
        assert "prefill" not in names


def test_memory_figures_from_configs_and_files(proof, tiny_models):
    out, _ = proof
    config = json.loads((tiny_models["target"] / "config.json").read_text())
    layers, kv_heads = config["num_hidden_layers"], config["num_key_value_heads"]
    head_dim = config["head_dim"]
    max_seq_len = PROMPT_LEN + max(MAX_TOKENS, (TRACE_STEPS + 2) * 5)
    timing = read(out, "decode_timing.csv")
    base = timing[(timing["mode"] == "baseline") & (timing["graphs"] == "eager")]
    for row in base.itertuples():
        want = layers * 2 * row.batch_size * kv_heads * (max_seq_len + 1) * head_dim * 4
        assert row.kv_cache_bytes == want
    breakdown = read(out, "memory_breakdown.csv").set_index("variant")
    files = {
        role: sum(p.stat().st_size for p in tiny_models[role].glob("*.safetensors"))
        for role in ("target", "draft", "medusa", "eagle3")
    }
    assert breakdown.loc["baseline-float32", "target_weights_bytes"] == files["target"]
    assert breakdown.loc["draft_target-float32", "weights_total_bytes"] == (
        files["target"] + files["draft"]
    )
    assert breakdown.loc["medusa-float32", "medusa_heads_bytes"] == files["medusa"]
    assert breakdown.loc["eagle3-float32", "weights_total_bytes"] == (
        files["target"] + files["eagle3"]
    )
    assert breakdown.loc["baseline-float32", "target_kv_bytes_per_token"] == (
        2 * layers * kv_heads * head_dim * 4
    )
    assert (breakdown["memory_source"] == "rss").all()
    assert (breakdown["peak_rss_bytes"] > 0).all()
    memory = read(out, "memory.csv")
    assert (memory["source"] == "rss").all() and memory["mem_used_bytes"].isna().all()
    phases = set(memory["phase"])
    assert any(p.startswith("run:medusa:float32:b4:eager") for p in phases)


def _script_main():
    spec = importlib.util.spec_from_file_location("gpu_proof_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--device", "tpu"], "--device"),
        (["--modes", "baseline,eagle9"], "--modes"),
        (["--dtypes", "float8"], "--dtypes"),
        (["--batch-sizes", "1,x"], "--batch-sizes"),
        (["--batch-sizes", "0"], "--batch-sizes"),
        (["--out", "FILE/sub"], "--out"),
        pytest.param(
            ["--device", "cuda"],
            "--device",
            marks=pytest.mark.skipif(
                torch.cuda.is_available(), reason="this machine has CUDA"
            ),
        ),
    ],
)
def test_bad_input_exits_2_with_one_line(argv, named, tmp_path, capsys):
    blocker = tmp_path / "FILE"
    blocker.write_text("a file, not a folder")
    argv = [a.replace("FILE", str(blocker)) for a in argv]
    if "--out" not in argv:
        argv += ["--out", str(tmp_path / "out")]
    if "--device" not in argv:
        argv += ["--device", "cpu"]
    assert _script_main()([*argv, "--quiet"], log=False) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpu_proof: "), captured.err
    assert named in lines[0]
    assert captured.out == ""


def test_bad_device_exit_status_of_the_process(tmp_path):
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--device", "tpu", "--out", str(tmp_path)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "gpu_proof: --device 'tpu' is unknown; use cpu, cuda or cuda:N"
    ]
