"""The TensorRT-LLM 1.2.1 contract table and the checks every plan goes through (CPU only)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tests.support.hf_dirs import TREE6, plan_all
from trtbench.builders.trtllm.backend import check_plan
from trtbench.builders.trtllm.calls import Call, EnumRef
from trtbench.builders.trtllm.contract import (
    check_build_argv,
    check_call,
    check_fp8_capability,
    check_trtllm_version,
    load_contract,
)
from trtbench.builders.trtllm.inspection import SPEC_MODE_BITS
from trtbench.builders.trtllm.render import build_argv
from trtbench.core.errors import ConfigError, NotAvailableError


@pytest.fixture(scope="module")
def contract():
    return load_contract()


@pytest.fixture(scope="module")
def plans(tmp_path_factory):
    return plan_all(
        tmp_path_factory,
        "  - {name: base, mode: baseline}\n"
        "  - {name: dt, mode: draft_target, max_draft_len: 4}\n"
        f"  - {{name: med, mode: medusa, medusa_choices: {TREE6}}}\n",
    )


def replace_build(plan, role="target", plugins=None, llm=None, spec=None, **build):
    """``plan`` with one engine's BuildConfig / PluginConfig / LLM arguments changed."""
    steps = []
    for step in plan.engines:
        if step.role == role:
            bc = step.llm.kwargs["build_config"]
            pc = bc.kwargs["plugin_config"]
            pc = Call("PluginConfig", {**pc.kwargs, **(plugins or {})})
            bc = Call("BuildConfig", {**bc.kwargs, **build, "plugin_config": pc})
            kwargs = {**step.llm.kwargs, "build_config": bc, **(llm or {})}
            if spec is not None:
                kwargs["speculative_config"] = spec
            step = dataclasses.replace(step, llm=Call("LLM", kwargs))
        steps.append(step)
    return dataclasses.replace(plan, engines=tuple(steps))


def test_every_entry_names_a_known_source(contract):
    sources = contract.raw["sources"]
    entries = [*contract.raw["classes"].values(), *contract.raw["constraints"]]
    entries += list(contract.raw["enums"].values())
    assert all(e["source"] in sources for e in entries)
    # a cited repository file carries a commit or the index id it was read from
    for key, src in sources.items():
        if src.get("repo"):
            assert src.get("commit") or src.get("index_id"), key


def test_speculative_mode_values_are_intflag_auto_bits(contract):
    members = contract.enum_members("SpeculativeDecodingMode")
    # auto() in an IntFlag numbers members 1, 2, 4, ... in definition order
    assert list(members.values()) == [2**i for i in range(len(members))]
    assert members["MEDUSA"] == 4 and members["DRAFT_TOKENS_EXTERNAL"] == 2
    assert {v: k for k, v in members.items()} == SPEC_MODE_BITS  # inspect agrees


def test_every_field_type_is_understood(contract):
    # a value of None passes any optional type; a required type must refuse a dict
    for name, entry in contract.raw["classes"].items():
        for field, spec in entry["fields"].items():
            if spec["type"] == "any":
                continue
            with pytest.raises(ConfigError, match=field):
                check_call(Call(name, {field: {"not": "valid"}}), contract)


def test_unknown_field_is_named(contract):
    with pytest.raises(ConfigError, match="unknown field 'max_draft_length'"):
        check_call(Call("BuildConfig", {"max_draft_length": 4}), contract)


def test_misspelt_plugin_field_is_caught_in_the_nested_call(contract):
    # PluginConfig ignores unknown fields itself (extra='ignore'): the table must catch it
    call = Call(
        "BuildConfig",
        {"plugin_config": Call("PluginConfig", {"paged_context_fmha": True})},
    )
    with pytest.raises(
        ConfigError, match="plugin_config -> PluginConfig: unknown field"
    ):
        check_call(call, contract)


