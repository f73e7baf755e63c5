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


def _rec(significant):
    from trtbench.profiling.report.recommendation import (
        OBJECTIVE_INFO,
        Margin,
        Recommendation,
        TierChoice,
    )

    objective = OBJECTIVE_INFO["output_tok_s"]
    tiers = tuple(
        TierChoice(
            f"c{c}",
            c,
            "ngram",
            100.0,
            None,
            Margin(
                "baseline",
                1.2,
                0.9 if not significant else 1.1,
                1.5,
                significant,
                "paired ratio",
            ),
        )
        for c in (1, 2)
    )
    return Recommendation(
        objective, "baseline", tiers, (), (), (), "ngram", "best at 2 of 2"
    )


def test_answer_says_when_no_margin_over_the_baseline_is_significant():
    from trtbench.profiling.report.recommendation_config import Policy
    from trtbench.profiling.report.recommendation_text import answer

    policy = Policy("ngram", "ngram", 4, None, None, ())
    weak = answer(_rec(False), policy)
    assert "by point value only" in weak and "not" not in weak.split(":")[0]
    assert "at none of those tiers is its margin over the baseline significant" in weak
    strong = answer(_rec(True), policy)
    assert strong == (
        "Serve `ngram` (n-gram) at every measured concurrency: best at 2 of 2; its margin over the "
        "baseline is significant at c1, c2 (of the 2 tiers it wins)."
    )
