"""Hand-written LLM-API option files: a variant's ``extra_llm_api_options`` YAML, and an
``engines/<variant>/llm_api.yaml`` edited after the build (re-checked by ``deploy``).

Expected documents are written out by hand: each top-level key of the file replaces the
variant's own (TensorRT-LLM builds each config object from the file's mapping).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.support.cli import run_cli
from tests.support.hf_dirs import make_models


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    return make_models(tmp_path_factory.mktemp("models"))


def spec_with(
    models, tmp_path: Path, options: dict, mode: str = "draft_target"
) -> Path:
    extra = tmp_path / "extra.yaml"
    extra.write_text(yaml.safe_dump(options, sort_keys=False))
    doc = {
        "name": "opts",
        "backend": "trtllm-pytorch",
        "trtllm_version": "1.4.0rc4",
        "models": {"target": str(models["target"]), "draft": str(models["draft"])},
        "variants": [
            {"name": "v", "mode": mode, "extra_llm_api_options": "extra.yaml"}
        ],
    }
    if mode != "baseline":
        doc["variants"][0]["max_draft_len"] = 3
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def build_error(spec: Path, tmp_path: Path, capsys) -> str:
    code, out, err = run_cli(["build", spec, "--out", tmp_path / "run"], capsys)
    lines = err.strip().splitlines()
    assert code == 2, (out, err)
    assert len(lines) == 1, err
    assert not (tmp_path / "run" / "engines").exists()
    return lines[0]


def test_file_keys_replace_the_variants_own(models, tmp_path, capsys):
    draft = str(models["draft"])
    options = {
        "kv_cache_config": {"free_gpu_memory_fraction": 0.5},
        "speculative_config": {
            "decoding_type": "DraftTarget",
            "max_draft_len": 2,
            "speculative_model": draft,
        },
        "enable_chunked_prefill": True,
    }
    spec = spec_with(models, tmp_path, options)
    code, out, err = run_cli(["build", spec, "--out", tmp_path / "run"], capsys)
    assert code == 0, err
    plan = yaml.safe_load((tmp_path / "run/engines/v/llm_api.yaml").read_text())
    # the file's kv_cache_config replaces the deploy defaults (0.9, reuse on) as a whole
    assert plan["kv_cache_config"] == {"free_gpu_memory_fraction": 0.5}
    assert plan["speculative_config"] == {
        "decoding_type": "DraftTarget",
        "max_draft_len": 2,
        "speculative_model": draft,
    }
    assert plan["enable_chunked_prefill"] is True
    assert plan["backend"] == "pytorch" and plan["cuda_graph_config"] is None


def test_an_unknown_decoding_type_in_the_file_is_exit_2(models, tmp_path, capsys):
    spec = spec_with(
        models, tmp_path, {"speculative_config": {"decoding_type": "Eagle4"}}
    )
    line = build_error(spec, tmp_path, capsys)
    assert str(tmp_path / "extra.yaml") in line
    assert "unknown decoding_type 'Eagle4'" in line
    assert "Eagle3" in line and "NGram" in line  # the known ones are listed


def test_the_file_may_not_switch_the_method(models, tmp_path, capsys):
    options = {"speculative_config": {"decoding_type": "NGram", "max_draft_len": 3}}
    line = build_error(spec_with(models, tmp_path, options), tmp_path, capsys)
    assert "speculative_config.decoding_type 'NGram'" in line
    assert "mode draft_target means 'DraftTarget'" in line


def test_a_missing_file_is_one_line(models, tmp_path, capsys):
    spec = spec_with(models, tmp_path, {})
    (tmp_path / "extra.yaml").unlink()
    line = build_error(spec, tmp_path, capsys)
    assert "extra.yaml" in line and "Traceback" not in line


def test_deploy_rechecks_an_edited_llm_api_yaml(models, tmp_path, capsys):
    spec = spec_with(models, tmp_path, {}, mode="baseline")
    run = tmp_path / "run"
    code, _, err = run_cli(["build", spec, "--out", run], capsys)
    assert code == 0, err
    plan_path = run / "engines" / "v" / "llm_api.yaml"
    plan = yaml.safe_load(plan_path.read_text())
    plan["speculative_config"] = {"decoding_type": "Lookahead", "max_draft_len": 2}
    plan_path.write_text(yaml.safe_dump(plan))
    code, _, err = run_cli(["deploy", run, "--check"], capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert (
        str(plan_path) in lines[0] and "unknown decoding_type 'Lookahead'" in lines[0]
    )
