"""``scripts/gpu_suite.sh`` in its short mode on the CPU stand-in, end to end (issue 47).

The suite is prepared for the next GPU machine; this runs every section of it here so it
cannot rot: ``GPU_SUITE_DEVICE=cpu`` (proof on float32 B 1,2 timed by host perf_counter;
large and calibrate on a 2-layer, 64-wide Llama config standing in for the ~1B / ~8B
shapes; nsys skipped: no GPU). About 45 s of CPU, minutes of wall time on a busy host: an
integration test. Expected values come from definitions:

- every section is reported in suite.txt, nsys as skipped, the stand-in as not GPU figures;
- the proof's timed rows say their clock (host_perf_counter on CPU) and repeats (2), and
  each row's step time lies inside its own repeat interval;
- large_steps.csv has one row per mode and batch size; the baseline's speedup is exactly 1
  (its tokens per step are 1 by definition); each mode's speedup is its tiny-model tokens
  per row-step x the baseline's step / its step, recomputed here from the row's columns;
- the calibration holds the 2 x 2 grid asked for.
"""

from __future__ import annotations

import json
import os
import subprocess

import pandas as pd
import pytest

from tests.support.data import REPO_ROOT

MODES = ["baseline", "draft_target", "ngram", "medusa", "eagle3"]


@pytest.fixture(scope="module")
def suite(tiny_models, tmp_path_factory):
    out = tmp_path_factory.mktemp("suite") / "out"
    env = {
        **os.environ,
        "GPU_SUITE_DEVICE": "cpu",
        "GPU_SUITE_SHORT": "1",
        "GPU_SUITE_MODELS": str(tiny_models["target"].parent),
    }
    done = subprocess.run(
        ["bash", str(REPO_ROOT / "scripts" / "gpu_suite.sh"), str(out)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    return out, done


def test_every_section_runs_or_says_why_not(suite):
    out, done = suite
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    text = (out / "suite.txt").read_text()
    assert "not GPU figures" in text
    assert "section nsys: skipped" in text
    for section in ("proof", "large", "calibrate"):
        assert f"section {section}: ok" in text, text


def test_proof_rows_say_their_clock_and_interval(suite):
    out, _ = suite
    timing = pd.read_csv(out / "proof" / "decode_timing.csv")
    timed = timing[timing["graphs_status"] == "eager"]
    assert sorted(timed["batch_size"].unique()) == [1, 2]
    assert set(timed["clock"]) == {"host_perf_counter"}
    assert set(timed["repeats"]) == {2}
    assert (timed["step_ms_low"] <= timed["step_ms_mean"]).all()
    assert (timed["step_ms_mean"] <= timed["step_ms_high"]).all()
    lossless = pd.read_csv(out / "proof" / "lossless.csv")
    assert lossless["lossless"].all()
    summary = json.loads((out / "proof" / "summary.json").read_text())
    assert summary["settings"]["repeats"] == 2


def test_large_steps_speedups_follow_their_definition(suite):
    out, _ = suite
    rows = pd.read_csv(out / "large" / "large_steps.csv")
    assert sorted(zip(rows["mode"], rows["batch"], strict=True)) == sorted(
        (m, b) for m in MODES for b in (1, 2)
    )
    assert set(rows["clock"]) == {"host_perf_counter"}
    for batch, group in rows.groupby("batch"):
        base = group[group["mode"] == "baseline"].iloc[0]
        assert base["speedup_at_tiny_acceptance"] == pytest.approx(1.0)
        for _, row in group.iterrows():
            assert row["step_ms_low"] <= row["step_ms"] <= row["step_ms_high"]
            want = row["tiny_tokens_per_row_step"] * base["step_ms"] / row["step_ms"]
            assert row["speedup_at_tiny_acceptance"] == pytest.approx(want), batch


def test_calibration_holds_the_grid(suite):
    out, _ = suite
    calibration = json.loads((out / "calibration-toy-llama-config.json").read_text())
    assert calibration["batches"] == [1, 2]
    assert calibration["queries"] == [1, 2]
    assert (out / "plan-toy-llama-config-calibrated.txt").read_text().strip()
