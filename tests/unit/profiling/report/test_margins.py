"""Margins from rounds.csv (``profiling/report/margins.py``) and the crossover they give
(``recommendation.crossover_of``), on hand-made rows.

Every round ratio below is spec / base at one tier (output tok/s, base 100 tok/s in each
round, so spec's figure is 100 x the ratio). Estimates are geometric means; intervals the
95 % t-interval of the logs, t(0.975, 2) = 4.3026527 (worked out in test_paired.py's
docstring for 1.2, 1.25, 1.3):

    tier  round ratios         estimate  95 % interval       significant
    c1    1.50 1.60 1.55       1.54946   [1.43010, 1.67879]  yes
    c2    0.80 1.40 1.00       1.03850   [0.51580, 2.09090]  no (point > 1)
    c4    1.30 1.35 1.40       1.34938   [1.23071, 1.47949]  yes
    c8    0.70 0.72 0.74       0.71981   [0.67181, 0.77125]  no, significantly worse

Crossover of spec: the point margin is >= 1 at c1, c2, c4 and below 1 at c8, so it pays up
to 4 and stops at 8; c2's margin is not significant, so the leading run of significant
tiers ends at c1: significant up to 1 (the crossover's low bound), and the first tier after
it that is significantly worse is c8 (its high bound). The point estimate crosses 1 between
c4 and c8: 2^(2 + (m4 - 1) / (m4 - m8) * (3 - 2)) with m4 = 1.34938, m8 = 0.71981:
2^(2 + 0.34938 / 0.62957) = 2^2.55495 = 5.8759.
"""

from __future__ import annotations

import math
from functools import partial

import numpy as np
import pandas as pd
import pytest

from trtbench.profiling.report.margins import OBJECTIVE_INFO, margin_of
from trtbench.profiling.report.recommendation import crossover_of

TOK = OBJECTIVE_INFO["output_tok_s"]
TPOT = OBJECTIVE_INFO["tpot_p50"]
RATIOS = {
    1: (1.50, 1.60, 1.55),
    2: (0.80, 1.40, 1.00),
    4: (1.30, 1.35, 1.40),
    8: (0.70, 0.72, 0.74),
}


def geo(values: tuple[float, ...]) -> float:
    return math.prod(values) ** (1 / len(values))


def rounds_frame(ratios: dict[int, tuple[float, ...]]) -> pd.DataFrame:
    """rounds.csv rows: base 100 tok/s each round, spec 100 x the round's ratio."""
    rows = []
    for c, rs in ratios.items():
        for r, ratio in enumerate(rs):
            rows.append(
                {
                    "variant": "base",
                    "tier": f"c{c}",
                    "round": r,
                    "output_tokens_per_s": 100.0,
                }
            )
            rows.append(
                {
                    "variant": "spec",
                    "tier": f"c{c}",
                    "round": r,
                    "output_tokens_per_s": 100.0 * ratio,
                }
            )
    return pd.DataFrame(rows)


def row(variant: str, tier: str, value: float, **extra: object) -> pd.Series:
    """A row of ``recommendation.objective_frame`` (no summary intervals)."""
    return pd.Series(
        {
            "variant": variant,
            "tier": tier,
            "value": value,
            "ratio_low": np.nan,
            "ratio_high": np.nan,
            "value_low": np.nan,
            "value_high": np.nan,
            "repeats_count": 3,
            **extra,
        }
    )


@pytest.mark.parametrize(
    ("design", "words"),
    [
        ("interleaved", "interleaved rounds"),
        ("rounds", "rounds: both sides measured"),
        ("sequential", "sequential passes"),
    ],
)
def test_margin_over_rounds_is_the_paired_ratio(design, words):
    """c4: the pooled values say 5.0 (500 / 100); the margin is the paired ratio over the
    three rounds instead: 1.34938 in [1.23071, 1.47949]."""
    m = margin_of(
        row("spec", "c4", 500.0),
        row("base", "c4", 100.0),
        TOK,
        True,
        rounds=rounds_frame(RATIOS),
        design=design,
    )
    assert m.over == "base"
    assert m.ratio == pytest.approx(geo(RATIOS[4]))
    assert m.ratio == pytest.approx(1.34938, abs=1e-5)
    assert m.low == pytest.approx(1.23071, abs=1e-5)
    assert m.high == pytest.approx(1.47949, abs=1e-5)
    assert m.significant is True
    assert m.rounds == 3
    assert words in m.basis
    assert "over 3" in m.basis and "output tok/s" in m.basis