@pytest.mark.parametrize(
    ("call", "needle"),
    [
        (
            Call(
                "BuildConfig",
                {
                    "speculative_decoding_mode": EnumRef(
                        "SpeculativeDecodingMode", "TREE"
                    )
                },
            ),
            "must be one of",
        ),
        (
            Call("BuildConfig", {"speculative_decoding_mode": "medusa"}),
            "expected SpeculativeDecodingMode",
        ),
        (Call("BuildConfig", {"max_batch_size": True}), "expected int"),
        (Call("PluginConfig", {"gemm_plugin": "fp16"}), "must be one of"),
        (Call("PluginConfig", {"use_paged_context_fmha": "enable"}), "expected bool"),
        (
            Call("MedusaDecodingConfig", {"medusa_choices": [[0], [-1]]}),
            "expected choices",
        ),
        (
            Call("LLM", {"build_config": Call("KvCacheConfig")}),
            "expected a BuildConfig",
        ),
        (Call("MedusaForCausalLm.from_hugging_face", {}, ("a", "b")), "2 positional"),
    ],
)
def test_wrong_values_are_refused(contract, call, needle):
    with pytest.raises(ConfigError, match=needle):
        check_call(call, contract)


def test_generated_plans_pass_the_contract(plans, contract):
    for plan in plans.values():
        check_plan(plan, contract)
        for step in plan.engines:
            check_build_argv(build_argv(step), contract)


@pytest.mark.parametrize(
    ("name", "change", "rule"),
    [
        ("dt", {"gather_context_logits": True}, "context_logits_with_draft"),
        ("base", {"max_draft_len": 3}, "spec_mode_needs_draft_len"),
        ("med", {"max_beam_width": 2}, "beam_with_speculation"),
        ("dt", {"plugins": {"paged_kv_cache": False}}, "spec_needs_attention_plugin"),
        (
            "med",
            {"plugins": {"gpt_attention_plugin": None}},
            "spec_needs_attention_plugin",
        ),
        ("base", {"opt_num_tokens": 64}, "profiles_vs_opt_num_tokens"),
        ("base", {"max_input_len": 4096}, "input_le_seq"),
        ("base", {"llm": {"max_batch_size": 64}}, "runtime_le_build"),
        (
            "base",
            {"llm": {"kv_cache_config": Call("KvCacheConfig", {"dtype": "fp8"})}},
            "kv_dtype_auto",
        ),
        ("med", {"max_draft_len": 5}, "medusa_tree"),
    ],
)
def test_broken_rules_fail_before_any_gpu_work(plans, contract, name, change, rule):
    plan = replace_build(plans[name], **change)
    with pytest.raises(ConfigError, match=rule):
        check_plan(plan, contract)


def test_medusa_tree_larger_than_draft_len_and_deeper_than_heads(plans, contract):
    base = plans["med"]
    deep = [[0], [0, 0], [0, 0, 0], [0, 0, 0, 0]]
    spec = Call(
        "MedusaDecodingConfig",
        {"max_draft_len": 6, "num_medusa_heads": 3, "medusa_choices": deep},
    )
    with pytest.raises(ConfigError, match="depth 4 exceeds num_medusa_heads 3"):
        check_plan(replace_build(base, spec=spec), contract)
    spec = Call(
        "MedusaDecodingConfig",
        {
            "max_draft_len": 6,
            "num_medusa_heads": 3,
            "medusa_choices": [[k] for k in range(7)],
        },
    )
    with pytest.raises(
        ConfigError, match="7 nodes but the engine's max_draft_len is 6"
    ):
        check_plan(replace_build(base, spec=spec), contract)
    spec = Call("MedusaDecodingConfig", {"max_draft_len": 6, "medusa_choices": TREE6})
    with pytest.raises(ConfigError, match="medusa_heads_explicit"):
        check_plan(replace_build(base, spec=spec), contract)


