"""Suffix decoding as a method (``trtbench/core/methods/suffix.py``): what it answers, its
spec fields, its vLLM config, the TensorRT-LLM backends refusing it (exit 2) and a dry run
of a spec with a suffix variant, through the real CLI on the small real models.

Expected values are vLLM's own (``vllm/config/speculative.py``: ``method`` ``"suffix"``,
``suffix_decoding_max_tree_depth`` 24, ``…_max_cached_requests`` 10000,
``…_max_spec_factor`` 1.0, ``…_min_token_prob`` 0.1), written out here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import run_cli
from tests.support.run_specs import reference_run_spec, write_spec
from trtbench.core.methods import METHODS
from trtbench.spec.bench import ModelsSpec, VariantSpec
from trtbench.vllm_server.args import serve_argv

SUFFIX = METHODS["suffix"]


def test_what_suffix_decoding_answers():
    assert (SUFFIX.vllm_method, SUFFIX.llmapi_decoding_type, SUFFIX.engine_mode) == (
        "suffix",
        None,
        None,
    )
    assert SUFFIX.backends == ("reference",)  # TensorRT-LLM has no such config
    assert SUFFIX.free_drafts and SUFFIX.has_draft_len and not SUFFIX.needs_draft_model
    assert SUFFIX.planner == "chain" and SUFFIX.default_rates == (0.5, 0.4, 0.3)
    assert tuple(METHODS)[-1] == "suffix"  # after the six in the spec's mode list


def test_the_variant_fields_default_as_vllm_and_belong_to_suffix_only():
    v = VariantSpec(name="s", mode="suffix")
    assert (
        v.suffix_decoding_max_tree_depth,
        v.suffix_decoding_max_cached_requests,
        v.suffix_decoding_max_spec_factor,
        v.suffix_decoding_min_token_prob,
    ) == (24, 10000, 1.0, 0.1)
    with pytest.raises(ValueError, match="suffix_decoding_max_tree_depth is only for"):
        VariantSpec(name="n", mode="ngram", suffix_decoding_max_tree_depth=8)
    with pytest.raises(ValueError, match="suffix_decoding_min_token_prob"):
        VariantSpec(name="s", mode="suffix", suffix_decoding_min_token_prob=1.5)
    with pytest.raises(ValueError, match="prompt_lookup_max is only for"):
        VariantSpec(name="s", mode="suffix", prompt_lookup_max=3)


def test_vllm_gets_method_suffix_with_k_and_the_four_fields(tmp_path):
    v = VariantSpec(
        name="s",
        mode="suffix",
        max_draft_len=6,
        suffix_decoding_max_tree_depth=16,
        suffix_decoding_max_spec_factor=2.0,
    )
    argv = serve_argv(Path("/py"), v, ModelsSpec(target=tmp_path), 8000)
    config = json.loads(argv[argv.index("--speculative-config") + 1])
    assert config == {
        "method": "suffix",
        "num_speculative_tokens": 6,
        "suffix_decoding_max_tree_depth": 16,
        "suffix_decoding_max_cached_requests": 10000,
        "suffix_decoding_max_spec_factor": 2.0,
        "suffix_decoding_min_token_prob": 0.1,
    }


def spec_file(directory: Path, models, variant: dict) -> Path:
    spec = reference_run_spec(
        "suffix",
        models,
        [{"name": "baseline", "mode": "baseline"}, variant],
        max_batch_size=4,
        deploy={},
        profile={},
        requests=5,
        output_tokens=8,
    )
    return write_spec(directory, spec)


def test_a_dry_run_lists_the_suffix_variant(capsys, tmp_path, tiny_models):
    variant = {"name": "suffix-k5", "mode": "suffix", "max_draft_len": 5}
    spec = spec_file(tmp_path, tiny_models, variant)
    code, out, err = run_cli(["run", spec, "--dry-run"], capsys)
    assert code == 0, err
    rows = [x.split() for x in out.splitlines() if x.startswith("  suffix-k5")]
    assert rows == [
        ["suffix-k5", "suffix,", "K=5", "backend", "reference,", "server", "triton"]
    ]


@pytest.mark.parametrize("backend", ["trtllm", "trtllm-pytorch"])
def test_a_tensorrt_llm_backend_refuses_suffix_with_exit_2(
    capsys, tmp_path, tiny_models, backend
):
    variant = {"name": "suffix-k5", "mode": "suffix", "backend": backend}
    spec = spec_file(tmp_path, tiny_models, variant)
    code, out, err = run_cli(["run", spec, "--dry-run"], capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert (
        f"variants[1].mode: suffix decoding (suffix) is not supported by backend "
        f"{backend}; set backend: reference on the variant or the spec"
    ) in lines[0]
