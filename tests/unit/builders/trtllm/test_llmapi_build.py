"""``trtbench build`` on TensorRT-LLM's LLM-API path (backend trtllm-pytorch), on CPU.

The model dirs are real Hugging Face config.json files (``tests/support/hf_dirs.py``); the MTP
target is a copy with ``num_nextn_predict_layers`` written into its config. Expected YAML
documents are written out by hand from the mapping in ``builders/trtllm/llmapi_plan.py``'s
docstring and the spec values; the contract versions are H1's packaged ones.
"""

from __future__ import annotations

import json
import shutil
import sys
import types
from pathlib import Path

import pytest
import yaml

from tests.support.cli import run_cli
from tests.support.hf_dirs import make_models, write_llama
from trtbench.builders.trtllm.contract import check_trtllm_version, load_contract
from trtbench.builders.trtllm.llmapi_build import resolve_trtllm_version
from trtbench.builders.trtllm.run import require_trtllm
from trtbench.core.errors import ConfigError, NotAvailableError
from trtbench.spec.bench import parse_spec


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("models")
    dirs = make_models(root)
    dirs["eagle"] = write_llama(root / "eagle3", hidden=16)
    mtp = root / "mtp_target"
    shutil.copytree(dirs["target"], mtp)
    config = json.loads((mtp / "config.json").read_text())
    config["num_nextn_predict_layers"] = 2
    (mtp / "config.json").write_text(json.dumps(config))
    dirs["mtp_target"] = mtp
    return dirs


def write_spec(tmp_path: Path, doc: dict) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def full_spec(models: dict[str, Path], version: str = "1.4.0rc4") -> dict:
    return {
        "name": "llmapi",
        "backend": "trtllm-pytorch",
        "trtllm_version": version,
        "models": {"target": str(models["mtp_target"]), "draft": str(models["draft"])},
        "deploy": {
            "kv_cache_free_gpu_mem_fraction": 0.8,
            "enable_kv_cache_reuse": False,
        },
        "variants": [
            {
                "name": "base",
                "mode": "baseline",
                "cuda_graphs": True,
                "cuda_graph_padding": True,
                "max_batch_size": 16,
                "max_num_tokens": 4096,
            },
            {
                "name": "dt",
                "mode": "draft_target",
                "max_draft_len": 3,
                "overlap_scheduler": False,
            },
            {
                "name": "e3",
                "mode": "eagle3",
                "speculative_model": str(models["eagle"]),
                "cuda_graphs": True,
                "cuda_graph_batch_sizes": [4, 1, 2],
                "speculation": {"max_concurrency": 8},
            },
            {"name": "mtp", "mode": "mtp", "dtype": "bfloat16", "tp_size": 2},
            {
                "name": "ng",
                "mode": "ngram",
                "max_draft_len": 5,
                "max_matching_ngram_size": 3,
                "speculation": {"draft_len_schedule": {8: 2, 1: 5}},
                "speculative_options": {"is_keep_all": False},
                "llm_api_options": {
                    "enable_chunked_prefill": True,
                    "kv_cache_config": {"max_tokens": 2048},
                },
            },
        ],
    }


def common(**over) -> dict:
    """The top-level keys every variant of :func:`full_spec` gets, in writing order."""
    out = {
        "backend": "pytorch",
        "max_batch_size": 8,
        "max_seq_len": 2048,
        "tensor_parallel_size": 1,
        "pipeline_parallel_size": 1,
        "dtype": "auto",
        "disable_overlap_scheduler": False,
        "cuda_graph_config": None,
        "kv_cache_config": {
            "free_gpu_memory_fraction": 0.8,
            "enable_block_reuse": False,
        },
    }
    return {**out, **over}


def expected_yaml(models: dict[str, Path]) -> dict[str, dict]:
    base = common(
        max_batch_size=16,
        cuda_graph_config={"max_batch_size": 16, "enable_padding": True},
    )
    items = list(base.items())  # max_num_tokens follows max_batch_size
    return {
        "base": dict([*items[:2], ("max_num_tokens", 4096), *items[2:]]),
        "dt": common(
            disable_overlap_scheduler=True,
            speculative_config={
                "decoding_type": "DraftTarget",
                "max_draft_len": 3,
                "speculative_model": str(models["draft"]),
            },
        ),
        "e3": common(
            cuda_graph_config={"batch_sizes": [1, 2, 4], "enable_padding": False},
            speculative_config={
                "decoding_type": "Eagle3",
                "max_draft_len": 4,
                "speculative_model": str(models["eagle"]),
                "max_concurrency": 8,
            },
        ),
        "mtp": common(
            tensor_parallel_size=2,
            dtype="bfloat16",
            speculative_config={"decoding_type": "MTP", "num_nextn_predict_layers": 2},
        ),
        "ng": common(
            kv_cache_config={
                "free_gpu_memory_fraction": 0.8,
                "enable_block_reuse": False,
                "max_tokens": 2048,
            },
            speculative_config={
                "decoding_type": "NGram",
                "max_draft_len": 5,
                "max_matching_ngram_size": 3,
                "draft_len_schedule": {1: 5, 8: 2},
                "is_keep_all": False,
            },
            enable_chunked_prefill=True,
        ),
    }