def test_fp8_rules(plans, contract):
    fp8 = EnumRef("QuantAlgo", "FP8")
    quant = {"quant_config": Call("QuantConfig", {"quant_algo": fp8})}
    plan = replace_build(
        plans["base"], llm=quant, plugins={"use_fp8_context_fmha": True}
    )
    with pytest.raises(ConfigError, match="fp8_gemm_plugin_off"):
        check_plan(plan, contract)
    plan = replace_build(
        plans["base"],
        llm=quant,
        plugins={"gemm_plugin": None, "use_fp8_context_fmha": True},
    )
    check_plan(plan, contract, (9, 0))
    with pytest.raises(ConfigError, match="quantization: fp8 needs an Ada or Hopper"):
        check_plan(plan, contract, (8, 6))


def test_draft_target_needs_paged_context_fmha_on_the_draft(plans, contract):
    plan = replace_build(
        plans["dt"], role="draft", plugins={"use_paged_context_fmha": False}
    )
    with pytest.raises(ConfigError, match="draft_target_paged_context_fmha"):
        check_plan(plan, contract)


@pytest.mark.parametrize(
    ("capability", "ok"),
    [
        ((7, 0), False),
        ((8, 0), False),
        ((8, 6), False),
        ((8, 9), True),
        ((9, 0), True),
        ((10, 0), True),
        (None, True),
    ],
)
def test_fp8_capability(capability, ok):
    if ok:
        check_fp8_capability(capability)
    else:
        with pytest.raises(ConfigError, match="compute capability >= 8.9"):
            check_fp8_capability(capability)


@pytest.mark.parametrize(
    "version",
    ["1.2.1", "1.2.0", "1.1.0", "1.0.0", "1.2.1.post1", "1.3.0rc1", "1.3.0rc20"],
)
def test_supported_versions(contract, version):
    check_trtllm_version(version, contract)


@pytest.mark.parametrize(
    ("version", "needle"),
    [
        ("1.3.0rc21", "removed after 1.3.0rc20, the last release with it"),
        ("1.3.0", "removed after 1.3.0rc20, the last release with it"),
        ("1.4.0rc4", "removed after 1.3.0rc20, the last release with it"),
        ("2.0.0", "removed after 1.3.0rc20, the last release with it"),
        ("0.21.0", "predates tensorrt_llm._tensorrt_engine"),
        ("dev", "cannot read the TensorRT-LLM version"),
    ],
)
def test_unsupported_versions_name_the_image(contract, version, needle):
    with pytest.raises(NotAvailableError, match=needle) as exc:
        check_trtllm_version(version, contract)
    assert "nvcr.io/nvidia/tritonserver:26.07-trtllm-python-py3" in str(exc.value)
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (
            ["trtllm-build", "--paged_context_fmha", "enable"],
            "no flag --paged_context_fmha",
        ),
        (["trtllm-build", "--speculative_decoding_mode", "tree"], "must be one of"),
        (["trtllm-build", "--context_fmha", "on"], "must be one of"),
        (["trtllm-build", "--gemm_plugin", "fp16"], "must be one of"),
        (["trtllm-build", "--kv_cache_type", "blocked"], "must be one of"),
    ],
)
def test_command_line_flags_are_checked(contract, argv, needle):
    with pytest.raises(ConfigError, match=needle):
        check_build_argv(argv, contract)


def test_load_contract_from_a_path(tmp_path: Path, contract):
    path = tmp_path / "c.json"
    path.write_text('{"tensorrt_llm_version": "9.9", "ngc_image": "x", "classes": {}}')
    other = load_contract(path)
    assert other.version == "9.9"
    with pytest.raises(ConfigError, match="not part of the TensorRT-LLM 9.9 contract"):
        other.fields("BuildConfig")


def test_unknown_field_of_a_partial_table_says_so(contract):
    # LLM lists only the arguments trtbench passes: say that, not "does not exist"
    with pytest.raises(ConfigError, match="verified subset of the contract"):
        check_call(Call("LLM", {"enable_chunked_prefill": True}), contract)
