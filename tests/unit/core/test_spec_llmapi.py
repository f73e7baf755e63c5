"""The LLM-API (trtllm-pytorch) fields of the bench spec: per-variant backends, path
resolution, and one-line errors naming the field and the fix for every misplaced field."""

from __future__ import annotations

from pathlib import Path

import pytest

from trtbench.core.errors import ConfigError
from trtbench.spec.bench import parse_spec

SPEC = """
backend: reference
models: {target: /m/target, draft: /m/draft, medusa: /m/heads}
deploy: {llmapi_runtime: reference, llmapi_model_dir: triton/llmapi/tensorrt_llm}
variants:
  - {name: ref, mode: draft_target}
  - {name: eng, mode: medusa, backend: trtllm}
  - {name: e3, mode: eagle3, backend: trtllm-pytorch, speculative_model: heads/eagle3}
  - {name: ng, mode: ngram, backend: trtllm-pytorch, max_matching_ngram_size: 3}
"""

MEDUSA_MESSAGE = (
    "variants[0].mode: Medusa runs only on the TensorRT engine path: use backend: trtllm "
    "(TensorRT-LLM <= 1.3.0rc20; NGC nvcr.io/nvidia/tritonserver:26.07-trtllm-python-py3 "
    "carries 1.2.1)"
)


def test_variant_backend_overrides_the_spec_and_paths_resolve(tmp_path):
    spec = parse_spec(SPEC, base_dir=tmp_path)
    backends = [spec.backend_of(v) for v in spec.variants]
    assert backends == ["reference", "trtllm", "trtllm-pytorch", "trtllm-pytorch"]
    assert spec.variant("e3").speculative_model == tmp_path / "heads" / "eagle3"
    assert spec.deploy.llmapi_model_dir == tmp_path / "triton/llmapi/tensorrt_llm"
    assert spec.deploy.llmapi_runtime == "reference"
    assert spec.trtllm_version is None
    ng = spec.variant("ng")
    assert ng.overlap_scheduler is True and ng.cuda_graph_padding is False
    assert ng.speculative_options == {} and ng.llm_api_options == {}


def test_draft_target_with_its_own_draft_needs_no_models_draft(tmp_path):
    text = """
backend: trtllm-pytorch
trtllm_version: 1.4.0rc4
models: {target: /m/target}
variants:
  - {name: dt, mode: draft_target, speculative_model: /m/small, max_draft_len: 3,
     speculation: {max_concurrency: 8, draft_len_schedule: {8: 1, 1: 3}}}
"""
    spec = parse_spec(text)
    v = spec.variant("dt")
    assert spec.trtllm_version == "1.4.0rc4"
    assert v.speculative_model == Path("/m/small")
    assert v.speculation.draft_len_schedule == {8: 1, 1: 3}
    assert v.speculation.max_concurrency == 8


PYTORCH = (
    "backend: trtllm-pytorch\nmodels: {target: /t, draft: /d, medusa: /h}\nvariants:\n"
)


