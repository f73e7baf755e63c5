"""The objective's ratios as the report's tables state them (``profiling/report/ratios.py``):
the verdict read off the interval alone, the cell text, the tier table re-based on them and
the one table of variant pairs (hand-made margins)."""

from __future__ import annotations

import pandas as pd

from trtbench.profiling.report.margins import OBJECTIVE_INFO, Margin
from trtbench.profiling.report.ratios import (
    TierRatio,
    objective_tiers,
    open_note,
    pair_lines,
    ratio_text,
    verdict,
)

TOK = OBJECTIVE_INFO["output_tok_s"]


def m(ratio, low, high, decision="open", over="base"):
    return Margin(
        over, ratio, low, high, None if low is None else low > 1, "b", 3, decision
    )


def test_the_verdict_is_what_the_interval_supports():
    assert verdict(m(1.2, 1.01, 1.4)) == "significantly better"
    assert verdict(m(0.8, 0.7, 0.99)) == "significantly worse"
    assert verdict(m(1.1, 0.9, 1.3)) == "not significant"
    assert verdict(m(1.0, 0.97, 1.03, "equivalent")) == "equivalent (±5 %)"
    assert verdict(m(1.2, None, None)) == ""  # no interval: no claim
    assert ratio_text(m(1.2678, 1.2161, 1.3117)) == (
        "1.27x [1.22, 1.31], significantly better"
    )
    assert ratio_text(m(2.0, None, None)) == "2.00x"
    assert ratio_text(m(float("nan"), None, None)) == "-" and ratio_text(None) == "-"


def test_the_tier_table_takes_the_objective_and_keeps_tpot_by_name():
    tiers = pd.DataFrame(
        {
            "variant": ["base", "ng", "ng", "dt"],
            "tier": ["c1", "c1", "c2", "c1"],
            "tier_status": ["complete", "complete", "complete", "complete"],
            "speedup_basis": ["tpot", "tpot", "tpot", "throughput"],
            "speedup_text": ["1.00x", "1.40x [1.20, 1.60]", "0.90x", "1.10x"],
        }
    )
    ratios = [TierRatio("ng", "c1", 1.0, m(1.1, 0.9, 1.3))]
    out = objective_tiers(tiers, ratios, "base").set_index(["variant", "tier"])
    assert out.at[("ng", "c1"), "speedup_text"] == "1.10x [0.90, 1.30], not significant"
    assert out.at[("ng", "c1"), "tpot_speedup_text"] == "1.40x [1.20, 1.60]"
    assert out.at[("ng", "c1"), "speedup_ratio_ci95_low"] == 0.9
    assert out.at[("base", "c1"), "speedup_text"] == "1.00x"  # itself, no claim
    assert out.at[("ng", "c2"), "speedup_text"] == "-"  # no ratio for it
    assert out.at[("dt", "c1"), "tpot_speedup_text"] == "-"  # the throughput ratio
    assert open_note(ratios)[0].startswith("1 of 1 ratios over the baseline are not")
    assert "more rounds (`loadtest.rounds`" in open_note(ratios)[0]
    # a race: the open ratio is a dropped variant's, and more of the race's own rounds
    # would not measure it; the note says what would
    raced = open_note(ratios, by_need=True)[0]
    assert "stopped measuring a variant" in raced and "`loadtest.budget`" in raced
    assert "rounds: auto" not in raced


def test_pairs_are_one_table_of_variant_pairs_by_tier():
    pairs = [
        TierRatio("dt", "c2", 2.0, m(0.8, 0.7, 0.9, over="ng")),
        TierRatio("dt", "c1", 1.0, m(1.1, 0.9, 1.3, over="ng")),
        TierRatio("dt", "c1", 1.0, m(1.3, 1.1, 1.5, over="md")),
    ]
    lines = pair_lines(pairs, TOK)
    assert lines[0] == "### Variant against variant"
    rows = [line for line in lines if line.startswith("| ")]
    assert rows[0] == "| variants | c1 | c2 |"  # tiers by concurrency
    assert rows[1] == (
        "| `dt` / `ng` | 1.10x [0.90, 1.30], not significant "
        "| 0.80x [0.70, 0.90], significantly worse |"
    )
    assert rows[2] == "| `dt` / `md` | 1.30x [1.10, 1.50], significantly better | - |"
    assert pair_lines([], TOK) == []
