"""Tensor / pipeline parallelism in the planner: the seed setup (Llama-3.1-70B on 8 x H100),
hand-worked per-GPU bytes and all-reduce times, and bad --tp / --gpus / --gpu input."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from click.testing import CliRunner

from trtbench.cli import cli, main
from trtbench.core.errors import ConfigError
from trtbench.core.methods import BASELINE
from trtbench.plan.gpus import GPUS
from trtbench.plan.model_shapes import resolve_model
from trtbench.plan.overheads import PURE_ROOFLINE
from trtbench.plan.parallel import (
    Parallelism,
    allreduce_s,
    check_tp,
    communication_s,
    kv_share,
)
from trtbench.plan.planner import (
    PlanInputs,
    estimate_memory,
    estimate_step,
)
from trtbench.plan.settings import PlanSettings, parallelism

H100 = GPUS["h100-sxm"]
SEED = [
    "plan",
    "--model",
    "llama-3.1-70b",
    "--gpu",
    "h100-sxm",
    "--draft",
    "llama-3.2-1b",
    "--medusa-accuracies",
    "vicuna-33b",
    "--concurrency",
    "1,2,4,8,16,32,64",
]

# Llama-3.1-70B: 70,553,706,496 params (80 layers, hidden 8192, 8 KV heads of 128).
PARAMS_70B = 70_553_706_496
# Per GPU at TP 8, BF16: 70,553,706,496 x 2 B / 8 = 17,638,426,624 B of weights.
WEIGHTS_PER_GPU = 17_638_426_624
# KV per token: 2 x 80 layers x 8 heads x 128 x 2 B = 327,680 B; one KV head per GPU -> 40,960 B.
# One all-reduce at B = 1 (one token, 8192 x 2 B = 16,384 B) over 8 GPUs, NVLink 4 450 GB/s:
# 10 µs + 2 x 7/8 x 16,384 / 450e9 s = 10 µs + 0.0637 µs = 10.0637 µs; x 160 (2 per layer)
# = 1.61019 ms per target pass.
ALLREDUCE_B1_S = 10e-6 + 2 * 7 / 8 * 16_384 / 450e9
COMM_B1_S = 160 * ALLREDUCE_B1_S


def test_seed_setup_fits_on_8_h100_with_tp_8(tmp_path):
    out = tmp_path / "seed.csv"
    args = [*SEED, "--tp", "8", "--out", str(out), "--no-overheads"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "8 GPU(s): tp 8 x pp 1, NVLink 4 450 GB/s per direction" in result.output
    assert "one all-reduce at B=1 10.06 µs x 160 per target pass" in result.output
    assert "none fits" not in result.output
    frame = pd.read_csv(out)
    assert set(frame["concurrency"]) == {1, 2, 4, 8, 16, 32, 64}
    assert set(frame["mode"]) == {"baseline", "draft_target", "medusa"}
    assert frame["fits"].all()
    for col in ("step_time_ms", "tpot_ms", "speedup_ratio", "output_tokens_per_s"):
        assert frame[col].map(math.isfinite).all() and (frame[col] > 0).all(), col
    assert (frame["weights_bytes"] == WEIGHTS_PER_GPU).all()
    base = frame[(frame["mode"] == "baseline") & (frame["concurrency"] == 1)].iloc[0]
    # Decode context 1024 + 256/2 = 1152 tokens x 40,960 B = 47,185,920 B of KV per GPU.
    # (17,638,426,624 + 47,185,920) B / 3.35e12 B/s = 5.27929 ms; + 1.61019 ms of
    # all-reduces = 6.88948 ms (compute: 2 x 69.5e9 / 8 FLOP / 989e12 = 0.018 ms, below).
    expected_s = (WEIGHTS_PER_GPU + 1152 * 40_960) / 3.35e12 + COMM_B1_S
    assert base["step_time_ms"] == pytest.approx(expected_s * 1e3)
    assert base["step_time_ms"] == pytest.approx(6.8895, abs=1e-4)
    assert base["communication_ms"] == pytest.approx(COMM_B1_S * 1e3)


def test_seed_setup_on_one_gpu_fits_nowhere():
    # 141 GB of BF16 weights > 72 GB budget: what the planner said before --tp.
    result = CliRunner().invoke(cli, [*SEED, "--concurrency", "1"])
    assert result.exit_code == 0, result.output
    assert "B=1: none fits" in result.output


def test_gpus_alone_sets_tp():
    # --gpus 8 -> tp 8; --gpus 8 --pp 2 -> tp 4; link from the preset (A100: NVLink 3).
    assert parallelism(PlanSettings(gpus=8), H100).tp == 8
    par = parallelism(PlanSettings(gpus=8, pp=2, gpu="a100"), GPUS["a100-sxm-80gb"])
    assert (par.tp, par.pp, par.link_bytes_per_s) == (4, 2, 300e9)
    with pytest.raises(ConfigError, match="--gpus 8 is not --tp 4 x --pp 1"):
        parallelism(PlanSettings(gpus=8, tp=4), H100)


def test_ring_allreduce_hand_value():
    # 5 µs + 2 x 3/4 x 1e6 B / 300e9 B/s = 5 µs + 5 µs = 10 µs; one GPU sends nothing.
    par = Parallelism(tp=4, link_bytes_per_s=300e9, allreduce_latency_s=5e-6)
    assert allreduce_s(par, 1e6) == pytest.approx(10e-6)
    assert allreduce_s(Parallelism(tp=1), 1e6) == 0.0


def test_pipeline_sends_and_memory_split():
    # Llama-3-8B, tp 1 x pp 2: no all-reduce, one stage send of 4096 x 2 B = 8192 B:
    # 10 µs + 8192 / 450e9 s. Weights per GPU 16,060,522,496 B / 2 = 8,030,261,248 B.
    model = resolve_model("llama-3-8b")
    par = Parallelism(tp=1, pp=2)
    assert communication_s(par, model, 1, 1) == pytest.approx(10e-6 + 8192 / 450e9)
    inputs = PlanInputs(model, H100, 1000, 2, (1,), parallel=par, **PURE_ROOFLINE)
    mem = estimate_memory(inputs, BASELINE, 1)
    assert mem.weights_bytes == 8_030_261_248
    # KV per GPU: 131,072 B/token / 2 stages x 1002 tokens = 65,667,072 B
    assert mem.kv_per_sequence_bytes == 65_667_072
    # Step: the two stages run in turn, so the bytes sum to the whole model:
    # (16,060,522,496 + 1001 x 131,072) / 3.35e12 + the send.
    step = estimate_step(inputs, BASELINE, 1)
    expected = (16_060_522_496 + 1001 * 131_072) / 3.35e12 + 10e-6 + 8192 / 450e9
    assert step.step_s == pytest.approx(expected)


def test_kv_heads_replicate_beyond_their_count():
    # 8 KV heads: tp 4 -> 2 heads per GPU (1/4); tp 16 -> 1 head replicated (1/8, not 1/16).
    model = resolve_model("llama-3.1-70b")
    assert kv_share(model, 4) == 1 / 4
    assert kv_share(model, 16) == 1 / 8


def test_tp_that_does_not_divide_heads_is_a_config_error():
    with pytest.raises(
        ConfigError, match="--tp 3 does not divide the 64 attention heads"
    ):
        check_tp(resolve_model("llama-3.1-70b"), 3)


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (
            ["--model", "llama-3.1-70b", "--tp", "3"],
            ("--tp 3", "64 attention heads", "llama-3.1-70b", "use --tp 1, 2, 4, 8"),
        ),
        (
            ["--model", "llama-3-8b", "--gpu", "tpu-v5"],
            ("tpu-v5", "a100-sxm-80gb, b200, gb200, h100-sxm, h20, h200, l40s, mi300x"),
        ),
        (["--model", "llama-3.1-70b", "--gpus", "8", "--tp", "2"], ("--gpus 8",)),
        (["--model", "llama-3.1-70b", "--tp", "0"], ("--tp",)),
    ],
)
def test_bad_cluster_input_exits_2_in_one_line(args, needles, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["plan", *args])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 or "Usage" in err
    for needle in needles:
        assert needle in err
    assert "Traceback" not in err
