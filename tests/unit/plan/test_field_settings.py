"""What the field runs, planned: MoE targets (experts read per batch, MLA), EAGLE trees and
published acceptance lengths, serving stacks, request rates, 4-bit weights and the newer GPUs
— each against a hand-worked value or a definition."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from trtbench.cli import cli, main
from trtbench.core.errors import ConfigError
from trtbench.plan.chain_modes import (
    parse_rates,
    published_length,
    rank_accuracies,
    tree_tokens_per_step,
)
from trtbench.plan.engines import EngineTerms, engine_terms
from trtbench.plan.inputs import DTYPE_BYTES
from trtbench.plan.model_shapes import resolve_model, shape_from_config_file
from trtbench.plan.moe_shapes import MoeLayout
from trtbench.plan.overheads import Machinery
from trtbench.plan.planner import estimate_step
from trtbench.plan.qps import qps_point
from trtbench.plan.settings import PlanSettings, plan_inputs
from trtbench.plan.speculation import expected_tokens_per_step


def test_tokens_touch_experts_as_balls_fill_bins():
    """8 experts, top-2: one token touches 2; two tokens 8 (1 - (6/8)^2) = 3.5; many, all 8."""
    moe = MoeLayout(experts=8, top_k=2, expert_params=100.0, layers=4)
    assert moe.distinct_experts(1) == pytest.approx(2.0)
    assert moe.distinct_experts(2) == pytest.approx(3.5)
    assert moe.distinct_experts(10_000) == pytest.approx(8.0)
    # 4 layers x 8 experts x 100 routed; at one token 4 x 2 x 100 of them are read
    assert moe.read_params(5000.0, 1) == pytest.approx(5000 - 3200 + 800)


def test_moe_presets_have_their_published_sizes():
    """DeepSeek-V3 671 B (37 B active), Mixtral-8x7B 46.7 B (12.9 B active), gpt-oss-120b
    116.8 B: model cards and the DeepSeek-V3 report."""
    for name, total, active in (
        ("deepseek-v3", 671e9, 37e9),
        ("mixtral-8x7b", 46.7e9, 12.9e9),
        ("gpt-oss-120b", 116.8e9, 5.1e9),
    ):
        shape = resolve_model(name)
        assert shape.params == pytest.approx(total, rel=0.01), name
        assert shape.read_params(1) == pytest.approx(active, rel=0.12), name
    assert resolve_model("deepseek-r1").params == resolve_model("deepseek-v3").params


def test_mla_caches_one_latent_per_token_and_layer():
    """DeepSeek-V3: (512 + 64) elements x 61 layers x 2 B = 70,272 B per token in BF16,
    replicated on every tensor-parallel GPU."""
    shape = resolve_model("deepseek-v3")
    assert shape.kv_bytes_per_token(2.0) == 61 * 576 * 2
    assert shape.kv_heads == 1


def test_a_moe_config_file_plans_and_an_incomplete_one_names_its_key(tmp_path):
    config = {
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "intermediate_size": 32,
        "vocab_size": 100,
        "num_local_experts": 4,
        "num_experts_per_tok": 1,
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    shape = shape_from_config_file(tmp_path)
    # attention 4 x 64 x 64 = 16,384 per layer, experts 4 x 3 x 64 x 32 = 24,576, router
    # 256, embed + lm_head 12,800, norms 2 x 2 x 64 + 64 = 320
    assert shape.params == 2 * (16_384 + 24_576 + 256) + 12_800 + 320
    assert shape.moe is not None and shape.moe.layers == 2
    del config["num_experts_per_tok"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError, match=r"num_local_experts: 4.*num_experts_per_tok"):
        shape_from_config_file(tmp_path)


def test_a_tree_keeps_the_likeliest_nodes():
    """Depth 1, top-2, rate 0.5: ranks 0 and 1 are right with 0.5 and 0.25 → E = 1.75.
    Depth 2, top-2, 3 tokens: (0), then two nodes of 0.25 → E = 2.0."""
    assert rank_accuracies((0.5,), 2) == ((0.5, 0.25),)
    assert tree_tokens_per_step((0.5,), 2, 2) == pytest.approx(1.75)
    assert tree_tokens_per_step((0.5, 0.5), 2, 3) == pytest.approx(2.0)
    # a tree of top-1 and K tokens is the chain
    assert tree_tokens_per_step((0.8, 0.7), 1, 2) == pytest.approx(1 + 0.8 + 0.56)


def test_a_published_acceptance_length_sets_tokens_per_step():
    assert published_length("2.82@3") == (2.82, 3)
    rates = parse_rates("2.82@3", "mtp")
    assert len(rates) == 3 and len(set(rates)) == 1
    assert expected_tokens_per_step(rates[0], 3) == pytest.approx(2.82, abs=1e-6)
    with pytest.raises(ConfigError, match=r"lies in \[1, 4\]"):
        parse_rates("4.5@3", "mtp")
    tree = PlanSettings(
        model="llama-3-8b", eagle3="6.13@7", eagle3_topk=10, eagle3_tokens=60
    )
    chain = plan_inputs(tree).chain("eagle3")
    assert chain is not None and chain.is_tree
    assert chain.tokens_per_step == pytest.approx(6.13)
    assert chain.verify_tokens == 61


def test_a_tree_drafts_over_its_top_k_and_verifies_its_tokens():
    """EAGLE tree, depth 3, top-4, 16 tokens at B = 2: head(2, 1) + 2 head(2, 4) +
    target(2, 17), against the chain's 3 head(2, 1) + target(2, 4) (pure roofline)."""
    from trtbench.plan.planner import forward_pass_cost

    settings = dict(model="llama-3-8b", eagle3="0.8x3", no_overheads=True)
    tree = plan_inputs(PlanSettings(**settings, eagle3_topk=4, eagle3_tokens=16))
    chain = tree.chain("eagle3")
    assert chain is not None and chain.head is not None
    head = chain.head
    expected = (
        forward_pass_cost(tree, head, 2, 1).time_s
        + 2 * forward_pass_cost(tree, head, 2, 4).time_s
        + forward_pass_cost(tree, tree.target, 2, 17).time_s
    )
    assert estimate_step(tree, "eagle3", 2).step_s == pytest.approx(expected)