MODES = {
    "base": "baseline",
    "dt": "draft_target",
    "e3": "eagle3",
    "mtp": "mtp",
    "ng": "ngram",
}


def test_build_writes_llm_api_yaml_and_build_json(models, tmp_path, capsys):
    out = tmp_path / "run"
    code, stdout, err = run_cli(
        ["build", write_spec(tmp_path, full_spec(models)), "--out", out], capsys
    )
    assert code == 0, err
    built = [ln for ln in stdout.splitlines() if ln.startswith("built ")]
    assert built[0].startswith("built base: trtllm-pytorch baseline, no draft")
    assert built[0].endswith("cuda_graphs=on") and built[1].endswith("cuda_graphs=off")
    assert (
        "eagle3, K=4" in built[2] and "mtp, K=2 (num_nextn_predict_layers)" in built[3]
    )
    expected = expected_yaml(models)
    for name, want in expected.items():
        engine = out / "engines" / name
        assert sorted(p.name for p in engine.iterdir()) == [
            "build.json",
            "llm_api.yaml",
        ]
        got = yaml.safe_load((engine / "llm_api.yaml").read_text())
        assert got == want, name
        assert list(got) == list(want), name  # the writing order
        manifest = json.loads((engine / "build.json").read_text())
        assert manifest["backend"] == "trtllm-pytorch"
        assert manifest["mode"] == MODES[name]
        block = manifest["tensorrt_llm"]
        assert block["version"] == "1.4.0rc4" and block["version_source"] == "spec"
        assert (
            block["path"] == "llm-api" and block["contract"] == "llmapi_1_4_0rc4.json"
        )
        assert block["llm_args"]["model"] == str(models["mtp_target"])
        assert manifest["tokenizer_dir"] == str(models["mtp_target"])
    e3 = json.loads((out / "engines/e3/build.json").read_text())
    assert e3["max_draft_len"] == 4
    assert sorted(e3["models"]) == ["speculative_model", "target"]
    assert e3["models"]["speculative_model"]["path"] == str(models["eagle"].resolve())
    assert "config.json" in e3["models"]["target"]["sha256"]
    assert e3["cuda_graphs"]["requested"] is True
    dt = json.loads((out / "engines/dt/build.json").read_text())
    assert dt["models"]["draft"]["path"] == str(models["draft"].resolve())
    run = json.loads((out / "run.json").read_text())
    for name in expected:
        record = run["build"]["variants"][name]
        assert record["backend"] == "trtllm-pytorch"
        assert record["tensorrt_llm"]["version"] == "1.4.0rc4"
        assert record["tensorrt_llm"]["path"] == "llm-api"


