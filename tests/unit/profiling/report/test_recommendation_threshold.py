"""The draft-length rule's threshold by mode (recommendation_config module docstring).

Hand-worked: rates a = [0.6, 0.3, 0.15, 0.05] (P(first j drafts accepted)), K = 4.
A model drafter keeps j with a_j >= 0.5 -> K = 1; n-gram keeps j with a_j >= 0.1 -> K = 3.
Rates all below the threshold still give K = 1 (the tier was measured to pay).
"""

from __future__ import annotations

import pytest

from trtbench.profiling.report.recommendation_config import (
    accept_threshold,
    scheduled_len,
)

RATES = [0.6, 0.3, 0.15, 0.05]


@pytest.mark.parametrize(
    ("mode", "expected"),
    [("draft_target", 1), ("eagle3", 1), ("mtp", 1), ("ngram", 3)],
)
def test_scheduled_len_by_mode(mode, expected):
    assert scheduled_len(RATES, 4, accept_threshold(mode)) == expected


def test_scheduled_len_bounded_by_k_and_at_least_one():
    assert scheduled_len(RATES, 2, accept_threshold("ngram")) == 2
    assert scheduled_len([0.05, 0.01], 2, accept_threshold("ngram")) == 1
