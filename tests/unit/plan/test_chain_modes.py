"""EAGLE-3, MTP and n-gram in the planner: chain acceptance, head sizes, step times, memory."""

from __future__ import annotations

import pandas as pd
import pytest
from click.testing import CliRunner

from tests.support.run_factory import summary_row, write_build, write_summary
from trtbench.cli import cli, main
from trtbench.core.errors import ConfigError
from trtbench.core.methods import EAGLE3, MTP, NGRAM
from trtbench.plan.chain_modes import (
    chain_tokens_per_step,
    eagle3_setup,
    layer_params,
    lookup_setup,
    mtp_setup,
    parse_rates,
)
from trtbench.plan.gpus import GPUS
from trtbench.plan.model_shapes import resolve_model
from trtbench.plan.overheads import PURE_ROOFLINE
from trtbench.plan.planner import PlanInputs, estimate_memory, estimate_step
from trtbench.plan.speculation import expected_tokens_per_step

LLAMA8 = resolve_model("llama-3-8b")
# One Llama-3-8B layer: q, o 4096 x 4096 each; k, v 4096 x 1024 each; MLP 3 x 4096 x 14336
# = 33,554,432 + 8,388,608 + 176,160,768 = 218,103,808 parameters.
LAYER = 218_103_808
LM_HEAD = 4096 * 128_256  # 525,336,576
# Verify of K+1 tokens at B = 1, context 1000 + 2/2 = 1001: weights + KV read once, BF16.
TARGET_BYTES = 16_060_522_496 + 1001 * 131_072


def _inputs(*chains):
    return PlanInputs(
        LLAMA8, GPUS["h100-sxm"], 1000, 2, (1,), chains=chains, **PURE_ROOFLINE
    )


def test_chain_expectation_hand_values():
    # 1 + 0.8 + 0.8*0.7 + 0.8*0.7*0.6 = 1 + 0.8 + 0.56 + 0.336 = 2.696
    assert chain_tokens_per_step((0.8, 0.7, 0.6)) == pytest.approx(2.696)
    assert parse_rates("default", EAGLE3) == (0.8, 0.7, 0.6)
    # a constant rate is Leviathan's chain: (1 - 0.8^5) / 0.2 = 3.3616
    assert chain_tokens_per_step(parse_rates("0.8x4", EAGLE3)) == pytest.approx(3.3616)
    assert expected_tokens_per_step(0.8, 4) == pytest.approx(3.3616)
    for bad in ("abc", "1.2,0.5", ""):
        with pytest.raises(ConfigError):
            parse_rates(bad, EAGLE3)


def test_head_sizes_of_llama_3_8b():
    assert layer_params(LLAMA8) == LAYER
    # EAGLE-3: layer + fc 3 x 4096^2 (50,331,648) + LM head 525,336,576 = 793,772,032;
    # with a 32,000-token draft vocabulary the LM head is 131,072,000 -> 399,507,456.
    assert eagle3_setup(EAGLE3, LLAMA8, (0.8,)).extra_params == 793_772_032
    assert (
        eagle3_setup(EAGLE3, LLAMA8, (0.8,), vocab=32_000).extra_params == 399_507_456
    )
    # MTP module: layer + projection 2 x 4096^2 = 251,658,240 in memory; a drafted token
    # also reads the shared LM head: 776,994,816.
    mtp = mtp_setup(MTP, LLAMA8, (0.85,), modules=2)
    assert mtp.extra_params == 2 * 251_658_240
    assert mtp.head.params == 251_658_240 + LM_HEAD == 776_994_816


def test_eagle3_step_hand_worked():
    # 3 head passes (793,772,032 x 2 B + 1001 x 4096 B of its one layer's KV) + a 4-token
    # verify; all memory-bound on one H100 (3.35e12 B/s).
    setup = eagle3_setup(EAGLE3, LLAMA8, (0.8, 0.7, 0.6))
    step = estimate_step(_inputs(setup), EAGLE3, 1)
    head_bytes = 793_772_032 * 2 + 1001 * 4096
    assert step.step_s == pytest.approx((3 * head_bytes + TARGET_BYTES) / 3.35e12)
    assert step.tokens_per_step == pytest.approx(2.696)


def test_ngram_step_is_lookup_plus_verify():
    # 4 sequences x 10 µs of CPU lookup + the verify of 4 sequences x 4 tokens.
    setup = lookup_setup(NGRAM, (0.5, 0.4, 0.3))
    step = estimate_step(_inputs(setup), "ngram", 4)
    verify = (16_060_522_496 + 4 * 1001 * 131_072) / 3.35e12
    assert step.step_s == pytest.approx(4 * 10e-6 + verify)
    assert step.tokens_per_step == pytest.approx(1 + 0.5 + 0.2 + 0.06)


def test_mtp_memory_adds_modules_and_their_kv():
    # 1 module: 251,658,240 x 2 B of weights; KV per token 131,072 + one layer's 4096 B,
    # over 1000 + 2 + K=1 tokens = 135,168 x 1003 = 135,573,504 B.
    mem = estimate_memory(_inputs(mtp_setup(MTP, LLAMA8, (0.85,))), "mtp", 1)
    assert mem.extra_weights_bytes == 503_316_480
    assert mem.kv_per_sequence_bytes == 135_573_504
    # logits of 1 + K = 2 tokens: 2 x 128,256 x 4 B
    assert mem.logits_per_sequence_bytes == 1_026_048


def test_cli_plans_every_mode(tmp_path):
    out = tmp_path / "modes.csv"
    args = [
        "plan",
        "--model",
        "llama-3-8b",
        "--eagle3",
        "default",
        "--mtp",
        "default",
        "--ngram",
        "0.6x2",
        "--concurrency",
        "1,8",
        "--out",
        str(out),
    ]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "eagle3: K=3, rates 0.8,0.7,0.6 → E=2.70" in result.output
    assert "mtp: K=1, rates 0.85 → E=1.85" in result.output
    assert "ngram: K=2, rates 0.6,0.6 → E=1.96" in result.output  # 1 + .6 + .36
    frame = pd.read_csv(out)
    assert list(frame["mode"][:4]) == ["baseline", "eagle3", "mtp", "ngram"]
    assert "Crossover eagle3:" in result.output


def test_bad_rates_exit_2_naming_the_option(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["plan", "--model", "llama-3-8b", "--mtp", "1.5"])
    assert exc.value.code == 2
    assert "--mtp" in capsys.readouterr().err


def test_from_run_without_baseline_exits_2(tmp_path, capsys):
    rows = [summary_row("draft-k4", 1, tpot=5.0, accept=3.3616)]
    write_summary(tmp_path, rows, None)
    write_build(tmp_path, "draft-k4", "draft_target", draft_len=4)
    with pytest.raises(SystemExit) as exc:
        main(["plan", "--from-run", str(tmp_path)])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "no baseline variant" in err and len(err.splitlines()) == 1