def test_dry_run_prints_the_llm_call_and_command_lines_and_writes_nothing(
    models, tmp_path, capsys
):
    doc = full_spec(models, version="1.2.1")
    doc["variants"][4]["speculation"] = {"draft_len_schedule": {1: 5, 8: 2}}
    doc["models"]["medusa"] = str(models["medusa"])
    doc["variants"].append(
        {
            "name": "med",
            "mode": "medusa",
            "backend": "trtllm",
            "medusa_choices": [[0], [1], [0, 0]],
        }
    )
    out = tmp_path / "run"
    code, stdout, err = run_cli(
        ["build", write_spec(tmp_path, doc), "--out", out, "--dry-run"], capsys
    )
    assert code == 0, err
    assert not out.exists()
    heads = [ln for ln in stdout.splitlines() if ln.startswith("would build ")]
    assert [h.split(":")[0] for h in heads] == [
        f"would build {n}" for n in ("base", "dt", "e3", "mtp", "ng", "med")
    ]
    assert heads[5].startswith("would build med: trtllm medusa")
    yaml_e3 = out.resolve() / "engines/e3/llm_api.yaml"
    target = str(models["mtp_target"])
    assert (
        "from tensorrt_llm.llmapi import CudaGraphConfig, Eagle3DecodingConfig, KvCacheConfig"
        in stdout
    )
    assert (
        "    speculative_config=Eagle3DecodingConfig(max_draft_len=4, "
        f"speculative_model='{models['eagle']}', max_concurrency=8)," in stdout
    )
    assert (
        "    cuda_graph_config=CudaGraphConfig(batch_sizes=[1, 2, 4], enable_padding=False),"
        in stdout
    )
    assert (
        f"trtllm-serve {target} --backend pytorch --host 127.0.0.1 --port 8000 "
        f"--extra_llm_api_options {yaml_e3}" in stdout.splitlines()
    )
    assert (
        f"trtllm-bench --model mtp_target --model_path {target} throughput --backend "
        f"pytorch --dataset '<dataset.jsonl>' --extra_llm_api_options {yaml_e3}"
        in stdout.splitlines()
    )
    assert "# TensorRT-LLM 1.2.1, PyTorch backend (LLM API):" in stdout


def cli_error(tmp_path, capsys, doc, *extra) -> str:
    code, stdout, err = run_cli(
        ["build", write_spec(tmp_path, doc), "--out", tmp_path / "run", *extra], capsys
    )
    lines = err.strip().splitlines()
    assert code == 2, (stdout, err)
    assert len(lines) == 1, err
    assert not (tmp_path / "run" / "engines").exists()
    return lines[0]


def one_variant(models, variant: dict, **top) -> dict:
    doc = {
        "name": "bad",
        "backend": "trtllm-pytorch",
        "models": {"target": str(models["target"]), "draft": str(models["draft"])},
        "variants": [{"name": "base", "mode": "baseline"}, variant],
    }
    return {**doc, **top}


def test_medusa_on_the_llm_api_path_is_exit_2(models, tmp_path, capsys):
    line = cli_error(
        tmp_path, capsys, one_variant(models, {"name": "m", "mode": "medusa"})
    )
    assert line.endswith(
        "variants[1].mode: Medusa runs only on the TensorRT engine path: use backend: "
        "trtllm (TensorRT-LLM <= 1.3.0rc20; NGC "
        "nvcr.io/nvidia/tritonserver:26.07-trtllm-python-py3 carries 1.2.1)"
    )


def test_eagle3_without_or_with_a_missing_draft_checkpoint(models, tmp_path, capsys):
    line = cli_error(
        tmp_path, capsys, one_variant(models, {"name": "e", "mode": "eagle3"})
    )
    assert "variants[1]: mode eagle3 needs speculative_model" in line
    missing = {"name": "e", "mode": "eagle3", "speculative_model": str(tmp_path / "no")}
    line = cli_error(tmp_path, capsys, one_variant(models, missing))
    assert line == (
        f"trtbench: error: {tmp_path / 'spec.yaml'}: variants[1].speculative_model: "
        f"{tmp_path / 'no'} does not exist; set it "
        "to the EAGLE-3 draft checkpoint dir"
    )


def test_mtp_on_a_target_without_mtp_layers(models, tmp_path, capsys):
    line = cli_error(
        tmp_path, capsys, one_variant(models, {"name": "t", "mode": "mtp"})
    )
    assert (
        f"variants[1].mode: mtp: model {models['target']} has no MTP layers "
        "(config.json num_nextn_predict_layers)" in line
    )


def test_cuda_graph_batch_size_above_max_batch_size(models, tmp_path, capsys):
    variant = {
        "name": "b",
        "mode": "baseline",
        "cuda_graphs": True,
        "max_batch_size": 4,
        "cuda_graph_batch_sizes": [1, 8],
    }
    line = cli_error(tmp_path, capsys, one_variant(models, variant))
    assert "variants[1]: cuda_graph_batch_sizes: 8 is above max_batch_size 4" in line


def test_a_knob_the_chosen_version_lacks_names_the_version_that_has_it(
    models, tmp_path, capsys
):
    variant = {
        "name": "n",
        "mode": "ngram",
        "speculative_options": {"use_rejection_sampling": True},
    }
    line = cli_error(
        tmp_path, capsys, one_variant(models, variant, trtllm_version="1.2.1")
    )
    assert line.endswith(
        "variants[1] (LLM arguments): speculative_config.use_rejection_sampling is not in "
        "TensorRT-LLM 1.2.1 (it is in 1.4.0rc4); remove it or set trtllm_version"
    )


