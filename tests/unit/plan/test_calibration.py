"""``trtbench calibrate`` on CPU and ``trtbench plan --calibration``: the file it writes, the
plan's target passes taken from it (interpolated by hand here), bad files (exit 2)."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from tests.support.cli import run_cli
from trtbench.cli import main
from trtbench.plan.calibrate_torch import decode_logits, rope_and_mask
from trtbench.plan.calibration import read_calibration

# The shape of the repo's tiny target model (scripts/make_tiny_models.py): a real config.json.
TINY = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 192,
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "head_dim": 48,
    "intermediate_size": 512,
    "vocab_size": 2048,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": False,
}


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    """A CPU calibration of the tiny shape: B 1,2,4 x q 1,2 at context 32, 2 repeats."""
    root = tmp_path_factory.mktemp("cal")
    config = root / "config.json"
    config.write_text(json.dumps(TINY))
    out = root / "cal.json"
    args = ["calibrate", "--model", config, "--out", out, "--device", "cpu"]
    args += ["--batch", "1,2,4", "--query", "1,2", "--context", "32"]
    args += ["--warmup", "1", "--repeats", "2", "--min-repeat-ms", "1"]
    try:
        main([str(a) for a in args])
    except SystemExit as exc:
        assert exc.code == 0
    return config, out


def test_the_cpu_calibration_file_holds_the_grid_it_was_asked(calibrated):
    _, path = calibrated
    data = json.loads(path.read_text())
    assert data["schema_version"] == 1
    assert (data["device_kind"], data["dtype"], data["timer"]) == (
        "cpu",
        "float32",
        "perf_counter",
    )
    assert data["cuda_graphs"] is False
    assert data["torch_version"] == torch.__version__
    assert data["context_len"] == 32 and data["repeats"] == 2
    assert data["batches"] == [1, 2, 4] and data["queries"] == [1, 2]
    model = data["model"]
    assert (model["hidden_size"], model["num_hidden_layers"], model["vocab_size"]) == (
        192,
        3,
        2048,
    )
    for key in ("step_ms", "step_ms_low", "step_ms_high"):
        assert [len(r) for r in data[key]] == [2, 2, 2]
    for med, low, high in zip(
        *(sum(data[k], []) for k in ("step_ms", "step_ms_low", "step_ms_high")),
        strict=True,
    ):
        assert 0 < low <= med <= high  # the median of 2 lies within their min..max
    assert data["launch"]["eager_launch_us"] > 0
    assert data["launch"]["graph_launch_us"] is None  # no graphs on CPU
    assert read_calibration(path).batches == (1, 2, 4)


def _plan(config, capsys, *extra):
    args = ["plan", "--model", config, "--gpu", "h200", "--concurrency", "3,8"]
    # decode context = input + output / 2 = 16 + 16 = 32, the calibration's context
    args += ["--input-len", "16", "--output-len", "32", "--sequence-us", "0"]
    code, out, err = run_cli([*args, *extra], capsys)
    assert code == 0, err
    return out


def test_plan_takes_the_baseline_step_from_the_measured_table(
    calibrated, tmp_path, capsys
):
    config, path = calibrated
    t = [row[0] for row in json.loads(path.read_text())["step_ms"]]  # T(B, 1), B 1,2,4
    with_cal, without = tmp_path / "with.csv", tmp_path / "without.csv"
    text = _plan(config, capsys, "--calibration", path, "--out", with_cal)
    _plan(config, capsys, "--out", without)
    assert f"calibration ({path}): target passes measured on cpu" in text
    rows = pd.read_csv(with_cal).set_index(["mode", "concurrency"])["step_time_ms"]
    # B = 3 lies halfway between the measured B = 2 and B = 4
    assert rows[("baseline", 3)] == pytest.approx((t[1] + t[2]) / 2)
    # B = 8 is beyond the grid: the line through B = 2 and 4, never below T(4, 1)
    assert rows[("baseline", 8)] == pytest.approx(max(t[2] + 2 * (t[2] - t[1]), t[2]))
    roofline = pd.read_csv(without).set_index(["mode", "concurrency"])["step_time_ms"]
    assert roofline[("baseline", 3)] != pytest.approx(rows[("baseline", 3)])


def test_bilinear_interpolation_in_batch_and_query(tmp_path):
    data = _synthetic()
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(data))
    cal = read_calibration(path)
    # T = 1 + B + 10 q on the grid B 1,2,4 x q 1,2,4: bilinear is exact on a plane
    assert cal.step_ms_at(3, 3) == pytest.approx(1 + 3 + 30)
    assert cal.step_ms_at(1, 1) == pytest.approx(12)
    assert cal.step_ms_at(8, 1) == pytest.approx(1 + 8 + 10)  # extrapolated along B


def _synthetic(**change):
    grid = [[1 + b + 10 * q for q in (1, 2, 4)] for b in (1, 2, 4)]
    data = {
        "schema_version": 1,
        "device": "test",
        "device_kind": "cpu",
        "torch_version": "0",
        "dtype": "float32",
        "context_len": 32,
        "model": {k: TINY[k] for k in TINY if k not in ("architectures", "model_type")},
        "batches": [1, 2, 4],
        "queries": [1, 2, 4],
        "step_ms": grid,
        "step_ms_low": grid,
        "step_ms_high": grid,
        "repeats": 1,
        "cuda_graphs": False,
        "timer": "perf_counter",
        "launch": {"eager_launch_us": 5.0},
    }
    data.update(change)
    return data


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("{not json", "is not a JSON file"),
        (json.dumps(_synthetic(schema_version=2)), "schema_version 2 is newer"),
        (json.dumps({"device": "x"}), "no integer schema_version"),
        (json.dumps(_synthetic(step_ms=[[1.0]])), "step_ms is not 3 x 3"),
        (json.dumps(_synthetic(batches=[2, 4, 8])), "batches must ascend from 1"),
        (json.dumps({"schema_version": 1}), "field 'batches' is missing"),
    ],
)
def test_a_damaged_or_newer_file_exits_2_with_one_line(
    tmp_path, capsys, content, words
):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(TINY))
    path = tmp_path / "cal.json"
    path.write_text(content)
    code, _, err = run_cli(
        ["plan", "--model", config, "--calibration", path, "--concurrency", "1"], capsys
    )
    assert code == 2
    assert words in err and str(path) in err
    assert len(err.strip().splitlines()) == 1


def test_a_calibration_of_another_shape_is_refused(tmp_path, capsys):
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(_synthetic()))
    code, _, err = run_cli(
        ["plan", "--model", "llama-3-8b", "--calibration", path], capsys
    )
    assert code == 2
    assert "measured hidden 192, --model has 4096" in err


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--batch", "2,4"], "--batch 2,4: give at least 2 ascending values"),
        (["--query", "1"], "--query 1: give at least 2"),
        (["--model", "mixtral-8x7b"], "mixture-of-experts"),
    ],
)
def test_calibrate_refuses_bad_input_before_measuring(tmp_path, capsys, args, words):
    base = {"--model": "llama-3-8b", "--out": tmp_path / "c.json", "--device": "cpu"}
    base.update(dict(zip(args[::2], args[1::2], strict=True)))
    code, _, err = run_cli(["calibrate", *sum(base.items(), ())], capsys)
    assert code == 2
    assert words in err
    assert not (tmp_path / "c.json").exists()


def test_the_measured_pass_is_a_llama_forward(tmp_path):
    """The timed pass computes what HF's LlamaForCausalLM computes: same weights, a cache of
    the first ``context`` tokens, the logits of the ``q`` new ones."""
    torch.manual_seed(0)
    cfg = {k: TINY[k] for k in TINY if k not in ("architectures", "model_type")}
    hf = LlamaForCausalLM(LlamaConfig(**cfg, rope_theta=10000.0)).eval()
    ids = torch.randint(0, cfg["vocab_size"], (2, 8))
    context = 5
    with torch.no_grad():
        want = hf(ids).logits[:, context:]
    m = hf.model
    w = {
        "embed": m.embed_tokens.weight,
        "lm_head": hf.lm_head.weight.t(),
        "norm": m.norm.weight,
        "ln1": [x.input_layernorm.weight for x in m.layers],
        "ln2": [x.post_attention_layernorm.weight for x in m.layers],
        "qkv": [
            torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight]).t()
            for a in (x.self_attn for x in m.layers)
        ],
        "o": [x.self_attn.o_proj.weight.t() for x in m.layers],
        "gate_up": [
            torch.cat([x.mlp.gate_proj.weight, x.mlp.up_proj.weight]).t()
            for x in m.layers
        ],
        "down": [x.mlp.down_proj.weight.t() for x in m.layers],
    }
    d = cfg["head_dim"]
    cache = torch.zeros(3, 2, 2, 4, 8, d)
    got = []
    with (
        torch.no_grad()
    ):  # fill the cache with 5 tokens, then a decode (q 1), a verify (q 2)
        for start, n in ((0, context), (context, 1), (context + 1, 2)):
            rope = rope_and_mask(torch, d, start, n, "cpu", torch.float32)
            got.append(
                decode_logits(
                    torch, cfg, w, cache, ids[:, start : start + n], start, rope
                )
            )
    torch.testing.assert_close(torch.cat(got[1:], dim=1), want, rtol=1e-4, atol=1e-4)
