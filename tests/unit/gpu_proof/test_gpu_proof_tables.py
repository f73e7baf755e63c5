"""The GPU proof's pure pieces on hand-worked cases: timing rows, repeats and their interval,
speedups, graphs-slower-than-eager flags, the tie margin and the lossless rule."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from tests.gpu.proof.tables import (
    GRAPHS_NOISE,
    GRAPHS_SLOWER,
    compare_outputs,
    repeated_timing_row,
    tie_margin,
    timing_row,
    with_graph_flags,
    with_speedups,
)


def test_timing_row_counts_full_batch_steps_only():
    # batch 2: three full steps (2 rows) of 10, 20, 30 ms emitting 2, 4, 6 tokens; then a
    # tail step of one row (5 ms, 1 token) that the full-batch figures leave out.
    ms = 1_000_000
    row = timing_row(
        [2, 2, 2, 1], [10 * ms, 20 * ms, 30 * ms, 5 * ms], [2, 4, 6, 1], 2, 7 * ms
    )
    assert row["full_batch_steps"] == 3
    assert row["full_batch_decode_ns"] == 60 * ms
    assert row["full_batch_tokens"] == 12
    assert row["step_ms_mean"] == pytest.approx(20.0)
    assert row["step_ms_median"] == pytest.approx(20.0)
    assert row["tokens_per_step"] == pytest.approx(4.0)
    assert row["output_tok_s"] == pytest.approx(12 / 0.060)  # 200 tok/s
    assert row["all_steps"] == 4
    assert row["all_decode_tok_s"] == pytest.approx(13 / 0.065)
    assert row["first_iteration_ms"] == pytest.approx(7.0)


def test_speedup_is_relative_to_the_same_dtype_batch_and_graphs():
    frame = pd.DataFrame(
        [
            ("baseline", "float32", 1, "eager", 100.0),
            ("medusa", "float32", 1, "eager", 150.0),
            ("baseline", "float32", 1, "graphs", 400.0),
            ("medusa", "float32", 1, "graphs", 300.0),
            ("medusa", "float32", 8, "eager", 90.0),  # no baseline at batch 8
        ],
        columns=["mode", "dtype", "batch_size", "graphs", "output_tok_s"],
    )
    got = with_speedups(frame)["speedup_vs_baseline"].tolist()
    assert got[:4] == [1.0, 1.5, 1.0, 0.75]
    assert math.isnan(got[4])


@pytest.mark.parametrize(
    ("dtype", "top1", "want"),
    [
        ("float32", 12.0, 0.0),  # exact required
        ("bfloat16", 12.0, 8 * 2**-7 * 8),  # 8 <= 12 < 16: ulp 2^(3-7) = 1/16 -> 0.5
        ("bfloat16", -3.0, 8 * 2**-7 * 2),  # 2 <= 3 < 4: ulp 1/64 -> 0.125
        ("float16", 1.0, 8 * 2**-10),
    ],
)
def test_tie_margin_in_units_in_the_last_place(dtype, top1, want):
    assert tie_margin(dtype, top1) == pytest.approx(want)


def test_lossless_rule_excuses_ties_only_in_low_precision():
    reference = [[5, 6, 7, 8], [1, 2, 3, 4], [9, 9, 9, 9]]
    outputs = [[5, 6, 7, 8], [1, 2, 0, 0], [9, 3, 3, 3]]
    calls = []

    def gap_at(request, index):
        calls.append((request, index))
        return {1: (0.3, 12.0), 2: (2.0, 12.0)}[request]  # request 1 a near tie

    bf16 = compare_outputs(reference, outputs, "bfloat16", gap_at)
    assert calls == [(1, 2), (2, 1)]  # asked only at the first divergences
    assert (bf16.requests, bf16.exact, bf16.ties, bf16.mismatches) == (3, 1, 1, 1)
    assert bf16.first_divergence_min_tokens == 1
    assert bf16.min_gap_at_divergence == 0.3 and bf16.margin_at_min_gap == 0.5
    assert not bf16.lossless
    fp32 = compare_outputs(reference, outputs, "float32", gap_at)
    assert (fp32.ties, fp32.mismatches, fp32.lossless) == (0, 2, False)
    same = compare_outputs(reference, reference, "float32", gap_at)
    assert same.lossless and same.exact == 3 and same.min_gap_at_divergence is None


def test_repeats_keep_the_median_run_whole_and_its_interval():
    # three repeats of 12, 10 and 30 ms per step: the median run is the 12 ms one, and its
    # tok/s (from the same run) stays with it; the interval is 10..30.
    runs = [
        {"step_ms_mean": 12.0, "output_tok_s": 1000 / 12},
        {"step_ms_mean": 10.0, "output_tok_s": 100.0},
        {"step_ms_mean": 30.0, "output_tok_s": 1000 / 30},
    ]
    row = repeated_timing_row(runs)
    assert row["step_ms_mean"] == 12.0
    assert row["output_tok_s"] == pytest.approx(1000 / 12)
    assert (row["step_ms_low"], row["step_ms_high"], row["repeats"]) == (10.0, 30.0, 3)
    # an even count takes the lower median
    assert repeated_timing_row(runs[:2])["step_ms_mean"] == 10.0


def test_graphs_slower_than_eager_are_flagged_noise_or_cost():
    def row(mode, graphs, mean, low, high):
        return {
            "mode": mode,
            "dtype": "bfloat16",
            "batch_size": 8,
            "graphs": graphs,
            "step_ms_mean": mean,
            "step_ms_low": low,
            "step_ms_high": high,
        }

    frame = pd.DataFrame(
        [
            row("baseline", "eager", 4.0, 3.9, 4.1),
            row("baseline", "graphs", 1.0, 0.9, 1.1),  # 4x faster: no flag
            row("medusa", "eager", 5.0, 4.8, 5.4),
            row("medusa", "graphs", 5.2, 5.1, 5.3),  # slower, intervals overlap: noise
            row("eagle3", "eager", 5.0, 4.9, 5.1),
            row(
                "eagle3", "graphs", 6.0, 5.8, 6.2
            ),  # slower beyond the intervals: a cost
        ]
    )
    got = with_graph_flags(frame).set_index(["mode", "graphs"])
    assert got.loc[("baseline", "graphs"), "graphs_vs_eager"] == pytest.approx(4.0)
    assert got.loc[("baseline", "graphs"), "graphs_flag"] == ""
    assert got.loc[("medusa", "graphs"), "graphs_flag"] == GRAPHS_NOISE
    assert got.loc[("eagle3", "graphs"), "graphs_vs_eager"] == pytest.approx(5 / 6)
    assert got.loc[("eagle3", "graphs"), "graphs_flag"] == GRAPHS_SLOWER
    assert got.loc[("eagle3", "eager"), "graphs_flag"] == ""
