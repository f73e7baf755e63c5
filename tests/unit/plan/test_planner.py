"""Planner formulas against Leviathan et al. 2023 (arXiv 2211.17192), the Medusa paper's tree
expectation (arXiv 2401.10774, App. C) and hand-worked rooflines."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from trtbench.core.errors import ConfigError
from trtbench.core.methods import BASELINE, DRAFT_TARGET, MEDUSA
from trtbench.plan.gpus import GPUS, get_gpu
from trtbench.plan.model_shapes import resolve_model, shape_from_config_file
from trtbench.plan.overheads import PURE_ROOFLINE
from trtbench.plan.planner import (
    DraftSetup,
    MedusaSetup,
    PlanInputs,
    crossover_concurrency,
    estimate_memory,
    forward_pass_cost,
    make_plan,
    max_fitting_concurrency,
    medusa_head_params,
    speedup_at,
)
from trtbench.plan.settings import PlanSettings, medusa_setup, parse_accuracies
from trtbench.plan.speculation import (
    expected_tokens_per_step,
    fit_alpha,
    greedy_medusa_tree,
    leviathan_speedup,
    optimal_draft_len,
)

H100 = GPUS["h100-sxm"]


def test_expected_tokens_alpha_08_gamma_4_is_3_36():
    # (1 - 0.8^5) / (1 - 0.8) = (1 - 0.32768) / 0.2 = 3.3616  (Leviathan et al. 2023)
    assert expected_tokens_per_step(0.8, 4) == pytest.approx(3.3616)


@pytest.mark.parametrize(("alpha", "gamma", "tokens"), [(1.0, 4, 5.0), (0.0, 4, 1.0)])
def test_expected_tokens_edges(alpha, gamma, tokens):
    # α = 1 accepts every draft token plus the bonus one; α = 0 yields only the target's.
    assert expected_tokens_per_step(alpha, gamma) == tokens


# (alpha, c) -> (optimal gamma, speedup): Leviathan et al. 2023's wall-time gain maximised over
# integer gamma (their Fig. 3 plots the optimum); values computed independently of the planner
OPTIMAL_TABLE = [
    (0.6, 0.02, 6, 2.17),
    (0.6, 0.05, 4, 1.92),
    (0.6, 0.10, 3, 1.67),
    (0.6, 0.20, 2, 1.40),
    (0.7, 0.02, 8, 2.76),
    (0.7, 0.05, 6, 2.35),
    (0.7, 0.10, 4, 1.98),
    (0.7, 0.20, 3, 1.58),
    (0.8, 0.02, 11, 3.82),
    (0.8, 0.05, 8, 3.09),
    (0.8, 0.10, 6, 2.47),
    (0.8, 0.20, 4, 1.87),
    (0.9, 0.02, 19, 6.37),
    (0.9, 0.05, 13, 4.67),
    (0.9, 0.10, 10, 3.43),
    (0.9, 0.20, 7, 2.37),
]


@pytest.mark.parametrize(("alpha", "c", "gamma", "speedup"), OPTIMAL_TABLE)
def test_optimal_draft_len_matches_the_table(alpha, c, gamma, speedup):
    best, gain = optimal_draft_len(alpha, c)
    assert best == gamma
    assert round(gain, 2) == speedup


def test_leviathan_speedup_hand_value():
    # α=0.8, γ=8, c=0.05: (1 - 0.8^9)/0.2 = 4.328911 ; / (8*0.05 + 1) = 3.0921
    assert leviathan_speedup(0.8, 8, 0.05) == pytest.approx(4.3289107 / 1.4)


def test_fit_alpha_inverts_expected_tokens():
    assert fit_alpha(3.3616, 4) == pytest.approx(0.8, abs=1e-9)
    with pytest.raises(ConfigError, match="outside"):
        fit_alpha(6.0, 4)


def test_medusa_top1_chain_of_four_heads_on_vicuna_7b_is_1_78():
    # Medusa assets/medusa_acc.csv: 1 + .5604 + .5604*.3164 + ...*.2010 + ...*.1474 = 1.7786
    acc = parse_accuracies("vicuna-7b", cumulative=False)
    setup = MedusaSetup(4, 1, ((0,), (0, 0), (0, 0, 0), (0, 0, 0, 0)), acc)
    assert setup.tokens_per_step == pytest.approx(1.7786, abs=1e-4)
    assert round(setup.tokens_per_step, 2) == 1.78


@pytest.mark.parametrize(
    ("preset", "expected"),
    [("vicuna-7b", 2.38), ("vicuna-13b", 2.48), ("vicuna-33b", 2.52)],
)
def test_greedy_64_token_tree_matches_published_expectation(preset, expected):
    # greedy tree (Medusa App. C) of 63 nodes + root on the top-5 accuracies -> 2.38 / 2.48 / 2.52
    settings = PlanSettings(
        model="vicuna-7b", medusa_accuracies=preset, medusa_nodes=63
    )
    setup = medusa_setup(settings)
    assert len(setup.choices) == 63
    assert round(setup.tokens_per_step, 2) == expected


def test_greedy_tree_order_on_a_small_table():
    # head1 ranks .6/.3, head2 .5: (0)=.6, (1)=.3, (0,0)=.3, (1,0)=.15 -> best first
    tree = greedy_medusa_tree([[0.6, 0.3], [0.5]], 3)
    assert tree[0] == (0,)
    assert set(tree[1:]) == {(1,), (0, 0)}


def test_llama_shapes_from_hf_config_match_published_sizes(tmp_path):
    # Llama-3-8B: 8,030,261,248 parameters; Llama-3.2-1B (tied): 1,235,814,400
    assert resolve_model("llama-3-8b").params == 8_030_261_248
    assert resolve_model("llama-3.2-1b").params == 1_235_814_400
    cfg = {
        "hidden_size": 4096,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "intermediate_size": 14336,
        "vocab_size": 128256,
    }
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    shape = shape_from_config_file(tmp_path)
    assert shape.params == 8_030_261_248
    # KV per token, BF16: 2 * 32 layers * 8 heads * 128 * 2 B = 131,072 B
    assert shape.kv_bytes_per_token(2) == 131_072


@pytest.mark.parametrize(
    ("config", "needle"),
    [
        ({"hidden_size": 8}, "num_hidden_layers"),
        ({"num_local_experts": 8}, "mixture"),
        # keys the planner did not know: ERNIE-4.5, DBRX (nested), an experts-per-token
        ({"moe_num_experts": 64, "hidden_size": 8}, r"mixture.*moe_num_experts: 64"),
        ({"ffn_config": {"moe_num_experts": 16}}, r"ffn_config\.moe_num_experts: 16"),
        ({"num_experts_per_tok": 2}, r"mixture.*num_experts_per_tok"),
        # counts as text or per layer, a flag without a count
        ({"moe_num_experts": "64"}, r"moe_num_experts: '64'"),
        ({"moe_num_experts": [64, 64]}, r"moe_num_experts: \[64, 64\]"),
        ({"use_moe": True}, r"use_moe: True"),
    ],
)
def test_bad_hf_configs(tmp_path, config, needle):
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError, match=needle):
        shape_from_config_file(tmp_path)


SEVEN_B = "params=7e9,layers=32,hidden=4096,kv_heads=32,head_dim=128,vocab=32000"


def _inputs(model: str = SEVEN_B, **kw) -> PlanInputs:
    base = dict(
        target=resolve_model(model),
        gpu=H100,
        input_len=1000,
        output_len=2,
        concurrencies=(1,),
        dtype="float16",
        # the pure roofline: these tests check its formulas (test_overheads.py the terms)
        **PURE_ROOFLINE,
    )
    base.update(kw)
    return PlanInputs(**base)


def test_roofline_7b_fp16_on_h100_is_memory_bound():
    # context L = 1000 + 2/2 = 1001 tokens. KV/token = 2*32*32*128*2 B = 524,288 B
    # bytes = 14e9 + 1001 * 524,288 = 14,524,812,288 ; / 3.35e12 B/s = 4.33576 ms
    # FLOPs = 2*(7e9 - 32000*4096) + 4*32*4096*1001 = 13,737,856,000 + 524,812,288
    #       -> 1.44e-5 s at 989e12: memory-bound
    cost = forward_pass_cost(_inputs(), resolve_model(SEVEN_B), 1, 1)
    assert cost.bytes_moved == 14_524_812_288
    assert cost.flops == 13_737_856_000 + 524_812_288
    assert cost.time_s == pytest.approx(14_524_812_288 / 3.35e12)
    assert cost.bound == "memory"


def test_roofline_turns_compute_bound_with_many_tokens():
    # B=64 sequences x T=64 tokens = 4096 tokens: FLOPs = 2*6.868928e9*4096
    # + 4*32*4096*4096*1001 = 5.6272e13 + 2.1497e12 = 5.8422e13 -> 59.07 ms > bytes 14.1 ms
    cost = forward_pass_cost(_inputs(), resolve_model(SEVEN_B), 64, 64)
    flops = 2 * 6_868_928_000 * 4096 + 4 * 32 * 4096 * 4096 * 1001
    assert cost.bound == "compute"
    assert cost.time_s == pytest.approx(flops / 989e12)


def test_memory_bound_draft_speedup_equals_leviathan():
    # While both passes are memory-bound the verify pass costs a 1-token pass, so the
    # planner's speedup is E / (γ c + 1) with c = t_draft / t_target (Leviathan Thm 3.8).
    draft = DraftSetup(resolve_model("llama-3.2-1b"), 4, 0.8)
    inputs = _inputs("llama-3-8b", draft=draft, dtype="bfloat16")
    c = (
        forward_pass_cost(inputs, draft.model, 1, 1).time_s
        / forward_pass_cost(inputs, inputs.target, 1, 1).time_s
    )
    assert speedup_at(inputs, DRAFT_TARGET, 1) == pytest.approx(
        leviathan_speedup(0.8, 4, c)
    )


def test_medusa_head_params_vicuna_7b():
    # 5 heads x (4096^2 + 4096 + 4096*32000) = 5 x 147,853,312
    assert medusa_head_params(resolve_model("vicuna-7b"), 5, 1) == 739_266_560


def test_memory_fit_70b_fp8_on_h100():
    # 70,553,706,496 params x 1 B; KV/token 2*80*8*128*1 B = 163,840 B; a sequence of
    # 1024+256 tokens = 209,715,200 B, + FP32 logits 128,256 x 4 = 513,024 B per sequence.
    # Budget 0.9*80e9 = 72e9 -> room 1,446,293,504 B / 210,228,224 B = 6.88 -> 6
    inputs = _inputs("llama-3.1-70b", dtype="fp8", input_len=1024, output_len=256)
    assert inputs.target.params == 70_553_706_496
    assert max_fitting_concurrency(inputs, BASELINE) == 6
    assert estimate_memory(inputs, BASELINE, 6).fits
    assert not estimate_memory(inputs, BASELINE, 7).fits
    bf16 = _inputs("llama-3.1-70b", dtype="bfloat16")
    assert not estimate_memory(bf16, BASELINE, 1).fits  # 141 GB of weights > 72 GB


def test_medusa_crossover_hand_worked():
    # 1e9 tied params FP16 -> 2e9 B: a memory-bound pass takes 2e9/3.35e12 = 0.597 ms.
    # One head, 7 rank-0..6 nodes at accuracy 0.1 each: E = 1 + 7*0.1 = 1.7.
    # Verify of 8 tokens is compute-bound at 2*1e9*8*B / 989e12 s; slower than baseline
    # once that exceeds 1.7 * 0.597 ms: B > 1.7 * 2e9 * 989e12 / (3.35e12 * 16e9) = 62.7
    model = "params=1e9,layers=1,hidden=64,kv_heads=1,head_dim=1,vocab=1000,tied=1"
    medusa = MedusaSetup(1, 1, tuple((k,) for k in range(7)), ((0.1,) * 7,))
    inputs = _inputs(model, medusa=medusa, input_len=1, output_len=2)
    assert medusa.tokens_per_step == pytest.approx(1.7)
    assert crossover_concurrency(inputs, MEDUSA) == 63
    plan = make_plan(replace(inputs, concurrencies=(1, 62, 63)))
    assert plan.crossover[MEDUSA] == 63
    assert plan.recommended == {1: MEDUSA, 62: MEDUSA, 63: BASELINE}


def test_gpu_table_and_errors():
    # ridge points (dense BF16 peak / HBM bandwidth, NVIDIA spec pages): H100 295, H200 206 FLOP/B
    assert round(get_gpu("H100").ridge_flops_per_byte()) == 295
    assert round(get_gpu("h200").ridge_flops_per_byte()) == 206
    with pytest.raises(ConfigError, match="FP8"):
        get_gpu("a100").peak_flops_per_s(fp8=True)
    with pytest.raises(ConfigError, match="tpu-v5"):
        get_gpu("tpu-v5")
    # B200 (HGX): 2.25 PFLOP/s dense BF16 over 8 TB/s = 281 FLOP/B; FP4 only on Blackwell
    assert round(get_gpu("b200").ridge_flops_per_byte()) == 281
    assert get_gpu("gb200").peak_flops_per_s(fp4=True) == 10e15
    with pytest.raises(ConfigError, match="no FP4"):
        get_gpu("h200").peak_flops_per_s(fp4=True)


def test_fewer_heads_than_accuracy_rows_limit_the_greedy_tree():
    # 4 heads: head 5's accuracies are dropped, so no path is deeper than 4
    settings = PlanSettings(
        model="llama-3-8b",
        medusa_accuracies="vicuna-7b",
        medusa_heads=4,
        medusa_nodes=63,
    )
    setup = medusa_setup(settings)
    assert setup.num_heads == 4
    assert len(setup.accuracies) == 4
    assert max(len(p) for p in setup.choices) <= 4
    # Llama-3-8B heads: 4 x (16,777,216 + 4,096 + 525,336,576) = 4 x 542,117,888
    assert medusa_head_params(resolve_model("llama-3-8b"), 4, 1) == 2_168_471_552


def test_a_dense_config_with_a_moe_switch_off_stays_dense():
    from trtbench.plan.model_shapes import moe_key

    # a flag, a one-expert count and a zero are not experts
    assert moe_key({"use_moe": False, "moe_layer_freq": 0, "num_experts": 0}) is None
    assert moe_key({"moe_every_k_layers": 1}) is None
    assert moe_key({"num_local_experts": 1}) is None  # one expert is dense, any key