def test_1_2_1_schedule_needs_batch_size_one(models, tmp_path, capsys):
    """1.2-era validator (H1's contract): the schedule must map batch size 1 to max_draft_len."""
    variant = {
        "name": "n",
        "mode": "ngram",
        "speculation": {"draft_len_schedule": {8: 2}},
    }
    line = cli_error(
        tmp_path, capsys, one_variant(models, variant, trtllm_version="1.2.1")
    )
    assert "speculative_config.draft_len_schedule={8: 2} (max_draft_len 4)" in line
    doc = one_variant(models, variant, trtllm_version="1.4.0rc4")
    assert run_cli(["build", write_spec(tmp_path, doc), "--dry-run"], capsys)[0] == 0


def test_unknown_version_and_backend_override(models, tmp_path, capsys):
    doc = one_variant(
        models, {"name": "n", "mode": "ngram"}, trtllm_version="1.3.0rc29"
    )
    line = cli_error(tmp_path, capsys, doc)
    assert line == (
        f"trtbench: error: {tmp_path / 'spec.yaml'}: trtllm_version: TensorRT-LLM 1.3.0rc29 "
        "has no LLM-API contract in "
        "trtbench; set trtllm_version to one of 1.2.1, 1.4.0rc4"
    )
    doc = one_variant(models, {"name": "n", "mode": "mtp"})
    line = cli_error(tmp_path, capsys, doc, "--backend", "reference")
    assert line.endswith(
        "variants[1].mode: mtp runs only on TensorRT-LLM's LLM-API path; set backend: "
        "trtllm-pytorch on the variant or the spec (--backend reference)"
    )


def test_a_bad_later_variant_stops_the_build_before_anything_is_written(
    models, tmp_path, capsys
):
    bad = {
        "name": "e",
        "mode": "eagle3",
        "speculative_model": str(models["target"].parent),
    }
    line = cli_error(tmp_path, capsys, one_variant(models, bad))
    assert "variants[1].speculative_model:" in line and "has no config.json" in line


def test_version_resolution(models):
    spec = parse_spec(
        yaml.safe_dump(one_variant(models, {"name": "n", "mode": "ngram"}))
    )
    chosen, contract = resolve_trtllm_version(spec, (None, None))
    assert (chosen.version, chosen.source, contract.version) == (
        "1.4.0rc4",
        "newest contract",
        "1.4.0rc4",
    )
    chosen, contract = resolve_trtllm_version(spec, ("1.2.1", "/site/tensorrt_llm"))
    assert (chosen.source, contract.version, chosen.module_path) == (
        "installed",
        "1.2.1",
        "/site/tensorrt_llm",
    )
    with pytest.raises(
        ConfigError,
        match=r"the installed tensorrt_llm \(/s/t\): TensorRT-LLM 1.3.0rc29 has no",
    ):
        resolve_trtllm_version(spec, ("1.3.0rc29", "/s/t"))
    pinned = parse_spec(
        yaml.safe_dump(
            one_variant(models, {"name": "n", "mode": "ngram"}, trtllm_version="1.2.1")
        )
    )
    chosen, _ = resolve_trtllm_version(pinned, ("1.4.0rc4", "/s/t"))
    assert (chosen.version, chosen.source, chosen.installed) == (
        "1.2.1",
        "spec",
        "1.4.0rc4",
    )


def test_engine_path_refuses_a_tensorrt_llm_after_1_3_0rc20(monkeypatch):
    contract = load_contract()
    check_trtllm_version("1.3.0rc20", contract)  # the last release with the engine path
    with pytest.raises(NotAvailableError) as info:
        check_trtllm_version("1.3.0rc21", contract)
    assert str(info.value) == (
        "TensorRT-LLM 1.3.0rc21 has no TensorRT engine path (removed after 1.3.0rc20, the "
        "last release with it); build inside "
        "nvcr.io/nvidia/tritonserver:26.07-trtllm-python-py3 (TensorRT-LLM 1.2.1) or use "
        "backend: trtllm-pytorch"
    )
    assert info.value.exit_code == 2
    fake = types.ModuleType("tensorrt_llm")
    fake.__version__ = "1.3.0rc21"
    monkeypatch.setitem(sys.modules, "tensorrt_llm", fake)
    with pytest.raises(NotAvailableError, match="removed after 1.3.0rc20"):
        require_trtllm(contract)
    fake.__version__ = "1.2.1"
    assert require_trtllm(contract) == "1.2.1"