def test_margin_over_rounds_not_significant_and_worse():
    rounds = rounds_frame(RATIOS)
    c2 = margin_of(
        row("spec", "c2", 1.0),
        row("base", "c2", 1.0),
        TOK,
        False,
        rounds=rounds,
        design="interleaved",
    )
    assert c2.ratio == pytest.approx(1.12 ** (1 / 3))  # 0.8 * 1.4 * 1.0 = 1.12
    assert c2.low == pytest.approx(0.51580, abs=1e-5)
    assert c2.high == pytest.approx(2.09090, abs=1e-4)
    assert c2.significant is False
    c8 = margin_of(
        row("spec", "c8", 1.0),
        row("base", "c8", 1.0),
        TOK,
        False,
        rounds=rounds,
        design="interleaved",
    )
    assert c8.ratio == pytest.approx(0.71981, abs=1e-5)
    assert c8.high == pytest.approx(0.77125, abs=1e-5)
    assert c8.significant is False


def test_lower_is_better_margin_over_rounds():
    """TPOT p50: spec 5, 8, 4 ms against base 10 ms in each round: base / spec = 2, 1.25,
    2.5, margin 6.25^(1/3) = 1.84202."""
    rounds = pd.DataFrame(
        {
            "variant": ["spec"] * 3 + ["base"] * 3,
            "tier": ["c1"] * 6,
            "round": [0, 1, 2] * 2,
            "tpot_p50_ms": [5.0, 8.0, 4.0, 10.0, 10.0, 10.0],
        }
    )
    m = margin_of(
        row("spec", "c1", 5.0),
        row("base", "c1", 10.0),
        TPOT,
        True,
        rounds=rounds,
        design="interleaved",
    )
    assert m.ratio == pytest.approx(6.25 ** (1 / 3))
    assert m.rounds == 3 and "TPOT p50" in m.basis


def test_fewer_than_three_rounds_no_interval():
    """Two rounds: no interval; the margin is the pooled A / B = 130 / 100."""
    two = rounds_frame({4: (1.30, 1.35)})
    m = margin_of(
        row("spec", "c4", 130.0),
        row("base", "c4", 100.0),
        TOK,
        True,
        rounds=two,
        design="interleaved",
    )
    assert m.significant is None
    assert m.low is None and m.high is None
    assert m.basis.startswith("no interval")
    assert "2 paired round(s)" in m.basis
    assert m.rounds == 2
    assert m.ratio == pytest.approx(1.3)


def test_a_row_indexed_by_tier_finds_its_rounds():
    """crossover_of passes rows whose tier is their index name, not a column."""
    best = row("spec", "ignored", 1.0).drop("tier").rename("c1")
    other = row("base", "ignored", 1.0).drop("tier").rename("c1")
    m = margin_of(best, other, TOK, True, rounds=rounds_frame(RATIOS))
    assert m.ratio == pytest.approx(geo(RATIOS[1])) and m.rounds == 3


def objective_rows(ratios: dict[int, tuple[float, ...]]) -> pd.DataFrame:
    """``objective_frame`` rows of base and spec, values the rounds' arithmetic means."""
    rows = []
    for c, rs in ratios.items():
        for variant, value in (("base", 100.0), ("spec", 100.0 * sum(rs) / len(rs))):
            rows.append(
                {
                    "variant": variant,
                    "tier": f"c{c}",
                    "concurrency": float(c),
                    "tier_status": "complete",
                    "value": value,
                    "ratio_low": np.nan,
                    "ratio_high": np.nan,
                    "value_low": np.nan,
                    "value_high": np.nan,
                    "repeats_count": len(rs),
                }
            )
    return pd.DataFrame(rows)


