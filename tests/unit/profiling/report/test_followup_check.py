"""The follow-up check's comparison on hand-worked intervals, and its false-failure rate by
an independent simulation.

Hand-worked tiers (output tok/s, higher better; value [95 % low, high]):

    tier  best fixed        recommended        rec high vs best low      status
    c1    110 [100, 120]    95 [90, 100]       100 >= 100: reaches       pass
    c2    110 [100, 120]    95 [90, 99]        99 < 100: disjoint        fail
    c4    200 [150, 260]    240 [230, 250]     250 >= 150                pass
    c8    300 [280, 320]    (partial tier)                               unchecked

Ratios (recommended / best; interval [rec low / best high, rec high / best low]):
c1 95/110 = 0.8636 [90/120 = 0.75, 100/100 = 1.0]; c2 [0.75, 0.99]; c4 1.2 [230/260, 250/150].
TPOT (lower better, mirrored): best 10 [9, 11]; rec 12 [11, 13] passes (11 <= 11), rec 12.5
[11.5, 13] fails (11.5 > 11).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from trtbench.profiling.report.followup_check import (
    FAIL,
    PASS,
    UNCHECKED,
    Estimate,
    check_basis,
    check_document,
    check_lines,
    check_rows,
    check_tiers,
    not_worse,
    verdict_of,
)

TOK = "output_tokens_per_s"


def tier_rows(variant, rows):
    """Tier-table rows: (tier, value, low, high, status)."""
    return pd.DataFrame([
        {"variant": variant, "tier": t, "concurrency": float(t[1:]), TOK: v,
         f"{TOK}_ci95_low": lo, "repeats_count": 3, f"{TOK}_ci95_high": hi, "tier_status": s,
         "tier_status_reason": "server died" if s != "complete" else ""}
        for t, v, lo, hi, s in rows
    ])  # fmt: skip


ORIGINAL = pd.concat([
    tier_rows("ngram", [("c1", 110, 100, 120, "complete"), ("c2", 110, 100, 120, "complete"),
                        ("c8", 300, 280, 320, "complete")]),
    tier_rows("medusa", [("c4", 200, 150, 260, "complete")]),
])  # fmt: skip
FOLLOW_UP = tier_rows("rec", [
    ("c1", 95, 90, 100, "complete"), ("c2", 95, 90, 99, "complete"),
    ("c4", 240, 230, 250, "complete"), ("c8", 290, 250, 330, "partial"),
])  # fmt: skip
BEST = {"c1": "ngram", "c2": "ngram", "c4": "medusa", "c8": "ngram"}


def checks():
    return check_tiers(ORIGINAL, FOLLOW_UP, BEST, "rec", check_basis("output_tok_s"))


def test_status_per_tier_from_the_hand_worked_intervals():
    got = {t.tier: t.status for t in checks()}
    assert got == {"c1": PASS, "c2": FAIL, "c4": PASS, "c8": UNCHECKED}
    c8 = checks()[3]
    assert c8.reason == "follow-up tier partial (server died)"
    assert verdict_of(checks()) == FAIL


def test_ratio_and_its_interval():
    c1, c2, c4, _ = checks()
    assert (c1.ratio, c1.ratio_low, c1.ratio_high) == pytest.approx(
        (95 / 110, 0.75, 1.0)
    )
    assert (c2.ratio_low, c2.ratio_high) == pytest.approx((0.75, 0.99))
    assert (c4.ratio, c4.ratio_low, c4.ratio_high) == pytest.approx(
        (1.2, 230 / 260, 250 / 150)
    )
    assert c4.best == "medusa" and c4.best_estimate == Estimate(200, 150, 260, 3)


def test_lower_better_is_mirrored():
    best = Estimate(10, 9, 11)
    assert not_worse(Estimate(12, 11, 13), best, higher_is_better=False)
    assert not not_worse(Estimate(12.5, 11.5, 13), best, higher_is_better=False)
    basis = check_basis("tpot_p50")
    assert (basis.column, basis.higher_is_better) == ("tpot_mean_ms", False)
    assert "stands in" in basis.note
    assert check_basis("goodput") is None  # no per-variant interval: no check
    with pytest.raises(ValueError):
        not_worse(Estimate(12, None, None), best, higher_is_better=False)


def test_verdicts():
    c1, c2, c4, c8 = checks()
    assert verdict_of([c1, c4]) == PASS
    assert verdict_of([c1, c8]) == "incomplete"
    assert verdict_of([]) == "incomplete"
    assert verdict_of([c8, c2]) == FAIL


def test_missing_tier_and_missing_interval_are_unchecked():
    follow = FOLLOW_UP[FOLLOW_UP["tier"] != "c1"].copy()
    follow.loc[follow["tier"] == "c4", f"{TOK}_ci95_low"] = np.nan
    got = {t.tier: (t.status, t.reason) for t in
           check_tiers(ORIGINAL, follow, BEST, "rec", check_basis("output_tok_s"))}  # fmt: skip
    assert got["c1"] == (UNCHECKED, "the follow-up did not measure this tier")
    assert got["c4"] == (
        UNCHECKED,
        "the recommended config has no interval at this tier",
    )


def test_a_tier_on_fewer_than_three_passes_is_unchecked():
    """A stopped follow-up's tier may rest on 2 passes: t(0.975, 1) = 12.7 makes its
    interval so wide that it would pass almost anything."""
    follow = FOLLOW_UP.copy()
    follow.loc[follow["tier"] == "c2", "repeats_count"] = 2  # c2 failed on 3 passes
    c2 = check_tiers(ORIGINAL, follow, BEST, "rec", check_basis("output_tok_s"))[1]
    assert (c2.status, c2.reason) == (
        UNCHECKED,
        "the recommended config has 2 passes at this tier, the check needs 3",
    )


def test_document_rows_and_section():
    doc = check_document(checks(), check_basis("output_tok_s"),
                         {"variant": "rec", "from": "ngram",
                          "speculation": {"draft_len_schedule": {1: 2, 8: 1}}},
                         {"run": "/r", "follow_up": "/r/follow-up"})  # fmt: skip
    assert (doc["verdict"], doc["passed"], doc["failed"], doc["unchecked"]) == (
        FAIL,
        False,
        ["c2"],
        ["c8"],
    )
    rows = check_rows(doc)
    assert rows[0] == ("c1", "ngram", "110.0 [100.0, 120.0]", "95.0 [90.0, 100.0]",
                       "0.86x [0.75, 1.00]", "yes")  # fmt: skip
    assert rows[1][-1] == "NO"
    assert rows[3][-1].startswith("unchecked: follow-up tier partial")
    text = "\n".join(check_lines(doc))
    assert text.startswith("## Follow-up check")
    assert "significantly worse than the best fixed variant at c2: fail" in text
    assert "speculation: {draft_len_schedule: {1: 2, 8: 1}}" in text


def _interval_ends(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """95 % t-interval of the mean of each row of ``x`` (log values), written out here."""
    n = x.shape[-1]
    half = stats.t.ppf(0.975, n - 1) * x.std(axis=-1, ddof=1) / np.sqrt(n)
    return x.mean(axis=-1) - half, x.mean(axis=-1) + half


def test_false_failure_rate_of_two_identical_configs():
    """The module docstring's figures: 3 log-normal passes per config, same spread."""
    rng = np.random.default_rng(7)
    trials = 200_000
    best_low, best_high = _interval_ends(rng.normal(0, 0.2, (trials, 3)))
    rec_low, rec_high = _interval_ends(rng.normal(0, 0.2, (trials, 3)))
    fails = [
        not not_worse(Estimate(1.0, np.exp(rl), np.exp(rh)),
                      Estimate(1.0, np.exp(bl), np.exp(bh)), True)
        for rl, rh, bl, bh in zip(rec_low[:20_000], rec_high[:20_000], best_low[:20_000],
                                  best_high[:20_000], strict=True)
    ]  # fmt: skip
    vectorized = np.mean(rec_high < best_low)  # the same rule on every trial
    assert np.mean(fails) == pytest.approx(np.mean((rec_high < best_low)[:20_000]))
    assert 0.001 < vectorized < 0.004  # ≈ 0.2 % per tier
    # the best as the top of four equally good variants (by mean): ≈ 0.7 % per tier
    four = rng.normal(0, 0.2, (trials, 4, 3))
    top = four.mean(axis=-1).argmax(axis=1)
    low4, _ = _interval_ends(four[np.arange(trials), top])
    assert 0.004 < np.mean(rec_high < low4) < 0.01
    # a shift of one pass-to-pass sd between the runs: 2 % (one variant) to 4 % (four)
    shifted = np.mean(rec_high - 0.2 < best_low)
    assert 0.012 < shifted < 0.03
    assert 0.03 < np.mean(rec_high - 0.2 < low4) < 0.06
