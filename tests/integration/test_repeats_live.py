"""``loadtest.repeats: 2`` end to end: a reference baseline on a real tritonserver runs each
tier twice (pass 1 in a fresh order), and the CSVs and the report carry the passes and their
intervals."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from tests.support.cli import run_cli
from tests.support.run_specs import reference_run_spec, write_spec

pytestmark = pytest.mark.integration

REQUESTS = 3


@pytest.fixture(scope="module")
def run_dir(tiny_models, tmp_path_factory):
    root = tmp_path_factory.mktemp("repeats")
    spec = reference_run_spec(
        "repeats-it",
        tiny_models,
        [{"name": "base", "mode": "baseline"}],
        max_batch_size=2,
        deploy={"ready_timeout_s": 120},
        profile={"memory_interval_ms": 200, "scrape_metrics": False},
        requests=REQUESTS,
        input_tokens=8,
        output_tokens=8,
        repeats=2,
    )
    return root, write_spec(root, spec)


def test_two_passes_in_requests_summary_and_report(run_dir, capsys):
    root, spec = run_dir
    out = root / "run"
    code, stdout, err = run_cli(["run", spec, "--out", out], capsys)
    assert code == 0, err
    req = pd.read_csv(out / "loadtest" / "requests.csv")
    for tier in ("c1", "c2"):
        mine = req[req["tier"] == tier]
        assert sorted(mine["request_id"]) == sorted(
            [f"base-{tier}-{i}" for i in range(REQUESTS)]
            + [f"base-{tier}-r1-{i}" for i in range(REQUESTS)]
        )
        assert sorted(mine["repeat"]) == [0] * REQUESTS + [1] * REQUESTS
        # the same index sends the same prompt in both passes
        by_pass = {
            r: g.set_index("request_index")["task_id"]
            for r, g in mine.groupby("repeat")
        }
        assert by_pass[0].sort_index().tolist() == by_pass[1].sort_index().tolist()
    assert req["in_window"].all()
    summary = pd.read_csv(out / "loadtest" / "summary.csv").set_index("tier")
    for tier in ("c1", "c2"):
        row = summary.loc[tier]
        assert row["tier_status"] == "complete" and row["request_count"] == 2 * REQUESTS
        assert row["repeats_count"] == 2
        for name in (
            "time_to_first_token_p50_ms",
            "time_per_output_token_mean_ms",
            "output_token_throughput_tokens_per_s",
        ):
            low, high = row[f"{name}_ci95_low"], row[f"{name}_ci95_high"]
            assert math.isfinite(low) and low <= row[f"{name}_repeat_mean"] <= high
        # the baseline against itself, pass by pass: exactly 1 with no spread
        assert row["tpot_speedup_ratio_ci95_low"] == pytest.approx(1.0)
        assert row["tpot_speedup_ratio_ci95_high"] == pytest.approx(1.0)
        assert row["measurement_window"] == "all completions"
        assert row["output_token_source"] == "output_ids"
        assert not row["time_to_first_token_p95_n_ok"]  # 6 samples < 20
    assert "1.00x [1.00, 1.00]" in stdout
    report = (out / "report.md").read_text()
    assert "1.00x [1.00, 1.00]" in report and "(n=6, thin)" in report
