"""Paired ratios over rounds (``profiling/report/paired.py``) on hand-worked rounds.csv rows.

The three-round case (output tok/s, higher better), rows deliberately out of round order:

    round   A (draft)   B (base)   A_r / B_r   ln(ratio)
    0       120         100        1.20        0.1823216
    1       250         200        1.25        0.2231436
    2        65          50        1.30        0.2623643

    mean of logs  m = (0.1823216 + 0.2231436 + 0.2623643) / 3 = 0.2226098
    estimate      exp(m) = (1.2 * 1.25 * 1.3)^(1/3) = 1.95^(1/3) = 1.24933
    deviations    -0.0402882, 0.0005338, 0.0397545
    sd (ddof 1)   s = sqrt((0.00162314 + 0.00000028 + 0.00158042) / 2) = 0.0400240
    half width    t(0.975, 2) * s / sqrt(3) = 4.3026527 * 0.0231079 = 0.0994253
    interval      [exp(0.1231845), exp(0.3220351)] = [1.13109, 1.37993]: above 1, significant

Pooling the rounds instead (mean A 145 over mean B 116.67 = 1.243) or pairing rows by
position would give other numbers; pairing is by the ``round`` column.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest
from scipy import stats

from trtbench.profiling.report.paired import paired_ratio, round_values

TOK = "output_tokens_per_s"
TPOT = "tpot_p50_ms"


def frame(rows: list[tuple[str, str, int, float]], column: str = TOK) -> pd.DataFrame:
    """rounds.csv rows (variant, tier, round, figure)."""
    return pd.DataFrame(rows, columns=["variant", "tier", "round", column])


THREE = frame(
    [
        ("draft", "c4", 2, 65.0),
        ("base", "c4", 0, 100.0),
        ("draft", "c4", 0, 120.0),
        ("base", "c4", 2, 50.0),
        ("draft", "c4", 1, 250.0),
        ("base", "c4", 1, 200.0),
        # another tier and another variant: not part of the pair
        ("draft", "c8", 0, 1.0),
        ("base", "c8", 0, 9.0),
        ("medusa", "c4", 0, 999.0),
    ]
)


def log_t(ratios: list[float]) -> tuple[float, float, float]:
    """Geometric mean and 95 % t-interval written out: mean and sd of the logs by hand,
    only the t quantile from scipy."""
    logs = [math.log(r) for r in ratios]
    n = len(logs)
    m = sum(logs) / n
    s = math.sqrt(sum((x - m) ** 2 for x in logs) / (n - 1))
    half = stats.t.ppf(0.975, n - 1) * s / math.sqrt(n)
    return math.exp(m), math.exp(m - half), math.exp(m + half)


def test_three_rounds_hand_worked_interval():
    pr = paired_ratio(THREE, "draft", "base", "c4", TOK)
    est, low, high = log_t([1.2, 1.25, 1.3])
    assert (pr.a, pr.b, pr.tier, pr.rounds) == ("draft", "base", "c4", 3)
    assert pr.ratio == pytest.approx(est, rel=1e-12)
    assert pr.low == pytest.approx(low, rel=1e-12)
    assert pr.high == pytest.approx(high, rel=1e-12)
    # the docstring's figures
    assert pr.ratio == pytest.approx(1.24933, abs=1e-5)
    assert pr.low == pytest.approx(1.13109, abs=1e-5)
    assert pr.high == pytest.approx(1.37993, abs=1e-5)
    assert pr.significant is True and pr.worse is False


def test_a_wide_interval_is_not_significant():
    """Ratios 1.1, 1.2, 1.0: logs 0.0953102, 0.1823216, 0; mean 0.0925439, sd 0.0911923,
    half 4.3026527 * 0.0911923 / sqrt(3) = 0.2265344: [exp(-0.1339905), exp(0.3190783)] =
    [0.87460, 1.37586], reaching below 1: neither better nor worse."""
    rows = frame(
        [
            ("a", "c1", 0, 110.0),
            ("a", "c1", 1, 120.0),
            ("a", "c1", 2, 100.0),
            ("b", "c1", 0, 100.0),
            ("b", "c1", 1, 100.0),
            ("b", "c1", 2, 100.0),
        ]
    )
    pr = paired_ratio(rows, "a", "b", "c1", TOK)
    assert pr.ratio == pytest.approx(1.32 ** (1 / 3))
    assert pr.low == pytest.approx(0.87460, abs=1e-5)
    assert pr.high == pytest.approx(1.37586, abs=1e-5)
    assert pr.significant is False and pr.worse is False


def test_a_constant_ratio_collapses_the_interval_to_it():
    """A is exactly twice B in each of four rounds, whatever B does: sd 0, [2, 2]."""
    b = [100.0, 37.0, 250.0, 80.0]
    rows = frame(
        [("a", "c2", r, 2 * v) for r, v in enumerate(b)]
        + [("b", "c2", r, v) for r, v in enumerate(b)]
    )
    pr = paired_ratio(rows, "a", "b", "c2", TOK)
    assert pr.rounds == 4
    assert pr.ratio == pytest.approx(2.0)
    assert pr.low == pytest.approx(2.0) and pr.high == pytest.approx(2.0)
    assert pr.significant is True


def test_lower_is_better_takes_b_over_a():
    """TPOT p50 (ms), lower better: A 5, 8, 4 against B 10, 10, 10 -> B/A = 2, 1.25, 2.5,
    estimate (2 * 1.25 * 2.5)^(1/3) = 6.25^(1/3) = 1.84202 (> 1: A is better)."""
    rows = frame(
        [
            ("a", "c1", 0, 5.0),
            ("a", "c1", 1, 8.0),
            ("a", "c1", 2, 4.0),
            ("b", "c1", 0, 10.0),
            ("b", "c1", 1, 10.0),
            ("b", "c1", 2, 10.0),
        ],
        TPOT,
    )
    lower = paired_ratio(rows, "a", "b", "c1", TPOT, higher_is_better=False)
    est, low, high = log_t([2.0, 1.25, 2.5])
    assert lower.ratio == pytest.approx(6.25 ** (1 / 3))
    assert lower.ratio == pytest.approx(est)
    assert (lower.low, lower.high) == (pytest.approx(low), pytest.approx(high))
    # read as higher-better the same figures give the reciprocal, bounds swapped
    higher = paired_ratio(rows, "a", "b", "c1", TPOT, higher_is_better=True)
    assert higher.ratio == pytest.approx(1 / lower.ratio)
    assert higher.low == pytest.approx(1 / lower.high)
    assert higher.high == pytest.approx(1 / lower.low)


def test_a_round_present_on_one_side_only_is_not_paired():
    """A has rounds 0..3, B lacks round 1 (A's 500 there must not count): rounds 0, 2, 3
    give 110/100, 121/110, 133.1/121 = 1.1 each: estimate 1.1 over 3 pairs."""
    rows = frame(
        [
            ("a", "c1", 0, 110.0),
            ("a", "c1", 1, 500.0),
            ("a", "c1", 2, 121.0),
            ("a", "c1", 3, 133.1),
            ("b", "c1", 0, 100.0),
            ("b", "c1", 2, 110.0),
            ("b", "c1", 3, 121.0),
        ]
    )
    pr = paired_ratio(rows, "a", "b", "c1", TOK)
    assert pr.rounds == 3
    assert pr.ratio == pytest.approx(1.1)
    assert pr.low == pytest.approx(1.1) and pr.high == pytest.approx(1.1)


def test_fewer_than_three_pairs_give_no_interval():
    """Two rounds: ratios 1.2 and 1.5, estimate sqrt(1.8) = 1.34164, no interval."""
    rows = frame(
        [
            ("a", "c1", 0, 120.0),
            ("a", "c1", 1, 150.0),
            ("b", "c1", 0, 100.0),
            ("b", "c1", 1, 100.0),
        ]
    )
    pr = paired_ratio(rows, "a", "b", "c1", TOK)
    assert pr.rounds == 2
    assert pr.ratio == pytest.approx(math.sqrt(1.8))
    assert pr.low is None and pr.high is None
    assert pr.significant is None and pr.worse is None


def test_one_pair_and_no_pair():
    rows = frame([("a", "c1", 0, 150.0), ("b", "c1", 0, 100.0), ("b", "c1", 1, 90.0)])
    one = paired_ratio(rows, "a", "b", "c1", TOK)
    assert one.rounds == 1 and one.ratio == pytest.approx(1.5) and one.low is None
    none = paired_ratio(rows, "a", "b", "c2", TOK)  # no row at c2
    assert none.rounds == 0 and math.isnan(none.ratio)
    assert none.low is None and none.high is None and none.significant is None
    absent = paired_ratio(rows, "a", "b", "c1", "request_goodput_per_s")  # no column
    assert absent.rounds == 0 and math.isnan(absent.ratio)


def test_non_positive_and_missing_figures_are_dropped():
    """Rounds 1 (A = 0), 2 (B negative) and 4 (A missing) leave rounds 0, 3, 5 with
    ratios 1.2, 1.25, 1.3: the three-round case of the module docstring."""
    rows = frame(
        [
            ("a", "c1", 0, 120.0),
            ("b", "c1", 0, 100.0),
            ("a", "c1", 1, 0.0),
            ("b", "c1", 1, 100.0),
            ("a", "c1", 2, 100.0),
            ("b", "c1", 2, -5.0),
            ("a", "c1", 3, 250.0),
            ("b", "c1", 3, 200.0),
            ("a", "c1", 4, float("nan")),
            ("b", "c1", 4, 100.0),
            ("a", "c1", 5, 65.0),
            ("b", "c1", 5, 50.0),
        ]
    )
    pr = paired_ratio(rows, "a", "b", "c1", TOK)
    est, low, high = log_t([1.2, 1.25, 1.3])
    assert pr.rounds == 3
    assert (pr.ratio, pr.low, pr.high) == (
        pytest.approx(est),
        pytest.approx(low),
        pytest.approx(high),
    )


def test_a_significantly_worse_variant():
    """A at 0.8 of B in every round (B = 100, 50, 200): interval [0.8, 0.8], worse."""
    b = [100.0, 50.0, 200.0]
    rows = frame(
        [("a", "c1", r, 0.8 * v) for r, v in enumerate(b)]
        + [("b", "c1", r, v) for r, v in enumerate(b)]
    )
    pr = paired_ratio(rows, "a", "b", "c1", TOK)
    assert pr.ratio == pytest.approx(0.8)
    assert pr.significant is False and pr.worse is True


def test_round_values_by_round_positive_only():
    rows = frame(
        [
            ("a", "c1", 3, 7.0),
            ("a", "c1", 0, 5.0),
            ("a", "c1", 1, 0.0),
            ("a", "c1", 2, -1.0),
            ("a", "c2", 0, 11.0),
            ("b", "c1", 0, 13.0),
        ]
    )
    got = round_values(rows, "a", "c1", TOK)
    assert got.to_dict() == {0: 5.0, 3: 7.0}
    assert round_values(rows, "a", "c4", TOK).empty
    assert round_values(rows, "z", "c1", TOK).empty
    assert round_values(rows, "a", "c1", TPOT).empty  # no such column


def test_round_values_reads_csv_text():
    """rounds.csv read back may hold numbers as text and rounds as floats."""
    rows = pd.DataFrame(
        {
            "variant": ["a", "a"],
            "tier": ["c1", "c1"],
            "round": [0.0, 1.0],
            TOK: ["12.5", "oops"],
        }
    )
    assert round_values(rows, "a", "c1", TOK).to_dict() == {0: 12.5}
