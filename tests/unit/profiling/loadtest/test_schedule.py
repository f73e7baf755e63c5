"""Tiers and send times: labels, validation, and the arrival processes' known moments."""

from __future__ import annotations

from itertools import islice

import numpy as np
import pytest

from trtbench.profiling.loadtest.workload.schedule import (
    Tier,
    interarrival_s,
    iter_send_offsets_ns,
    plan_tiers,
    send_offsets_ns,
)


def test_tiers_and_labels():
    assert [t.label for t in plan_tiers([1, 8, 16])] == ["c1", "c8", "c16"]
    tiers = plan_tiers([4], request_rate=[2.5, 10])
    assert [t.label for t in tiers] == ["r2.5", "r10"]
    assert tiers[0] == Tier(request_rate_per_s=2.5)


@pytest.mark.parametrize(
    ("concurrency", "rates"), [([0], None), ([4, -1], None), ([], None), ([1], [0.0])]
)
def test_bad_tiers_are_rejected(concurrency, rates):
    with pytest.raises(ValueError):
        plan_tiers(concurrency, rates)


def test_constant_rate_sends_every_one_over_rate():
    # 4 requests/s → one every 250 ms, the first at 0.
    offsets = send_offsets_ns(4, 4.0, "constant", np.random.default_rng(0))
    assert offsets.tolist() == [0, 250_000_000, 500_000_000, 750_000_000]


def test_poisson_has_exponential_gaps():
    gaps = interarrival_s(40_000, 5.0, "poisson", np.random.default_rng(1))
    # Exponential with mean 1/5 s: std = mean (coefficient of variation 1).
    assert gaps.mean() == pytest.approx(0.2, rel=0.02)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, rel=0.03)


@pytest.mark.parametrize("burstiness", [0.25, 4.0])
def test_gamma_burstiness_sets_the_spread(burstiness):
    gaps = interarrival_s(40_000, 2.0, "gamma", np.random.default_rng(2), burstiness)
    # Gamma(shape b, scale 1/(rate·b)): mean 1/rate, coefficient of variation 1/sqrt(b).
    assert gaps.mean() == pytest.approx(0.5, rel=0.03)
    assert gaps.std() / gaps.mean() == pytest.approx(burstiness**-0.5, rel=0.04)


def test_offsets_are_seeded_cumulative_and_start_at_zero():
    a = send_offsets_ns(2000, 3.0, "gamma", np.random.default_rng(7), 0.5)
    b = list(
        islice(iter_send_offsets_ns(3.0, "gamma", np.random.default_rng(7), 0.5), 2000)
    )
    assert a.tolist() == b  # the array is the iterator's first n (crosses a draw block)
    assert a[0] == 0 and np.all(np.diff(a) >= 0)
    c = send_offsets_ns(2000, 3.0, "gamma", np.random.default_rng(8), 0.5)
    assert a.tolist() != c.tolist()


def test_bad_arrival_arguments():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="unknown arrival"):
        interarrival_s(3, 1.0, "uniform", rng)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        interarrival_s(3, 0.0, "constant", rng)
