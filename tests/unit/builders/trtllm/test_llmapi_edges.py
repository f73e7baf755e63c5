"""Edges of the LLM-API path a first user hit: LLM arguments the contract does not list, a
spec mixing the engine path with a version that lacks it, and a repository the chosen runtime
cannot serve."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from tests.support.cli import run_cli
from tests.support.hf_dirs import make_models


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    return make_models(tmp_path_factory.mktemp("models"))


def write(tmp_path: Path, doc: dict) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def spec(models, *variants: dict, **top) -> dict:
    return {
        "name": "edges",
        "backend": "trtllm-pytorch",
        "trtllm_version": "1.4.0rc4",
        "models": {"target": str(models["target"]), "draft": str(models["draft"])},
        "variants": list(variants),
        **top,
    }


def test_llm_arguments_the_contract_does_not_list_pass_and_are_named(
    models, tmp_path, capsys
):
    # enable_attention_dp and max_input_len are TorchLlmArgs fields the contract does not
    # list (it lists what trtbench writes); host_cache_size likewise on KvCacheConfig
    extra = {
        "enable_attention_dp": True,
        "max_input_len": 256,
        "kv_cache_config": {"host_cache_size": 1024},
    }
    doc = spec(models, {"name": "b", "mode": "baseline", "llm_api_options": extra})
    code, out, err = run_cli(
        ["build", write(tmp_path, doc), "--out", tmp_path / "r"], capsys
    )
    assert code == 0, err
    build = json.loads((tmp_path / "r/engines/b/build.json").read_text())
    # in the plan's key order: kv_cache_config is written before the extra keys
    unchecked = [
        "kv_cache_config.host_cache_size",
        "enable_attention_dp",
        "max_input_len",
    ]
    assert build["tensorrt_llm"]["unchecked"] == unchecked
    assert "passed unchecked (not in the contract): " + ", ".join(unchecked) in out
    plan = yaml.safe_load((tmp_path / "r/engines/b/llm_api.yaml").read_text())
    assert plan["enable_attention_dp"] is True
    assert plan["kv_cache_config"]["host_cache_size"] == 1024
    # the bytes reported are the plan's, the same on a rebuild into the same directory
    size = (tmp_path / "r/engines/b/llm_api.yaml").stat().st_size
    assert build["bytes_on_disk"] == size
    run_cli(["build", write(tmp_path, doc), "--out", tmp_path / "r"], capsys)
    again = json.loads((tmp_path / "r/engines/b/build.json").read_text())
    assert again["bytes_on_disk"] == size


def test_a_misspelt_speculative_knob_is_still_refused(models, tmp_path, capsys):
    variant = {
        "name": "n",
        "mode": "ngram",
        "max_draft_len": 3,
        "speculative_options": {"max_matching_ngram_sise": 2},
    }
    code, _, err = run_cli(
        ["build", write(tmp_path, spec(models, variant)), "--dry-run"], capsys
    )
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "speculative_config.max_matching_ngram_sise is not a field of" in err


def test_engine_path_variants_need_a_version_that_has_the_engine_path(
    models, tmp_path, capsys
):
    doc = spec(
        models,
        {"name": "b", "mode": "baseline"},
        {"name": "e", "mode": "baseline", "backend": "trtllm"},
    )
    path = write(tmp_path, doc)
    code, _, err = run_cli(["build", path, "--dry-run"], capsys)
    assert code == 2, err
    assert err.strip() == (
        f"trtbench: error: {path}: variants[1].backend: trtllm (the TensorRT engine path) "
        "is gone "
        "from TensorRT-LLM 1.4.0rc4 (trtllm_version; the last with it is 1.3.0rc20); use "
        "trtllm_version: 1.2.1 for a spec with both paths, or backend: trtllm-pytorch"
    )


def test_deploy_check_refuses_what_the_reference_runtime_cannot_serve(
    models, tmp_path, capsys
):
    # a target with MTP modules: the config key the MTP check reads
    mtp = {**models, "target": tmp_path / "mtp-target"}
    shutil.copytree(models["target"], mtp["target"])
    config = json.loads((mtp["target"] / "config.json").read_text())
    (mtp["target"] / "config.json").write_text(
        json.dumps({**config, "num_nextn_predict_layers": 1})
    )
    doc = spec(
        mtp, {"name": "ng", "mode": "mtp"}, deploy={"llmapi_runtime": "reference"}
    )
    run = tmp_path / "r"
    code, _, err = run_cli(["build", write(tmp_path, doc), "--out", run], capsys)
    assert code == 0, err  # a valid TensorRT-LLM plan
    code, _, err = run_cli(["deploy", run, "--check"], capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert "ng.mode: the reference engine cannot serve decoding_type MTP" in lines[0]