def test_crossover_caps_on_the_point_margin_reports_significance_beside():
    """The module docstring's case: pays up to 4 (c2 is > 1 but not significant and does
    not end the run), stops at 8, significant up to 1, interval [1, 8], estimate 5.8759."""
    rounds = rounds_frame(RATIOS)
    margin = partial(margin_of, rounds=rounds, design="interleaved")
    cross = crossover_of(objective_rows(RATIOS), "spec", TOK, "base", margin)
    assert cross.variant == "spec"
    assert cross.pays_up_to == 4.0
    assert cross.stops_at == 8.0
    assert cross.significant_up_to == 1.0
    # c4's rounds 1.30, 1.35, 1.40: ln sd 0.037, t(2) 4.303 -> [1.23, 1.48], above 1
    assert cross.significant_at == ("c1", "c4")
    assert (cross.low, cross.high) == (1.0, 8.0)
    m4, m8 = geo(RATIOS[4]), geo(RATIOS[8])
    assert cross.estimate == pytest.approx(2 ** (2 + (m4 - 1) / (m4 - m8)))
    assert cross.estimate == pytest.approx(5.8759, abs=1e-3)
    assert "interleaved rounds" in cross.basis


def test_crossover_significant_nowhere_still_pays():
    """c1's rounds 0.9, 1.5, 1.2 (point 1.62^(1/3) = 1.1743 > 1, interval reaching below
    1) and c2's 1.1 each (significant): the leading significant run is empty, so
    significant_up_to is None, while the point margin pays up to 2 and nothing stops it."""
    ratios = {1: (0.9, 1.5, 1.2), 2: (1.1, 1.1, 1.1)}
    margin = partial(margin_of, rounds=rounds_frame(ratios), design="interleaved")
    cross = crossover_of(objective_rows(ratios), "spec", TOK, "base", margin)
    assert cross.pays_up_to == 2.0
    assert cross.stops_at is None and cross.estimate is None
    assert cross.significant_up_to is None
    assert cross.significant_at == ("c2",)  # what the crossover line names (issue 51)
    assert cross.low is None and cross.high is None


def test_crossover_without_intervals_uses_the_point_margin_only():
    """Two rounds per tier: no interval anywhere. Point margins are the pooled means' ratio:
    c1 1.55 / 1, c4 1.325, c8 0.71 -> pays up to 4, stops at 8; no significance."""
    ratios = {1: (1.5, 1.6), 4: (1.3, 1.35), 8: (0.7, 0.72)}
    margin = partial(margin_of, rounds=rounds_frame(ratios), design="interleaved")
    cross = crossover_of(objective_rows(ratios), "spec", TOK, "base", margin)
    assert (cross.pays_up_to, cross.stops_at) == (4.0, 8.0)
    assert cross.significant_up_to is None and cross.significant_at == ()
    assert cross.low is None and cross.high is None
    assert cross.basis.startswith("no interval")
    assert cross.estimate == pytest.approx(2 ** (2 + 0.325 / (1.325 - 0.71)))


def test_a_margin_with_the_instance_term_is_wider_and_says_so():
    from trtbench.profiling.loadtest.stats.decisions import LookSchedule

    plain = margin_of(
        row("spec", "c4", 500.0),
        row("base", "c4", 100.0),
        TOK,
        True,
        rounds=rounds_frame(RATIOS),
        design="interleaved",
    )
    with_term = margin_of(
        row("spec", "c4", 500.0),
        row("base", "c4", 100.0),
        TOK,
        True,
        rounds=rounds_frame(RATIOS),
        design="interleaved",
        schedule=LookSchedule(instance_sd=0.05),
    )
    assert with_term.ratio == pytest.approx(plain.ratio)
    assert with_term.low < plain.low and with_term.high > plain.high
    assert "server-instance SD of 5.0%" in with_term.basis
    assert "server-instance" not in plain.basis


@pytest.mark.parametrize(
    "level, text",
    [
        (0.95, "95 %"),
        (0.9947916, "99.5 %"),
        (0.99965, "99.97 %"),
        (0.999996, "99.9996 %"),
    ],
)
def test_a_level_never_reads_100_percent(level, text):
    from trtbench.profiling.report.margins import level_text

    assert (
        level_text(level) == text
    )  # a finite interval is below 100 % (rounded up: wrong)
