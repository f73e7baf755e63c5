"""Preflight of trtllm-pytorch variants: modes the reference runtime cannot serve, the
LLM-API plans checked before the first build, and mpirun per variant backend."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from tests.support.hf_dirs import write_llama
from trtbench.core.errors import ConfigError
from trtbench.pipeline.preflight import check_llmapi_variants, check_mpirun
from trtbench.spec.bench import parse_spec


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    target = write_llama(root / "target")
    config = json.loads((target / "config.json").read_text())
    config["num_nextn_predict_layers"] = 1
    (target / "config.json").write_text(json.dumps(config))
    shutil.copytree(target, root / "eagle3")
    return {
        "target": target,
        "draft": write_llama(root / "draft", hidden=16),
        "eagle3": root / "eagle3",
    }


def spec_with(dirs, runtime: str, *variants: dict, mpirun: str = "mpirun"):
    doc = {
        "backend": "trtllm-pytorch",
        "models": {"target": str(dirs["target"]), "draft": str(dirs["draft"])},
        "deploy": {"llmapi_runtime": runtime, "mpirun": mpirun},
        "variants": list(variants),
    }
    return parse_spec(yaml.safe_dump(doc))


EAGLE = {"name": "e3", "mode": "eagle3"}


@pytest.mark.parametrize(
    ("variant", "decoding_type"),
    [({"name": "m", "mode": "mtp"}, "MTP")],
)
def test_reference_runtime_lacks_these_modes(dirs, variant, decoding_type):
    if variant["mode"] == "eagle3":
        variant = {**variant, "speculative_model": str(dirs["eagle3"])}
    base = {"name": "b", "mode": "baseline"}
    spec = spec_with(dirs, "reference", base, variant)
    with pytest.raises(ConfigError) as info:
        check_llmapi_variants(spec, spec.variants)
    assert str(info.value) == (
        f"variants[1].mode: the reference engine cannot serve decoding_type "
        f"{decoding_type} (it has baseline, draft-target, ngram and eagle3); use "
        "deploy.llmapi_runtime: tensorrt_llm on a GPU, or mode baseline / draft_target / "
        "ngram / eagle3"
    )
    check_llmapi_variants(spec, spec.variants[:1])  # the baseline alone is fine
    spec = spec_with(dirs, "tensorrt_llm", base, variant)
    check_llmapi_variants(spec, spec.variants)  # TensorRT-LLM's own model.py serves it


def test_plans_are_checked_before_the_first_build(dirs):
    bad = {
        "name": "d",
        "mode": "draft_target",
        "speculative_model": str(dirs["target"].parent),
    }
    spec = spec_with(dirs, "reference", {"name": "b", "mode": "baseline"}, bad)
    with pytest.raises(
        ConfigError, match=r"variants\[1\].speculative_model: .* has no config.json"
    ):
        check_llmapi_variants(spec, spec.variants)


def test_mpirun_is_needed_for_wide_llmapi_variants(dirs):
    wide = {"name": "w", "mode": "baseline", "tp_size": 2}
    spec = spec_with(dirs, "tensorrt_llm", wide, mpirun="no-such-mpirun-xyz")
    with pytest.raises(ConfigError, match="variant w needs it"):
        check_mpirun(spec, spec.variants)
    ref = {**wide, "backend": "reference"}
    spec = spec_with(dirs, "tensorrt_llm", ref, mpirun="no-such-mpirun-xyz")
    check_mpirun(spec, spec.variants)  # the reference backend never launches mpirun
