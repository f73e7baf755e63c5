"""The n-gram window and adaptive-speculation fields: where they are valid, how they map
(vLLM's ``--speculative-config``, the reference runtime of Triton's llmapi model), and the
one-line exit-2 errors for bad input."""

from __future__ import annotations

import pytest

from tests.support.cli import run_cli
from trtbench.builders.reference.llm_args import plan_from_llm_args
from trtbench.builders.reference.ngram import NgramSettings
from trtbench.core.errors import ConfigError
from trtbench.spec.bench import parse_spec
from trtbench.vllm_server.args import speculative_config

HEAD = "backend: reference\nmodels: {target: /t, draft: /d, medusa: /h}\nvariants:\n"


def variant(text: str, head: str = HEAD):
    return parse_spec(head + f"  - {text}\n", source="s.yaml").variants[0]


def refused(text: str, head: str = HEAD) -> str:
    with pytest.raises(ConfigError) as info:
        parse_spec(head + f"  - {text}\n", source="s.yaml")
    message = str(info.value)
    assert message.startswith("s.yaml: ") and "\n" not in message
    return message


def test_reference_variants_take_ngram_and_speculation():
    ng = variant(
        "{name: n, mode: ngram, max_draft_len: 3, prompt_lookup_min: 2, "
        "prompt_lookup_max: 4, speculation: {max_concurrency: 8, "
        "draft_len_schedule: {1: 3, 4: 2, 16: 1}}}"
    )
    assert (ng.prompt_lookup_min, ng.prompt_lookup_max, ng.draft_len) == (2, 4, 3)
    assert ng.speculation.max_concurrency == 8
    tg = variant("{name: n, mode: ngram, max_matching_ngram_size: 5}")  # TRT-LLM's name
    assert tg.max_matching_ngram_size == 5
    dt = variant(
        "{name: d, mode: draft_target, speculation: {draft_len_schedule: {2: 4}}}"
    )
    assert dt.speculation.draft_len_schedule == {2: 4}
    med = variant("{name: m, mode: medusa, speculation: {max_concurrency: 2}}")
    assert med.speculation.max_concurrency == 2


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "{name: n, mode: ngram, prompt_lookup_min: 3, prompt_lookup_max: 2}",
            "prompt_lookup_min 3 is above prompt_lookup_max 2; lower prompt_lookup_min "
            "or raise prompt_lookup_max",
        ),
        (
            "{name: n, mode: ngram, prompt_lookup_min: 4}",  # max defaults to 4 then
            None,
        ),
        (
            "{name: n, mode: ngram, prompt_lookup_min: 3, max_matching_ngram_size: 2}",
            "prompt_lookup_min 3 is above prompt_lookup_max 2",
        ),
        (
            "{name: n, mode: ngram, prompt_lookup_max: 3, max_matching_ngram_size: 2}",
            "prompt_lookup_max 3 and max_matching_ngram_size 2 name the same size",
        ),
        (
            "{name: d, mode: draft_target, prompt_lookup_max: 3}",
            "prompt_lookup_max is only for mode ngram, not draft_target; remove it",
        ),
        (
            "{name: n, mode: ngram, max_draft_len: 4, "
            "speculation: {draft_len_schedule: {1: 2, 8: 4}}}",
            "speculation.draft_len_schedule: 8: 4 drafts more than 1: 2; draft lengths "
            "must not grow with the batch size",
        ),
        (
            "{name: n, mode: ngram, max_draft_len: 2, "
            "speculation: {draft_len_schedule: {1: 3}}}",
            "speculation.draft_len_schedule: 1: 3 is above the draft length 2",
        ),
        (
            "{name: m, mode: medusa, speculation: {draft_len_schedule: {1: 2}}}",
            "speculation.draft_len_schedule is not for mode medusa",
        ),
        (
            "{name: n, mode: ngram, backend: trtllm}",
            "variants[0].mode: ngram runs only on TensorRT-LLM's LLM-API path or the "
            "reference backend",
        ),
        (
            "{name: n, mode: ngram, backend: trtllm-pytorch, prompt_lookup_min: 2}",
            "prompt_lookup_min / prompt_lookup_max are vLLM's names; TensorRT-LLM's "
            "NGram matches from max_matching_ngram_size down to 1",
        ),
        (
            "{name: d, mode: draft_target, backend: trtllm, speculation: {max_concurrency: 2}}",
            "variants[0].speculation applies only to backend: trtllm-pytorch, not trtllm",
        ),
        (
            "{name: n, mode: ngram, speculative_options: {is_keep_all: false}}",
            "variants[0].speculative_options applies only to backend: trtllm-pytorch",
        ),
    ],
)
def test_bad_fields_are_one_line_errors(text, message):
    if message is None:
        assert variant(text).prompt_lookup_min == 4
        return
    assert message in refused(text)


@pytest.mark.parametrize(
    "body",
    [
        "{name: n, mode: ngram, prompt_lookup_min: 3, prompt_lookup_max: 2}",
        "{name: n, mode: ngram, speculation: {draft_len_schedule: {1: 1, 4: 3}}}",
    ],
)
def test_cli_exits_2_with_one_line(tmp_path, capsys, body):
    path = tmp_path / "spec.yaml"
    path.write_text(HEAD + f"  - {body}\n")
    code, _, err = run_cli(["build", path, "--dry-run"], capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert lines[0].startswith("trtbench: error: ")


def test_vllm_gets_the_window_and_refuses_speculation():
    models = parse_spec(HEAD + "  - {name: b, mode: baseline}\n").models
    ng = variant(
        "{name: n, mode: ngram, server: vllm, max_draft_len: 3, prompt_lookup_min: 2, "
        "prompt_lookup_max: 4}"
    )
    assert speculative_config(ng, models) == {
        "method": "ngram",
        "num_speculative_tokens": 3,
        "prompt_lookup_max": 4,
        "prompt_lookup_min": 2,
    }
    plain = variant("{name: n, mode: ngram, server: vllm}")
    assert speculative_config(plain, models)["prompt_lookup_min"] == 1
    assert speculative_config(plain, models)["prompt_lookup_max"] == 2
    adaptive = variant(
        "{name: n, mode: ngram, server: vllm, speculation: {max_concurrency: 2}}"
    )
    with pytest.raises(ConfigError, match="no vLLM 0.32 counterpart"):
        speculative_config(adaptive, models)


def test_llm_args_map_ngram_and_adaptive_speculation():
    plan = plan_from_llm_args(
        {
            "model": "/t",
            "speculative_config": {
                "decoding_type": "NGram",
                "max_draft_len": 5,
                "max_matching_ngram_size": 3,
                "is_use_oldest": False,
                "draft_len_schedule": {"1": 5, "8": 2},
            },
        }
    )
    assert (plan.mode, plan.draft, plan.draft_len) == ("ngram", None, 5)
    assert plan.ngram == NgramSettings(1, 3, use_oldest=False)
    assert plan.draft_len_schedule == {1: 5, 8: 2}
    dt = plan_from_llm_args(
        {
            "model": "/t",
            "speculative_config": {
                "decoding_type": "DraftTarget",
                "speculative_model": "/d",
                "max_concurrency": 4,
            },
        }
    )
    assert (dt.mode, dt.max_concurrency, dt.ngram) == ("draft_target", 4, None)
    with pytest.raises(ConfigError, match="speculative_config.draft_len_schedule"):
        plan_from_llm_args(
            {
                "model": "/t",
                "speculative_config": {
                    "decoding_type": "NGram",
                    "max_draft_len": 2,
                    "draft_len_schedule": {1: 3},
                },
            }
        )
