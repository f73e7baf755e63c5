"""Rendering model repositories for every mode of both backends (pure; no server).

Expected values come from the issue, triton-inference-server/tensorrtllm_backend
``docs/model_config.md`` (parameters, draft-target / Medusa) and Triton's repository layout
(triton-inference-server/server ``docs/user_guide/model_repository.md``), worked out by hand
for the manifests below.
"""

from __future__ import annotations

import json

import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from tests.support.manifests import ENGINE_DIR, TREE, manifest
from trtbench.core.errors import DeployError
from trtbench.spec.bench import DeploySpec
from trtbench.triton_repo.pbtxt import medusa_brace, render_parameters
from trtbench.triton_repo.render import render_repository
from trtbench.triton_repo.validate import validate_files

MODES = ("baseline", "draft_target", "medusa")


def config(files: dict[str, str], model: str) -> mc.ModelConfig:
    return text_format.Parse(files[f"{model}/config.pbtxt"], mc.ModelConfig())


def params(cfg: mc.ModelConfig) -> dict[str, str]:
    return {k: v.string_value for k, v in cfg.parameters.items()}


def meta(files: dict[str, str]) -> dict:
    return json.loads(files["trtbench.json"])


@pytest.mark.parametrize("backend", ["reference", "trtllm"])
@pytest.mark.parametrize("mode", MODES)
def test_every_mode_renders_a_valid_repository(backend, mode):
    files = render_repository(manifest(backend, mode), ENGINE_DIR, DeploySpec())
    assert validate_files(files) == []
    assert "${" not in "".join(files.values())


@pytest.mark.parametrize("mode", MODES)
def test_reference_is_one_decoupled_python_ensemble(mode):
    deploy = DeploySpec(instance_count=3)
    files = render_repository(manifest("reference", mode), ENGINE_DIR, deploy)
    assert set(files) == {
        "ensemble/config.pbtxt",
        "ensemble/1/model.py",
        "ensemble/1/trtbench_model_utils.py",
        "ensemble/1/trtbench_detok.py",
        "trtbench.json",
    }
    cfg = config(files, "ensemble")
    assert (cfg.name, cfg.backend, cfg.max_batch_size) == ("ensemble", "python", 4)
    assert cfg.model_transaction_policy.decoupled is True
    assert cfg.instance_group[0].count == 3
    assert params(cfg)["engine_dir"] == str(ENGINE_DIR)
    inputs = {t.name: (mc.DataType.Name(t.data_type), t.optional) for t in cfg.input}
    # TRT-LLM ensemble names and dtypes (inflight_batcher_llm/ensemble/config.pbtxt), 1.2.1
    # era: min_tokens, seed
    assert inputs["text_input"] == ("TYPE_STRING", False)
    assert inputs["max_tokens"] == ("TYPE_INT32", False)
    assert inputs["stream"] == ("TYPE_BOOL", True)
    assert inputs["min_tokens"] == ("TYPE_INT32", True)
    assert inputs["seed"] == ("TYPE_UINT64", True)
    assert "min_length" not in inputs and "random_seed" not in inputs
    outputs = {t.name: mc.DataType.Name(t.data_type) for t in cfg.output}
    assert outputs["text_output"] == "TYPE_STRING"
    assert outputs["output_ids"] == "TYPE_INT32"
    assert outputs["draft_tokens_accepted"] == "TYPE_INT32"
    assert outputs["acceptance_rate"] == "TYPE_FP32"
    assert outputs["first_token_time_ns"] == "TYPE_INT64"
    info = meta(files)
    assert (info["model_name"], info["streaming"], info["models"]) == (
        "ensemble",
        True,
        ["ensemble"],
    )
    expected = "none" if mode == "baseline" else "per_response"
    assert info["speculative_counts"] == expected
    assert info["extra_inputs"] == {}
    # in-flight batching over the variant's max_batch_size (4), one torch thread on CPU
    assert info["batching"]["strategy"] == "inflight"
    assert info["batching"]["max_batch_size"] == 4
    assert info["batching"]["cpu_threads"] == 1
    assert params(cfg)["cpu_threads"] == "1"


def test_trtllm_baseline_layout_and_parameters():
    deploy = DeploySpec(kv_cache_free_gpu_mem_fraction=0.8, enable_kv_cache_reuse=False)
    files = render_repository(manifest("trtllm", "baseline"), ENGINE_DIR, deploy)
    models = {p.split("/")[0] for p in files if p.endswith("config.pbtxt")}
    assert models == {"ensemble", "preprocessing", "tensorrt_llm", "postprocessing"}
    trt = config(files, "tensorrt_llm")
    assert trt.backend == "tensorrtllm"
    assert trt.model_transaction_policy.decoupled is True
    p = params(trt)
    assert p["gpt_model_path"] == "/runs/r/engines/v/target"
    assert p["gpt_model_type"] == "inflight_fused_batching"
    assert p["kv_cache_free_gpu_mem_fraction"] == "0.8"
    assert p["enable_kv_cache_reuse"] == "false"
    assert p["exclude_input_in_output"] == "true"
    assert p["cuda_graph_mode"] == "false" and p["cuda_graph_cache_size"] == "0"
    assert "decoding_mode" not in p and "gpu_device_ids" not in p
    steps = [s.model_name for s in config(files, "ensemble").ensemble_scheduling.step]
    assert steps == ["preprocessing", "tensorrt_llm", "postprocessing"]
    assert params(config(files, "preprocessing"))["tokenizer_dir"] == "/models/target"
    info = meta(files)
    assert info["model_name"] == "ensemble" and info["streaming"] is True
    assert info["batching"] == {
        "strategy": "inflight_fused_batching",
        "max_batch_size": 4,
    }
    assert info["tensorrt_llm_models"] == ["tensorrt_llm"]
    assert info["speculative_counts"] == "none"
    assert "total_draft_tokens" in info["perf_metrics_outputs"]