def test_a_stack_without_rows_says_so_and_uses_the_default():
    default = EngineTerms("default", 0.6, Machinery(1.0, 2.0, 3.0), 1.0, ("a", "b"))
    own = EngineTerms("sglang", 0.5, Machinery(4.0, 5.0, 6.0), 2.0, ("c",))
    terms, line = engine_terms("vllm", {"default": default, "sglang": own})
    assert terms is default and "has no published fit rows" in line
    terms, line = engine_terms("sglang", {"default": default, "sglang": own})
    assert terms is own and "fitted on 1 published row(s) of this stack (c)" in line
    with pytest.raises(ConfigError, match="unknown --engine 'tgi'"):
        engine_terms("tgi", {"default": default})


def test_four_bit_weights_and_their_kv():
    """NVFP4: 4 bits + an FP8 scale per 16 = 4.5 bits; AWQ: 4 bits + a 16-bit scale per
    128 = 4.125 bits; both keep a BF16 KV cache."""
    assert DTYPE_BYTES["fp4"] == 4.5 / 8 and DTYPE_BYTES["int4"] == 4.125 / 8
    inputs = plan_inputs(PlanSettings(model="llama-3-8b", dtype="int4"))
    assert inputs.kv_bytes_per_element == 2.0
    assert inputs.peak_flops_per_s == 989e12  # W4A16: 16-bit math
    fp4 = plan_inputs(PlanSettings(model="llama-3-8b", dtype="fp4", gpu="b200"))
    assert fp4.peak_flops_per_s == 9000e12


def test_fp4_on_hopper_exits_2_naming_the_dtype(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["plan", "--model", "llama-3-8b", "--dtype", "fp4", "--gpu", "h200"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "--dtype" in err and "no FP4" in err and "\n" not in err


def test_a_rate_is_served_at_the_concurrency_littles_law_gives():
    """The B found serves the rate (B >= QPS x W(B)) and one fewer does not."""
    inputs = plan_inputs(PlanSettings(model="llama-3-8b", eagle3="0.8x3"))
    for mode in ("baseline", "eagle3"):
        point = qps_point(inputs, mode, 4.0)
        assert not point.saturated
        assert point.concurrency >= 4.0 * point.latency_s
        if point.concurrency > 1:
            below = qps_point(inputs, mode, 4.0 * point.latency_s / point.concurrency)
            assert below.concurrency <= point.concurrency
    with pytest.raises(ConfigError, match="--qps must be > 0"):
        qps_point(inputs, "baseline", 0.0)


def test_plan_a_moe_target_with_mtp_and_an_eagle3_tree_on_b200():
    args = "plan --model deepseek-r1 --gpu b200 --tp 8 --dtype fp4 --engine sglang"
    args += " --mtp 2.82@3 --mtp-layers 3 --eagle3 0.8x5 --eagle3-topk 4"
    args += " --eagle3-tokens 16 --concurrency 1,32 --qps 2"
    result = CliRunner().invoke(cli, args.split())
    assert result.exit_code == 0, result.output
    out = result.output
    assert "mixture of experts: 58 MoE layers x 256 experts, top-8" in out
    assert "eagle3: tree depth 5, top-4, 16 tokens" in out
    assert "mtp: K=3" in out and "E=2.82 (published length)" in out
    assert "engine sglang" in out and "fitted on" in out
    assert "At a request rate (Little's law" in out
    modes = {line.split()[1] for line in out.splitlines() if line[:3] in ("1  ", "32 ")}
    assert {"baseline", "mtp", "eagle3"} <= modes


def test_a_tree_shape_without_eagle3_exits_2_in_one_line(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["plan", "--model", "llama-3-8b", "--eagle3-topk", "4"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "--eagle3-topk" in err and "give --eagle3 RATES" in err and "\n" not in err
