"""The answer names ties, and recommendation.json says what an open comparison could not
tell apart (hand-made margins: the decisions are given, the text is checked)."""

from __future__ import annotations

import dataclasses

from trtbench.profiling.report.margins import OBJECTIVE_INFO, Margin
from trtbench.profiling.report.recommendation import Recommendation, TierChoice
from trtbench.profiling.report.recommendation_config import Policy
from trtbench.profiling.report.recommendation_text import answer, recommendation_json


def margin(over: str, ratio: float, low: float, high: float, decision: str) -> Margin:
    return Margin(
        over, ratio, low, high, low > 1.0, "3 interleaved rounds", 3, decision
    )


TIERS = [  # tier, concurrency, tok/s, runner-up (ratio, low, high, class), over baseline
    ("c1", 120.0, (1.02, 0.97, 1.04, "equivalent"), (1.4, 1.2, 1.6)),
    ("c4", 300.0, (1.06, 0.93, 1.21, "open"), (1.2, 1.1, 1.3)),
    ("c8", 500.0, (1.01, 0.99, 1.03, "equivalent"), (1.1, 1.02, 1.2)),
]


def rec() -> Recommendation:
    tiers = tuple(
        TierChoice(
            tier,
            int(tier[1:]),
            "ngram",
            value,
            margin("medusa", *runner_up),
            margin("base", *base, "better"),
        )
        for tier, value, runner_up, base in TIERS
    )
    return Recommendation(
        OBJECTIVE_INFO["output_tok_s"],
        "base",
        tiers,
        (),
        (),
        (),
        "ngram",
        "best at 3 tiers",
    )


POLICY = Policy("ngram", "ngram", 4, None, None)


def test_the_answer_names_the_runner_up_it_is_tied_with_and_where():
    text = answer(rec(), POLICY)
    assert "`ngram` or `medusa`: within ±5 % at c1, c8" in text
    assert "c4" not in text.split("within ±5 %")[1]  # c4 is open, not a tie


def test_an_open_margin_in_the_json_says_what_it_could_not_tell_apart():
    data = recommendation_json(rec(), POLICY, [])
    c4 = data["tiers"][1]
    # the interval [0.93, 1.21] as changes: -7.0 % and +21.0 %
    assert c4["runner_up"]["resolution"] == (
        "a difference between -7.0 % and +21.0 % could not be told apart"
    )
    assert c4["over_baseline"]["resolution"] is None  # decided: better
    assert data["tiers"][0]["runner_up"]["resolution"] is None  # decided: equivalent


def test_an_open_margin_of_a_race_reads_undecided_at_budget():
    from trtbench.profiling.report.recommendation_text import recommendation_lines

    r = rec()
    raced = Margin("medusa", 1.06, 0.93, 1.21, False, "race", 8, "open", 0.978)
    c4 = dataclasses.replace(r.tiers[1], runner_up=raced)
    text = "\n".join(
        recommendation_lines(dataclasses.replace(r, tiers=(r.tiers[0], c4)), POLICY, [])
    )
    assert (
        "+6.0 % [-7.0, +21.0] over `medusa`, undecided at budget: a difference between "
        "-7.0 % and +21.0 % could not be told apart"
    ) in text
    # a fixed design's open margin (level 0.95) keeps its wording
    assert "not significant, undecided: a difference between" not in text


def test_the_answer_names_what_it_could_not_use():
    r = dataclasses.replace(
        rec(),
        excluded=(
            "`ngram-k4` c1: failed (not measured from round 1 on: the server had died)",
            "`ngram-k4` c2: partial (not measured from round 2 on: the server had died)",
            "`medusa` c8: interrupted (SIGINT)",
        ),
    )
    assert answer(r, POLICY).endswith(
        " Not used, not complete: `ngram-k4` at c1 (failed), c2 (partial); "
        "`medusa` at c8 (interrupted)."
    )
    assert "Not used" not in answer(rec(), POLICY)  # every row complete: nothing to say