def test_trtllm_medusa_tree_brace_syntax_and_cuda_graphs():
    m = manifest("trtllm", "medusa", graphs=(True, True))
    files = render_repository(m, ENGINE_DIR, DeploySpec(cuda_graph_cache_size=16))
    p = params(config(files, "tensorrt_llm"))
    assert p["decoding_mode"] == "medusa"
    assert p["medusa_choices"] == "{0}, {1}, {0, 0}"
    assert p["multi_block_mode"] == "false"
    assert (p["cuda_graph_mode"], p["cuda_graph_cache_size"]) == ("true", "16")
    # default cache size: one graph per batch size up to max_batch_size (4)
    files = render_repository(m, ENGINE_DIR, DeploySpec())
    assert params(config(files, "tensorrt_llm"))["cuda_graph_cache_size"] == "4"
    info = meta(files)
    assert info["speculative_counts"] == "perf_metrics"
    assert info["medusa_choices"] == TREE
    assert info["cuda_graphs"] == {"requested": True, "enabled": True, "reason": ""}


def test_cuda_graphs_requested_but_unavailable_stay_off_with_reason():
    m = manifest("trtllm", "baseline", graphs=(True, False))
    files = render_repository(m, ENGINE_DIR, DeploySpec())
    assert params(config(files, "tensorrt_llm"))["cuda_graph_mode"] == "false"
    assert meta(files)["cuda_graphs"] == {
        "requested": True,
        "enabled": False,
        "reason": "no CUDA device",
    }


def test_trtllm_draft_target_goes_through_bls():
    deploy = DeploySpec(gpu_device_ids=[0, 1])
    files = render_repository(manifest("trtllm", "draft_target"), ENGINE_DIR, deploy)
    target, draft = config(files, "tensorrt_llm"), config(files, "tensorrt_llm_draft")
    assert draft.name == "tensorrt_llm_draft"
    # BLS calls both non-streaming (decoupled_mode False in the example of NVIDIA/TensorRT-LLM
    # examples/draft_target_model/README.md)
    assert not target.model_transaction_policy.decoupled
    assert not draft.model_transaction_policy.decoupled
    assert params(draft)["gpt_model_path"] == "/runs/r/engines/v/draft"
    # 0.9 of free memory split evenly between the two models sharing the GPU
    assert params(target)["kv_cache_free_gpu_mem_fraction"] == "0.45"
    assert params(draft)["gpu_device_ids"] == "0,1"
    bls = config(files, "tensorrt_llm_bls")
    assert bls.model_transaction_policy.decoupled is True
    assert bls.instance_group[0].count == 4  # ~max_batch_size instances (TRT-LLM docs)
    bp = params(bls)
    assert bp["tensorrt_llm_model_name"] == "tensorrt_llm"
    assert bp["tensorrt_llm_draft_model_name"] == "tensorrt_llm_draft"
    assert bp["num_draft_tokens"] == "4"
    assert "num_draft_tokens" in {t.name for t in bls.input}
    info = meta(files)
    assert info["model_name"] == "tensorrt_llm_bls"
    assert info["streaming"] is False and info["max_request_batch_size"] == 1
    assert info["extra_inputs"] == {"num_draft_tokens": 4}
    assert info["tensorrt_llm_models"] == ["tensorrt_llm", "tensorrt_llm_draft"]
    assert info["speculative_counts"] == "per_response"


def test_world_size_is_tp_times_pp():
    m = manifest("trtllm", "baseline", tp_size=2, pp_size=2)
    files = render_repository(m, ENGINE_DIR, DeploySpec())
    assert meta(files)["world_size"] == 4


def test_missing_draft_engine_is_named():
    m = manifest("trtllm", "draft_target")
    m = m.model_copy(update={"engines": {"target": "target"}})
    with pytest.raises(DeployError, match="no 'draft' engine"):
        render_repository(m, ENGINE_DIR, DeploySpec())


def test_medusa_without_tree_and_eagle_are_refused():
    m = manifest("trtllm", "medusa").model_copy(update={"medusa": None})
    with pytest.raises(DeployError, match="no medusa section"):
        render_repository(m, ENGINE_DIR, DeploySpec())
    eagle = manifest("trtllm", "baseline").model_copy(update={"mode": "eagle"})
    with pytest.raises(DeployError, match="eagle"):
        render_repository(eagle, ENGINE_DIR, DeploySpec())


def test_parameter_values_are_quoted_for_protobuf_text():
    odd = 'C:\\dir "x"'
    cfg = text_format.Parse(render_parameters({"tokenizer_dir": odd}), mc.ModelConfig())
    assert cfg.parameters["tokenizer_dir"].string_value == odd


def test_medusa_brace():
    assert medusa_brace([[0], [0, 1], [2, 0, 3]]) == "{0}, {0, 1}, {2, 0, 3}"
