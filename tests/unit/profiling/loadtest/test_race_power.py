"""``scripts/race_power.py``: the chance that a race decides a comparison.

The simulated chance is checked against a closed form: a race of 3 rounds looks once, at
95 % (the whole α at t = 1), and with no equivalence margin and no instance term it decides
exactly when the Student-t statistic of the 3 log ratios passes t_{0.975, 2} either way —
a noncentral t with 2 degrees of freedom and noncentrality d·√3 / σ (scipy's ``nct``, an
implementation independent of the script's simulation and of trtbench's intervals).
"""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

SCRIPT = Path(__file__).resolve().parents[4] / "scripts" / "race_power.py"


@pytest.fixture(scope="module")
def rp():
    spec = importlib.util.spec_from_file_location("race_power_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


@pytest.mark.parametrize("diff", [0.0, 0.1, 0.2])
def test_one_look_matches_the_noncentral_t(rp, diff):
    sd, runs = 0.1, 4000
    q = stats.t.ppf(0.975, 2)
    nc = diff * math.sqrt(3) / sd
    expected = stats.nct.sf(q, 2, nc) + stats.nct.cdf(-q, 2, nc)
    got = rp.chance_decided(
        diff, sd, 3, instance_sd=0.0, restart_every=None, margin=0.0, runs=runs
    )
    se = math.sqrt(expected * (1 - expected) / runs)
    assert abs(got - expected) < 4 * se + 1e-9, (got, expected)


def test_a_race_of_three_rounds_looks_once_at_the_whole_alpha(rp):
    schedule = rp.race_schedule(3, 0.0, None)
    assert schedule.made == ((3, 1.0),)
    assert schedule.level_at(3) == pytest.approx(0.95)
    # 12 rounds: looks at 3, 6, 9, 12; the last at t = 1 holds at least half of α.
    twelve = rp.race_schedule(12, 0.036, 3)
    assert [n for n, _ in twelve.made] == [3, 6, 9, 12]
    assert twelve.alpha_at(12) >= 0.025


def test_pooled_within_sd_by_hand(rp):
    # Deviations from each block's mean: -1, 0, 1 and -1, 1; 4 / (5 - 2) degrees.
    logs = np.array([1.0, 2.0, 3.0, 10.0, 12.0])
    blocks = np.array([0, 0, 0, 1, 1])
    assert rp.pooled_within_sd(logs, blocks) == pytest.approx(math.sqrt(4 / 3))
    # No block holds two values: the plain SD.
    assert rp.pooled_within_sd(logs, np.arange(5)) == pytest.approx(
        np.std(logs, ddof=1)
    )
