"""The LLM-API option trtllm-serve's counters need, in a ``server: trtllm-serve`` variant's
``llm_api.yaml``: ``enable_iter_perf_stats`` (iteration stats on ``GET /metrics``), False in
TensorRT-LLM (``tensorrt_llm/llmapi/llm_args.py``). ``return_perf_metrics`` is not set (its
collector drains ``GET /metrics``; llmapi_plan.COUNTER_OPTIONS says why).

Set where the version's contract lists it: 1.2.1's does (read in its stored 1.2-era copy
of llm_args.py), 1.4.0rc4's does not (not read for that release), so there it is left
out and the build says so; a user may still set both by hand there (unchecked). The expected
documents are written out from ``llmapi_plan.py``'s mapping and the spec's defaults
(max_batch_size 8, max_seq_len 2048, KV fraction 0.9 with block reuse, no CUDA graphs).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import yaml

from tests.support.cli import run_cli
from tests.support.hf_dirs import make_models

BASE = {
    "backend": "pytorch",
    "max_batch_size": 8,
    "max_seq_len": 2048,
    "tensor_parallel_size": 1,
    "pipeline_parallel_size": 1,
    "dtype": "auto",
    "disable_overlap_scheduler": False,
    "cuda_graph_config": None,
    "kv_cache_config": {"free_gpu_memory_fraction": 0.9, "enable_block_reuse": True},
}
COUNTERS = {"enable_iter_perf_stats": True}
BOTH = {"enable_iter_perf_stats": True, "return_perf_metrics": True}


@pytest.fixture(scope="module")
def target(tmp_path_factory) -> Path:
    return make_models(tmp_path_factory.mktemp("models"))["target"]


def build(tmp_path, capsys, target, version, variant, *extra) -> tuple[int, str, str]:
    doc = {
        "backend": "trtllm-pytorch",
        "trtllm_version": version,
        "models": {"target": str(target)},
        "variants": [{"name": "v", "mode": "baseline", **variant}],
    }
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(doc, sort_keys=False))
    return run_cli(["build", spec, "--out", tmp_path / "run", *extra], capsys)


def built(tmp_path) -> tuple[dict, dict]:
    """(llm_api.yaml, build.json's tensorrt_llm block) of variant v."""
    engine = tmp_path / "run" / "engines" / "v"
    options = yaml.safe_load((engine / "llm_api.yaml").read_text())
    block = json.loads((engine / "build.json").read_text())["tensorrt_llm"]
    return options, block


def test_1_2_1_sets_the_iteration_stats_for_trtllm_serve(tmp_path, capsys, target):
    code, _, err = build(tmp_path, capsys, target, "1.2.1", {"server": "trtllm-serve"})
    assert code == 0, err
    options, block = built(tmp_path)
    assert options == {**BASE, **COUNTERS}
    assert block["unchecked"] == []  # in the 1.2.1 contract


def test_a_triton_served_variant_gets_neither(tmp_path, capsys, target):
    code, _, err = build(tmp_path, capsys, target, "1.2.1", {})
    assert code == 0, err
    assert built(tmp_path)[0] == BASE


def test_1_4_0rc4_leaves_them_out_and_says_so(tmp_path, capsys, target, caplog):
    variant = {"server": "trtllm-serve"}
    with caplog.at_level(logging.WARNING):
        code, out, err = build(tmp_path, capsys, target, "1.4.0rc4", variant)
    assert code == 0, err
    assert built(tmp_path)[0] == BASE
    said = (
        "enable_iter_perf_stats: not in trtbench's TensorRT-LLM 1.4.0rc4 contract, so not "
        "set; trtllm-serve's speculative counters need it: add llm_api_options: "
        "{enable_iter_perf_stats: true} to variant v if this release has it (passed "
        "unchecked; on 1.3+ also return_perf_metrics: true for the per-position "
        "Prometheus counters)"
    )
    assert said in caplog.text
    code, out, err = build(tmp_path, capsys, target, "1.4.0rc4", variant, "--dry-run")
    assert code == 0, err
    assert f"# {said}" in out.splitlines()


def test_1_4_0rc4_takes_them_by_hand_unchecked(tmp_path, capsys, target):
    variant = {"server": "trtllm-serve", "llm_api_options": BOTH}
    code, out, err = build(tmp_path, capsys, target, "1.4.0rc4", variant, "--dry-run")
    assert code == 0, err  # not refused as keys of 1.2.1 only
    assert "not set" not in out
    code, _, err = build(tmp_path, capsys, target, "1.4.0rc4", variant)
    assert code == 0, err
    options, block = built(tmp_path)
    assert options == {**BASE, **BOTH}
    assert block["unchecked"] == ["enable_iter_perf_stats", "return_perf_metrics"]


def test_the_user_may_turn_it_off_or_add_return_perf_metrics(tmp_path, capsys, target):
    variant = {
        "server": "trtllm-serve",
        "llm_api_options": {"enable_iter_perf_stats": False},
    }
    code, _, err = build(tmp_path, capsys, target, "1.2.1", variant)
    assert code == 0, err
    assert built(tmp_path)[0] == {**BASE, "enable_iter_perf_stats": False}
    variant["llm_api_options"] = {"return_perf_metrics": True}
    code, _, err = build(tmp_path, capsys, target, "1.2.1", variant)
    assert code == 0, err
    assert built(tmp_path)[0] == {**BASE, **BOTH}


def test_the_1_2_1_contract_checks_their_type(tmp_path, capsys, target):
    variant = {"server": "trtllm-serve", "llm_api_options": {"return_perf_metrics": 1}}
    code, _, err = build(tmp_path, capsys, target, "1.2.1", variant)
    assert code == 2
    assert "return_perf_metrics=1: expected bool (TensorRT-LLM 1.2.1)" in err
