"""Rendering TensorRT-LLM's ``llmapi`` repository for trtllm-pytorch builds (pure; no server).

The expected tensors are written out by hand from TensorRT-LLM's
``triton_backend/all_models/llmapi/tensorrt_llm/config.pbtxt`` (@ c8c6df08bd0e); the model.yaml
shape from the issue (``triton_config: {decoupled: true, max_batch_size: 0}``) and
``triton_backend/all_models/llmapi/tensorrt_llm/1/model.yaml`` of the same repository.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from tests.support.manifests import manifest
from trtbench.builders.manifest import ModelFiles
from trtbench.core.errors import ConfigError, DeployError
from trtbench.spec.bench import DeploySpec
from trtbench.triton_repo.render import render_repository
from trtbench.triton_repo.validate import validate_files

T = mc.DataType
# (name, data type, dims, optional) as TensorRT-LLM's llmapi config.pbtxt declares them.
WANT_INPUTS = [
    ("text_input", T.TYPE_STRING, [-1], False),
    ("streaming", T.TYPE_BOOL, [1], True),
    ("sampling_param_best_of", T.TYPE_INT32, [1], True),
    ("sampling_param_temperature", T.TYPE_FP32, [1], True),
    ("sampling_param_top_k", T.TYPE_INT32, [1], True),
    ("sampling_param_top_p", T.TYPE_FP32, [1], True),
    ("sampling_param_frequency_penalty", T.TYPE_FP32, [1], True),
    ("sampling_param_presence_penalty", T.TYPE_FP32, [1], True),
    ("sampling_param_max_tokens", T.TYPE_INT32, [1], True),
    ("sampling_param_stop", T.TYPE_STRING, [-1], True),
    ("sampling_param_seed", T.TYPE_UINT64, [1], True),
    ("sampling_param_exclude_input_from_output", T.TYPE_BOOL, [1], True),
    ("sampling_param_return_perf_metrics", T.TYPE_BOOL, [1], True),
    ("return_finish_reason", T.TYPE_BOOL, [1], True),
    ("return_stop_reason", T.TYPE_BOOL, [1], True),
    ("return_cumulative_logprob", T.TYPE_BOOL, [1], True),
    ("stop", T.TYPE_BOOL, [1], True),
]
WANT_OUTPUTS = [
    ("text_output", T.TYPE_STRING, [-1]),
    ("finish_reason", T.TYPE_STRING, [-1]),
    ("stop_reason", T.TYPE_STRING, [-1]),
    ("cumulative_logprob", T.TYPE_FP32, [-1]),
    ("kv_cache_reused_block", T.TYPE_INT32, [-1]),
    ("kv_cache_missed_block", T.TYPE_INT32, [-1]),
    ("kv_cache_alloc_new_blocks", T.TYPE_INT32, [-1]),
    ("kv_cache_alloc_total_blocks", T.TYPE_INT32, [-1]),
    ("kv_cache_hit_rate", T.TYPE_FP32, [-1]),
    ("arrival_time_ns", T.TYPE_INT64, [1]),
    ("first_scheduled_time_ns", T.TYPE_INT64, [1]),
    ("first_token_time_ns", T.TYPE_INT64, [1]),
    ("last_token_time_ns", T.TYPE_INT64, [1]),
    ("acceptance_rate", T.TYPE_FP32, [1]),
    ("total_accepted_draft_tokens", T.TYPE_INT32, [1]),
    ("total_draft_tokens", T.TYPE_INT32, [1]),
]
LLM_ARGS = {
    "backend": "pytorch",
    "max_batch_size": 4,
    "max_seq_len": 256,
    "cuda_graph_config": None,
    "disable_overlap_scheduler": False,
    "kv_cache_config": {"free_gpu_memory_fraction": 0.9, "enable_block_reuse": True},
    "speculative_config": {
        "decoding_type": "DraftTarget",
        "max_draft_len": 4,
        "speculative_model": "/models/draft",
    },
}


def llmapi_manifest(mode: str = "draft_target"):
    """A trtllm-pytorch build.json (validated as a reference one, then re-labelled, so the
    test does not depend on BuildManifest's backend list)."""
    m = manifest("reference", mode)
    return m.model_copy(
        update={
            "backend": "trtllm-pytorch",
            "models": {"target": ModelFiles(path="/models/target")},
        }
    )


def deploy_spec(runtime: str, model_dir: Path | None = None) -> DeploySpec:
    fields = {"llmapi_runtime": runtime, "llmapi_model_dir": model_dir}
    if "llmapi_runtime" in DeploySpec.model_fields:
        return DeploySpec(**fields)
    return DeploySpec().model_copy(update=fields)


@pytest.fixture
def engine_dir(tmp_path) -> Path:
    (tmp_path / "llm_api.yaml").write_text(yaml.safe_dump(LLM_ARGS))
    return tmp_path


def parse(files: dict[str, str]) -> mc.ModelConfig:
    return text_format.Parse(files["tensorrt_llm/config.pbtxt"], mc.ModelConfig())


def test_reference_runtime_repository(engine_dir):
    files = render_repository(llmapi_manifest(), engine_dir, deploy_spec("reference"))
    assert validate_files(files) == []
    cfg = parse(files)
    assert cfg.name == "tensorrt_llm" and cfg.backend == "python"
    assert [(t.name, t.data_type, list(t.dims), t.optional) for t in cfg.input] == (
        WANT_INPUTS
    )
    assert [(t.name, t.data_type, list(t.dims)) for t in cfg.output] == WANT_OUTPUTS
    # the same values model.yaml's triton_config gives auto_complete_config
    assert cfg.max_batch_size == 0 and cfg.model_transaction_policy.decoupled
    doc = yaml.safe_load(files["tensorrt_llm/1/model.yaml"])
    assert doc["triton_config"] == {"max_batch_size": 0, "decoupled": True}
    assert list(doc)[:2] == ["model", "backend"]
    assert doc["model"] == "/models/target"
    assert {k: v for k, v in doc.items() if k not in ("model", "triton_config")} == (
        LLM_ARGS
    )
    # our reference model and the helpers it imports
    assert "engine_from_llm_args" in files["tensorrt_llm/1/model.py"]
    assert {
        "tensorrt_llm/1/trtbench_model_utils.py",
        "tensorrt_llm/1/trtbench_detok.py",
    } <= set(files)
    meta = json.loads(files["trtbench.json"])
    assert meta["backend"] == "trtllm-pytorch" and meta["model_name"] == "tensorrt_llm"
    assert meta["models"] == ["tensorrt_llm"] and meta["world_size"] == 1
    assert meta["streaming"] and meta["decoupled"] and not meta["output_ids"]
    assert meta["text_output"] == "cumulative"
    assert meta["speculative_counts"] == "perf_metrics"
    assert meta["perf_metrics_outputs"] == [
        "arrival_time_ns",
        "first_scheduled_time_ns",
        "first_token_time_ns",
        "last_token_time_ns",
        "acceptance_rate",
        "total_accepted_draft_tokens",
        "total_draft_tokens",
    ]
    assert meta["extra_inputs"] == {
        "sampling_param_exclude_input_from_output": True,
        "sampling_param_return_perf_metrics": True,
    }
    assert meta["inputs"]["sampling_param_max_tokens"] == "INT32"
    assert meta["batching"]["max_batch_size"] == 4


def test_baseline_has_no_speculative_counts(tmp_path):
    (tmp_path / "llm_api.yaml").write_text("backend: pytorch\nmax_batch_size: 2\n")
    files = render_repository(
        llmapi_manifest("baseline"), tmp_path, deploy_spec("reference")
    )
    meta = json.loads(files["trtbench.json"])
    assert meta["speculative_counts"] == "none"
    assert "speculative_config" not in yaml.safe_load(
        files["tensorrt_llm/1/model.yaml"]
    )


def test_tensorrt_llm_runtime_copies_upstream_model(engine_dir, tmp_path):
    upstream = tmp_path / "llmapi" / "tensorrt_llm"
    (upstream / "1").mkdir(parents=True)
    (upstream / "1" / "model.py").write_text("# upstream model\n")
    (upstream / "1" / "helpers.py").write_text("# upstream helpers\n")
    files = render_repository(
        llmapi_manifest(), engine_dir, deploy_spec("tensorrt_llm", upstream)
    )
    assert files["tensorrt_llm/1/model.py"] == "# upstream model\n"
    assert files["tensorrt_llm/1/helpers.py"] == "# upstream helpers\n"
    assert "tensorrt_llm/1/trtbench_model_utils.py" not in files
    meta = json.loads(files["trtbench.json"])
    assert meta["perf_metrics_outputs"][:5] == [
        "kv_cache_reused_block",
        "kv_cache_missed_block",
        "kv_cache_alloc_new_blocks",
        "kv_cache_alloc_total_blocks",
        "kv_cache_hit_rate",
    ]
    assert validate_files(files) == []


def test_tensorrt_llm_runtime_without_model_dir_is_one_line(engine_dir):
    with pytest.raises(DeployError) as err:
        render_repository(llmapi_manifest(), engine_dir, deploy_spec("tensorrt_llm"))
    message = str(err.value)
    assert "\n" not in message and "llmapi_model_dir" in message


def test_model_dir_without_model_py_is_named(engine_dir, tmp_path):
    with pytest.raises(DeployError, match="has no 1/model.py"):
        render_repository(
            llmapi_manifest(), engine_dir, deploy_spec("tensorrt_llm", tmp_path)
        )


def test_missing_llm_api_yaml_is_named(tmp_path):
    with pytest.raises(DeployError, match="llm_api.yaml is missing"):
        render_repository(llmapi_manifest(), tmp_path, deploy_spec("reference"))


def test_llm_args_map_onto_reference_modes():
    from trtbench.builders.reference.llm_args import plan_from_llm_args

    plan = plan_from_llm_args({"model": "/t", **LLM_ARGS})
    assert (plan.mode, plan.draft, plan.draft_len) == (
        "draft_target",
        Path("/models/draft"),
        4,
    )
    assert (plan.max_batch_size, plan.max_seq_len, plan.cuda_graphs) == (4, 256, False)
    base = plan_from_llm_args(
        {"model": "/t", "cuda_graph_config": {"max_batch_size": 4}}
    )
    assert (base.mode, base.draft, base.cuda_graphs) == ("baseline", None, True)
    for kind, mode in (("MTP", "mtp"),):
        args = {"model": "/t", "speculative_config": {"decoding_type": kind}}
        with pytest.raises(
            ConfigError, match=f"decoding_type {kind} yet: it has no {mode} mode"
        ):
            plan_from_llm_args(args)
