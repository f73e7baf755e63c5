"""Tier statuses and speedups: a tier that did not run to its end is never a measurement.

Expected values are worked by hand from the definitions in profiling/loadtest/records/outcome.py and
speedups.py (speedup = baseline mean TPOT / variant mean TPOT between two complete tiers).
"""

from __future__ import annotations

import math
import signal

import pandas as pd
import pytest

from trtbench.profiling.loadtest.records.outcome import TierOutcome, settle_tier
from trtbench.profiling.loadtest.stats.speedups import add_speedups


@pytest.mark.parametrize(
    ("requests", "failed", "stop", "dead", "status", "reason"),
    [
        (8, 0, None, None, "complete", ""),
        (8, 2, None, None, "complete", ""),  # some errors: counted, still a measurement
        (8, 8, None, None, "failed", "every request failed"),
        (0, 0, None, None, "failed", "no request finished"),
        (
            3,
            1,
            None,
            "tritonserver exited with code -9",
            "partial",
            "tritonserver exited with code -9",
        ),
        (2, 2, None, "gone", "failed", "gone"),
        (0, 0, None, "gone", "failed", "gone"),
        (5, 0, signal.SIGTERM, None, "interrupted", "stopped by SIGTERM"),
        (
            5,
            0,
            signal.SIGHUP,
            "gone",
            "interrupted",
            "stopped by SIGHUP",
        ),  # the signal wins
    ],
)
def test_settle_tier(requests, failed, stop, dead, status, reason):
    tier = TierOutcome("c4", requests=requests, failed=failed)
    got = settle_tier(tier, stop, dead)
    assert (got.status, got.reason) == (status, reason)
    assert (got.requests, got.failed) == (requests, failed)


def test_tier_line_names_unfinished_requests_and_reason():
    tier = TierOutcome("c2", "partial", requests=5, failed=1, unfinished=2, reason="x")
    assert tier.line() == "5 requests, 1 failed, 2 unfinished, partial (x)"


def _summary(rows):
    cols = [
        "variant",
        "tier",
        "tier_status",
        "time_per_output_token_mean_ms",
        "output_token_throughput_tokens_per_s",
    ]
    return pd.DataFrame(rows, columns=cols)


def test_speedups_only_between_complete_tiers():
    s = add_speedups(
        _summary(
            [
                ("base", "c1", "complete", 10.0, 100.0),
                ("base", "c2", "partial", 12.0, 150.0),
                ("med", "c1", "complete", 5.0, 200.0),
                ("med", "c2", "complete", 6.0, 300.0),
                ("med", "c4", "complete", 8.0, 400.0),  # baseline has no c4
            ]
        ),
        "base",
    )
    med = s[s["variant"] == "med"].set_index("tier")
    assert med.at["c1", "tpot_speedup_ratio"] == pytest.approx(10.0 / 5.0)
    assert med.at["c1", "output_token_throughput_speedup_ratio"] == pytest.approx(2.0)
    assert med.at["c1", "speedup_note"] == ""
    assert math.isnan(med.at["c2", "tpot_speedup_ratio"])
    assert med.at["c2", "speedup_note"] == "the baseline (base) c2 is partial"
    assert math.isnan(med.at["c4", "tpot_speedup_ratio"])
    assert med.at["c4", "speedup_note"] == "the baseline (base) has no tier c4"
    base = s[s["variant"] == "base"].set_index("tier")
    assert base.at["c1", "tpot_speedup_ratio"] == pytest.approx(1.0)
    assert math.isnan(
        base.at["c2", "tpot_speedup_ratio"]
    )  # not even 1.0 against itself
    assert base.at["c2", "speedup_note"] == "tier is partial"


def test_a_partial_variant_tier_gets_no_speedup():
    s = add_speedups(
        _summary(
            [
                ("base", "c1", "complete", 10.0, 100.0),
                ("med", "c1", "interrupted", 5.0, 200.0),
            ]
        ),
        "base",
    )
    row = s[s["variant"] == "med"].iloc[0]
    assert math.isnan(row["tpot_speedup_ratio"])
    assert row["speedup_note"] == "tier is interrupted"


def test_an_empty_baseline_never_gives_inf():
    s = add_speedups(
        _summary(
            [
                ("base", "c1", "complete", float("nan"), 0.0),
                ("med", "c1", "complete", 5.0, 200.0),
            ]
        ),
        "base",
    )
    row = s[s["variant"] == "med"].iloc[0]
    assert math.isnan(row["tpot_speedup_ratio"])
    assert math.isnan(row["output_token_throughput_speedup_ratio"])
    assert "no output tokens" in row["speedup_note"]
    numbers = s.select_dtypes("number").to_numpy().ravel()
    assert not any(math.isinf(v) for v in numbers)


def test_files_without_a_status_column_count_as_complete():
    frame = _summary(
        [("base", "c1", None, 10.0, 100.0), ("med", "c1", None, 4.0, 250.0)]
    )
    s = add_speedups(frame.drop(columns="tier_status"), "base")
    assert s.loc[s["variant"] == "med", "tpot_speedup_ratio"].iloc[0] == pytest.approx(
        2.5
    )
    assert (s["tier_status"] == "complete").all()
