"""``loadtest.design`` and ``deploy.co_resident`` resolved into a run's design
(``trtbench/spec/design.py``): the rules of its module docstring, one spec each.

Model paths are only checked when something is built, so ``/m/t`` and ``/m/d`` do."""

from __future__ import annotations

import pytest

from trtbench.core.errors import ConfigError
from trtbench.spec.bench import parse_spec
from trtbench.spec.design import ResolvedDesign, resolve_design

MODELS = "models: {target: /m/t, draft: /m/d}\n"
TWO = "[{name: base, mode: baseline}, {name: draft, mode: draft_target%s}]"


def resolved(text: str) -> ResolvedDesign:
    spec = parse_spec(MODELS + text, "s.yaml")
    return resolve_design(spec, spec.variants)


def test_auto_is_interleaved_for_reference_variants_on_triton():
    d = resolved(f"variants: {TWO % ''}\nloadtest: {{repeats: 4}}\n")
    assert d == ResolvedDesign("interleaved", 4, True, "auto")
    assert d.as_json() == {
        "name": "interleaved",
        "rounds": 4,
        "co_resident": True,
        "asked": "auto",
    }


def test_rounds_is_also_spelt_rounds():
    assert resolved(f"variants: {TWO % ''}\nloadtest: {{rounds: 5}}\n").rounds == 5


NO_RACE_ROUNDS = "the rounds design restarts servers between rounds"


@pytest.mark.parametrize(
    "text",
    [
        f"variants: {TWO % ', server: vllm'}\n",  # one variant on vLLM
        f"variants: {TWO % ', backend: trtllm'}\n",  # one on a TensorRT-LLM engine
        f"backend: trtllm\nvariants: {TWO % ''}\n",  # all of them
        f"backend: trtllm-pytorch\nvariants: {TWO % ''}\n",  # LLM API on TensorRT-LLM
    ],
)
def test_auto_is_rounds_when_a_variant_takes_a_gpu(text):
    # no rounds given: the default race cannot run in the rounds design; one round
    assert resolved(text) == ResolvedDesign(
        "rounds", 1, False, "auto", no_race=NO_RACE_ROUNDS
    )


def test_llmapi_on_the_reference_runtime_is_co_resident():
    text = (
        f"backend: trtllm-pytorch\nvariants: {TWO % ''}\n"
        "deploy: {llmapi_runtime: reference}\n"
    )
    assert resolved(text).name == "interleaved"


def test_co_resident_true_makes_gpu_variants_interleaved():
    text = (
        f"variants: {TWO % ', server: vllm'}\ndeploy: {{co_resident: true}}\n"
        "loadtest: {repeats: 3}\n"
    )
    assert resolved(text) == ResolvedDesign("interleaved", 3, True, "auto")


def test_co_resident_false_makes_reference_variants_rounds():
    text = f"variants: {TWO % ''}\ndeploy: {{co_resident: false}}\n"
    assert resolved(text) == ResolvedDesign(
        "rounds", 1, False, "auto", no_race=NO_RACE_ROUNDS
    )


@pytest.mark.parametrize("asked", ["rounds", "sequential"])
def test_an_explicit_design_is_kept(asked):
    text = f"variants: {TWO % ''}\nloadtest: {{design: {asked}, repeats: 2}}\n"
    assert resolved(text) == ResolvedDesign(asked, 2, True, asked)


def test_interleaved_without_co_residence_names_the_field():
    for text in (
        f"variants: {TWO % ''}\ndeploy: {{co_resident: false}}\n"
        "loadtest: {design: interleaved}\n",
        f"variants: {TWO % ', server: vllm'}\nloadtest: {{design: interleaved}}\n",
    ):
        with pytest.raises(ConfigError, match="deploy.co_resident"):
            resolved(text)


def test_interleaved_with_several_workers_is_refused():
    text = (
        f"variants: {TWO % ''}\n"
        "loadtest: {design: interleaved, workers: 2, concurrency: [2, 4]}\n"
    )
    with pytest.raises(ConfigError, match="loadtest.workers 2") as info:
        resolved(text)
    assert "loadtest.design: rounds" in str(info.value)
    # auto reaches interleaved here as well, and is refused the same way
    auto = f"variants: {TWO % ''}\nloadtest: {{workers: 2, concurrency: [2, 4]}}\n"
    with pytest.raises(ConfigError, match="loadtest.workers 2"):
        resolved(auto)
    # the rounds design takes several workers
    rounds = (
        f"variants: {TWO % ''}\n"
        "loadtest: {design: rounds, workers: 2, concurrency: [2, 4]}\n"
    )
    assert resolved(rounds).name == "rounds"


def test_an_unknown_design_is_a_config_error():
    with pytest.raises(ConfigError, match="design"):
        resolved(f"variants: {TWO % ''}\nloadtest: {{design: alternating}}\n")


def test_only_the_variants_of_the_run_count():
    """A follow-up resolves the design of a subset: the reference variants alone are
    co-resident even when the spec also holds a vLLM one."""
    text = (
        "variants: [{name: base, mode: baseline}, {name: draft, mode: draft_target},"
        " {name: v, mode: draft_target, server: vllm}]\n"
    )
    spec = parse_spec(MODELS + text, "s.yaml")
    assert resolve_design(spec, spec.variants).name == "rounds"
    assert resolve_design(spec, spec.variants[:2]).name == "interleaved"
