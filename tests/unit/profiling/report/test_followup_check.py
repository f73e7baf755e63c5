"""The follow-up check on hand-worked rounds, and its error rates by an independent
simulation.

Hand-worked rounds (output tok/s, higher better; three rounds each, recommended "rec" against
the best fixed "best"):

    tier  rec             best            ratios rec/best          reading
    c1    100, 100, 100   100, 100, 100   1, 1, 1                  interval [1, 1]: pass
    c2    90, 99, 81      100, 110, 90    0.9, 0.9, 0.9            interval [0.9, 0.9]: suspect
    c4    120, 80, 100    100, 100, 100   1.2, 0.8, 1.0            reaches 1: pass
    c8    (rec partial)                                            unchecked

c4 by hand: log ratios 0.18232, -0.22314, 0; mean -0.013607; squared deviations 0.038388,
0.043905, 0.000185, sample sd sqrt(0.082478 / 2) = 0.20307; half-width t(0.975, 2) · sd / √3
= 4.3027 · 0.20307 / 1.7321 = 0.50447; interval exp(-0.013607 ± 0.50447) = [0.59567,
1.63374], geometric mean exp(-0.013607) = 0.98649.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from trtbench.profiling.report.followup_check import (
    FAIL,
    PASS,
    SUSPECT,
    UNCHECKED,
    StageResult,
    check_basis,
    check_document,
    check_lines,
    check_rows,
    settle,
    stage_result,
    suspects,
    verdict_of,
)

TOK = check_basis("output_tok_s")
ROUNDS = {
    ("rec", "c1"): (100, 100, 100),
    ("best", "c1"): (100, 100, 100),
    ("rec", "c2"): (90, 99, 81),
    ("best", "c2"): (100, 110, 90),
    ("rec", "c4"): (120, 80, 100),
    ("best", "c4"): (100, 100, 100),
    ("rec", "c8"): (50, 50, 50),
    ("best", "c8"): (100, 100, 100),
}


def rounds_frame(data=ROUNDS, column="output_tokens_per_s") -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"variant": v, "tier": t, "round": r, column: x}
            for (v, t), values in data.items()
            for r, x in enumerate(values)
        ]
    )


def summary_frame() -> pd.DataFrame:
    rows = [
        {"variant": v, "tier": t, "tier_status": "complete", "concurrency": int(t[1:])}
        for v in ("rec", "best")
        for t in ("c1", "c2", "c4", "c8")
    ]
    rows[3]["tier_status"], rows[3]["tier_status_reason"] = "partial", "server died"
    return pd.DataFrame(rows)


def stages():
    r, s = rounds_frame(), summary_frame()
    return {
        t: stage_result(r, s, "rec", "best", t, TOK) for t in ("c1", "c2", "c4", "c8")
    }


def test_stage_one_readings_from_the_hand_worked_rounds():
    got = stages()
    assert [got[t].status for t in ("c1", "c2", "c4", "c8")] == [
        PASS,
        SUSPECT,
        PASS,
        UNCHECKED,
    ]
    assert got["c2"].ratio == pytest.approx(0.9)
    assert (got["c2"].low, got["c2"].high) == pytest.approx((0.9, 0.9))
    c4 = got["c4"]
    assert c4.ratio == pytest.approx(0.98649, rel=1e-4)
    assert (c4.low, c4.high) == pytest.approx((0.59567, 1.63374), rel=1e-4)
    assert c4.rounds == 3
    assert "partial" in got["c8"].reason and "server died" in got["c8"].reason
    assert suspects(list(got.values()), list(got)) == ["c2"]


def test_lower_better_is_oriented_so_above_one_means_the_recommended_is_better():
    tpot = check_basis("tpot_p50")
    data = {("rec", "c1"): (9, 9, 9), ("best", "c1"): (10, 10, 10)}
    r = rounds_frame(data, "tpot_p50_ms")
    s = summary_frame()
    got = stage_result(r, s, "rec", "best", "c1", tpot)
    assert got.ratio == pytest.approx(10 / 9) and got.status == PASS


def test_a_tier_on_fewer_than_three_paired_rounds_is_unchecked():
    data = {("rec", "c1"): (100, 100), ("best", "c1"): (100, 100, 100)}
    got = stage_result(rounds_frame(data), summary_frame(), "rec", "best", "c1", TOK)
    assert got.status == UNCHECKED and got.rounds == 2 and "needs 3" in got.reason


def test_settle_fails_only_when_the_confirmation_agrees():
    first = stages()["c2"]
    worse = StageResult(0.9, 0.85, 0.95, 6, SUSPECT, "")
    fine = StageResult(0.98, 0.93, 1.03, 6, PASS, "")
    assert settle("c2", 2, "best", first, worse).status == FAIL
    assert settle("c2", 2, "best", first, fine).status == PASS
    assert settle("c2", 2, "best", first, None).status == UNCHECKED
    # a tier that passed stage 1 is not confirmed: its status is stage 1's
    c1 = settle("c1", 1, "best", stages()["c1"], None)
    assert c1.status == PASS and c1.confirm is None


def test_verdicts():
    p = settle("c1", 1, "b", StageResult(1, 0.9, 1.1, 3, PASS, ""), None)
    u = settle("c8", 8, "b", StageResult(None, None, None, 0, UNCHECKED, "x"), None)
    f = settle(
        "c2",
        2,
        "b",
        StageResult(0.9, 0.8, 0.95, 3, SUSPECT, ""),
        StageResult(0.9, 0.8, 0.95, 3, SUSPECT, ""),
    )
    assert verdict_of([p, p]) == PASS
    assert verdict_of([p, u]) == "incomplete"
    assert verdict_of([p, u, f]) == FAIL
    assert verdict_of([]) == "incomplete"


def test_document_rows_and_section():
    got = stages()
    checks = [settle(t, float(t[1:]), "best", got[t], None) for t in got]
    doc = check_document(checks, TOK, {"variant": "rec", "from": "x"}, {}, 3)
    assert (
        doc["verdict"] == "incomplete"
    )  # c2 suspect without a confirmation, c8 partial
    assert doc["unchecked"] == ["c2", "c8"] and doc["failed"] == []
    rows = check_rows(doc)
    assert rows[0][:3] == ("c1", "best", "1.00x [1.00, 1.00] (3 rounds)")
    assert rows[1][3] == "-" and rows[1][4].startswith("unchecked")
    lines = check_lines(doc)
    assert lines[0] == "## Follow-up check"
    assert "could not be checked at c2, c8: incomplete" in lines[2]


def _simulated_rates(
    shift: float, n: int, trials: int, seed: int
) -> tuple[float, float]:
    """Independent of the code under test: per trial, n log-ratios of each stage drawn
    normal(shift, 1); a stage is 'worse' when its t-interval's top is below 0. Returns the
    share of trials suspect in stage 1, and the share failed (suspect in both stages)."""
    rng = np.random.default_rng(seed)
    t = stats.t.ppf(0.975, n - 1)

    def worse() -> np.ndarray:
        x = rng.normal(shift, 1.0, size=(trials, n))
        return x.mean(axis=1) + t * x.std(axis=1, ddof=1) / math.sqrt(n) < 0

    first, second = worse(), worse()
    return float(first.mean()), float((first & second).mean())


def test_false_failure_rate_of_two_identical_configs():
    suspect, failed = _simulated_rates(0.0, 6, 200_000, seed=1)
    assert suspect == pytest.approx(0.025, abs=0.002)  # one side of a 95 % interval
    assert failed == pytest.approx(0.025**2, abs=0.0003)  # the stated 0.06 % per tier


def test_power_against_a_loss_of_one_and_a_half_spreads_per_round():
    # A true loss of 1.5 sd of the round ratios (a 10 % loss against a ~6-7 % spread per
    # round) over the follow-up's 8 rounds: noncentral t(7, -1.5 * sqrt(8)) below
    # -t(0.975, 7) is 0.951 per stage (scipy.stats.nct), 0.904 for both.
    suspect, failed = _simulated_rates(-1.5, 8, 100_000, seed=2)
    assert suspect == pytest.approx(0.951, abs=0.005)
    assert failed == pytest.approx(0.951**2, abs=0.006)
