"""Intervals and thin percentiles as the report and the terminal print them."""

from __future__ import annotations

import math

import pandas as pd
from rich.console import Console

from trtbench.commands.terminal import comparison_table
from trtbench.profiling.report.comparison import tier_table
from trtbench.profiling.report.markdown import TIER_TABLE, markdown_table
from trtbench.profiling.report.uncertainty import (
    interval_of,
    interval_text,
    thin_notes,
    thin_text,
    with_speedup_text,
)

NAN = float("nan")


def test_interval_and_thin_texts():
    assert interval_text(1.2134, 1.1, 1.3249) == "1.21x [1.10, 1.32]"
    assert interval_text(1.2134, NAN, NAN) == "1.21x"
    assert interval_text(NAN, 1.0, 2.0) == "-"
    assert thin_text(41.23, 12, 20) == "41.2 (n=12, thin)"
    assert thin_text(41.23, 20, 20) == "41.2"
    assert thin_text(NAN, 3, 20) == "-"


def summary_rows() -> pd.DataFrame:
    """base and two speculative variants at c1 with three passes; one variant at c2 with
    one pass (no interval)."""
    rows = [
        # variant, tier, TPOT mean, pooled speedup, pass mean, low, high, TTFT p95 n
        ("base", "c1", 12.0, 1.0, 1.0, 1.0, 1.0, 30),
        ("med", "c1", 7.0, 1.71, 1.8, 0.94, 2.66, 30),
        ("draft", "c1", 8.0, 1.5, 1.45, 1.3, 1.6, 30),
        ("base", "c2", 12.0, 1.0, 1.0, NAN, NAN, 12),
        ("med", "c2", 6.0, 2.0, 2.0, NAN, NAN, 12),
    ]
    return pd.DataFrame(
        [
            {
                "variant": v,
                "tier": t,
                "concurrency": int(t[1:]),
                "request_rate_per_s": NAN,
                "tier_status": "complete",
                "tier_status_reason": "",
                "request_count": 30,
                "error_count": 0,
                "time_per_output_token_mean_ms": tpot,
                "output_token_throughput_tokens_per_s": 100.0,
                "time_to_first_token_p95_ms": 40.0,
                "time_to_first_token_p99_ms": 55.0,
                "time_to_first_token_count": n,
                "tpot_speedup_ratio_repeat_mean": mean,
                "tpot_speedup_ratio_ci95_low": lo,
                "tpot_speedup_ratio_ci95_high": hi,
                "pooled": pooled,
            }
            for v, t, tpot, pooled, mean, lo, hi, n in rows
        ]
    )


VARIANTS = pd.DataFrame(
    {
        "variant": ["base", "med", "draft"],
        "mode": ["baseline", "medusa", "draft_target"],
    }
)


def test_per_tier_table_prints_the_interval_or_the_pooled_ratio():
    tiers = tier_table(summary_rows(), VARIANTS, "base").set_index(["variant", "tier"])
    # pass mean with its interval where there is one
    assert tiers.loc[("med", "c1"), "speedup_text"] == "1.80x [0.94, 2.66]"
    # one pass: the pooled ratio 12 / 6 = 2 (add_speedups), no interval
    assert tiers.loc[("med", "c2"), "speedup_text"] == "2.00x"
    assert tiers.loc[("med", "c2"), "ttft_p95_text"] == "40.0 (n=12, thin)"
    assert tiers.loc[("med", "c1"), "ttft_p95_text"] == "40.0"
    # p99 needs 100 samples: 30 and 12 are both thin
    assert tiers.loc[("med", "c1"), "ttft_p99_text"] == "55.0 (n=30, thin)"
    assert tiers.loc[("med", "c2"), "ttft_p99_text"] == "55.0 (n=12, thin)"
    text = markdown_table(tiers.reset_index(), TIER_TABLE)
    assert "1.80x [0.94, 2.66]" in text and "40.0 (n=12, thin)" in text
    assert "55.0 (n=30, thin)" in text


def test_thin_notes_name_p95_and_p99_tiers():
    notes = thin_notes(tier_table(summary_rows(), VARIANTS, "base"))
    # p95 (20): only the c2 rows (n = 12); p99 (100): every row, said as such (a list of
    # all five would say nothing)
    assert len(notes) == 2
    assert notes[0].startswith("TTFT p95") and "`med` c2" in notes[0]
    assert "`med` c1" not in notes[0]
    assert notes[1].startswith("TTFT p99") and "every (variant, tier) (5)" in notes[1]
    assert "`base` c2" not in notes[1] and "`*_p99_n_ok`" in notes[1]


def test_interval_rows_for_error_bars():
    tiers = tier_table(summary_rows(), VARIANTS, "base")
    med = tiers[tiers["variant"] == "med"].reset_index(drop=True)
    rows, low, high = interval_of(med, "speedup_ratio")
    assert list(rows) == [0] and low[0] == 0.94 and high[0] == 2.66
    assert interval_of(med, "no_such_column") is None


def test_terminal_table_prints_speedup_with_interval():
    summary = summary_rows().rename(columns={"pooled": "tpot_speedup_ratio"})
    texts = with_speedup_text(summary)["tpot_speedup_text"]
    assert list(texts[:3]) == [
        "1.00x [1.00, 1.00]",
        "1.80x [0.94, 2.66]",
        "1.45x [1.30, 1.60]",
    ]
    assert texts[4] == "2.00x"
    console = Console(width=300, record=True)
    console.print(comparison_table(summary))
    assert "1.80x [0.94, 2.66]" in console.export_text()
    assert math.isnan(summary.loc[4, "tpot_speedup_ratio_ci95_low"])