@pytest.mark.parametrize(
    ("variant", "message"),
    [
        ("{name: m, mode: medusa}", MEDUSA_MESSAGE),
        (
            "{name: e, mode: eagle3}",
            "variants[0]: mode eagle3 needs speculative_model: set it to the EAGLE-3 "
            "draft checkpoint dir",
        ),
        (
            "{name: n, mode: ngram, backend: trtllm}",
            "variants[0].mode: ngram runs only on TensorRT-LLM's LLM-API path",
        ),
        (
            "{name: b, mode: baseline, overlap_scheduler: false, backend: trtllm}",
            "variants[0].overlap_scheduler applies only to backend: trtllm-pytorch, not "
            "trtllm; remove it or set backend: trtllm-pytorch",
        ),
        (
            "{name: m, mode: mtp, backend: reference}",
            "variants[0].mode: mtp runs only on TensorRT-LLM's LLM-API path; set "
            "backend: trtllm-pytorch on the variant or the spec",
        ),
        (
            "{name: b, mode: baseline, cuda_graphs: true, cuda_graph_batch_sizes: [1, 9]}",
            "variants[0]: cuda_graph_batch_sizes: 9 is above max_batch_size 8; drop it "
            "or raise max_batch_size",
        ),
        (
            "{name: b, mode: baseline, cuda_graph_padding: true}",
            "variants[0]: cuda_graph_padding needs cuda_graphs: true",
        ),
        (
            "{name: b, mode: baseline, num_nextn_predict_layers: 1}",
            "variants[0]: num_nextn_predict_layers is only for mode mtp, not baseline",
        ),
        (
            "{name: t, mode: mtp, max_draft_len: 2}",
            "variants[0]: max_draft_len is not for mode mtp",
        ),
        (
            "{name: e, mode: eagle3, speculative_model: /e, max_matching_ngram_size: 2}",
            "variants[0]: max_matching_ngram_size is only for mode ngram, not eagle3",
        ),
        (
            "{name: b, mode: baseline, speculative_model: /e}",
            "variants[0]: speculative_model is only for mode draft_target and eagle3",
        ),
        (
            "{name: b, mode: baseline, speculation: {max_concurrency: 4}}",
            "variants[0]: speculation is only for speculative modes, not baseline",
        ),
        (
            "{name: n, mode: ngram, max_draft_len: 3, "
            "speculation: {draft_len_schedule: {1: 3, 8: 4}}}",
            "variants[0]: speculation.draft_len_schedule: 8: 4 is above the draft "
            "length 3; lower it or raise max_draft_len",
        ),
        (
            "{name: n, mode: ngram, speculation: {draft_len_schedule: {0: 1}}}",
            "variants[0].speculation.draft_len_schedule[0].[key]: Input should be "
            "greater than or equal to 1",
        ),
        (
            "{name: n, mode: ngram, speculation: {max_concurrency: 0}}",
            "variants[0].speculation.max_concurrency: Input should be greater than "
            "or equal to 1",
        ),
        (
            "{name: n, mode: ngram, speculative_options: {max_draft_len: 9}}",
            "variants[0]: speculative_options.max_draft_len is set by the variant's "
            "max_draft_len; set that field instead",
        ),
        (
            "{name: n, mode: ngram, llm_api_options: {speculative_config: {}}}",
            "variants[0]: llm_api_options.speculative_config is set by trtbench",
        ),
        (
            "{name: d, mode: draft_target, draft_acceptance: logits}",
            "variants[0].draft_acceptance: logits is an engine-path option; remove it "
            "for backend trtllm-pytorch",
        ),
        (
            "{name: b, mode: baseline, max_beam_width: 2}",
            "variants[0].max_beam_width: 2 is not mapped on backend trtllm-pytorch",
        ),
        (
            "{name: d, mode: draft_target, speculatve_model: /x}",
            "variants[0].speculatve_model: unknown key; did you mean 'speculative_model'?",
        ),
    ],
)
def test_misplaced_llmapi_fields_are_named_in_one_line(variant, message):
    with pytest.raises(ConfigError) as info:
        parse_spec(PYTORCH + f"  - {variant}\n", source="s.yaml")
    text = str(info.value)
    assert text.startswith("s.yaml: ")
    assert message in text
    assert "\n" not in text


def test_trtllm_version_must_look_like_a_release():
    with pytest.raises(ConfigError) as info:
        parse_spec(
            PYTORCH.replace("models:", "trtllm_version: latest\nmodels:")
            + "  - {name: b, mode: baseline}\n",
            source="s.yaml",
        )
    assert str(info.value).startswith("s.yaml: trtllm_version: String should match")


def test_medusa_on_the_engine_path_is_still_fine():
    spec = parse_spec(PYTORCH + "  - {name: m, mode: medusa, backend: trtllm}\n")
    assert spec.backend_of(spec.variants[0]) == "trtllm"
