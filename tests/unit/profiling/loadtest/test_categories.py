"""``category_table``: acceptance and TPOT per prompt category, on a hand-worked tier.

Four requests at c1: the baseline and an n-gram variant each answer one ``chat`` and one
``code`` prompt with 10 tokens (1 in the first response). Worked by hand:

- baseline: 9 more one-token responses 2 ms apart → TPOT 18 / 9 = 2 ms (both).
- n-gram, chat: 9 one-token steps 1.5 ms apart, each proposing 2 drafts and accepting none →
  acceptance length 1 + 0/9 = 1, rate 0/18 = 0, TPOT 13.5 / 9 = 1.5 ms, speedup 2/1.5.
- n-gram, code: 3 steps of 3 tokens 2 ms apart, each accepting both drafts → length
  1 + 6/3 = 3, rate 6/6 = 1, TPOT 6 / 9 ms, speedup 2 / (6/9) = 3.
"""

from __future__ import annotations

import pandas as pd
import pytest

from tests.support.streams import stream
from trtbench.core.export import records_to_frame
from trtbench.core.records import RequestRecord, ResponseRecord
from trtbench.profiling.loadtest.stats.categories import (
    category_acceptance_table,
    category_table,
)

MS = 1_000_000


def served(
    variant: str,
    category: str,
    steps: list[tuple[int, int, int]],
    gap_ms: float,
    repeat: int = 0,
) -> tuple[RequestRecord, list[ResponseRecord]]:
    """One request: a 1-token first response, then ``steps`` of (tokens, drafts, accepted)
    every ``gap_ms``; the baseline's responses carry no counts."""
    if variant == "base":
        steps = [(n, None, None) for n, _, _ in steps]
    first = (1, None, None) if variant == "base" else (1, 0, 0)
    return stream(
        variant,
        f"{variant}-{category}-{repeat}",
        [first, *steps],
        gap_ns=round(gap_ms * MS),
        category=category,
        repeat=repeat,
    )


def frames() -> tuple[pd.DataFrame, pd.DataFrame]:
    parts = [
        served("base", "chat", [(1, 0, 0)] * 9, 2.0),
        served("base", "code", [(1, 0, 0)] * 9, 2.0),
        served("ng", "chat", [(1, 2, 0)] * 9, 1.5),
        served("ng", "code", [(3, 2, 2)] * 3, 2.0),
    ]
    requests = records_to_frame([r for r, _ in parts])
    responses = records_to_frame([x for _, rs in parts for x in rs])
    return requests, responses


def test_each_category_gets_its_own_acceptance_tpot_and_speedup():
    requests, responses = frames()
    table = category_table(requests, responses, "base").set_index(
        ["variant", "category"]
    )
    assert table.loc[("base", "chat"), "time_per_output_token_p50_ms"] == pytest.approx(
        2.0
    )
    assert pd.isna(table.loc[("base", "chat"), "tpot_speedup_p50_ratio"])
    chat, code = table.loc[("ng", "chat")], table.loc[("ng", "code")]
    assert chat["acceptance_length_tokens"] == pytest.approx(1.0)
    assert chat["draft_acceptance_rate_ratio"] == pytest.approx(0.0)
    assert chat["time_per_output_token_p50_ms"] == pytest.approx(1.5)
    assert chat["tpot_speedup_p50_ratio"] == pytest.approx(2.0 / 1.5)
    assert code["acceptance_length_tokens"] == pytest.approx(3.0)
    assert code["draft_acceptance_rate_ratio"] == pytest.approx(1.0)
    assert code["time_per_output_token_p50_ms"] == pytest.approx(6.0 / 9)
    assert code["tpot_speedup_p50_ratio"] == pytest.approx(3.0)
    assert code["spec_decode_counts_source"] == "server_per_step"
    assert set(table["requests_count"]) == {1}
    assert set(table["concurrency"]) == {1}


def test_no_category_no_rows_and_the_window_is_respected():
    requests, responses = frames()
    assert category_table(requests.assign(category=""), responses, "base").empty
    outside = requests["category"] == "chat"  # only code requests in the window
    table = category_table(requests, responses, "base", in_window=~outside)
    assert sorted(table["category"].unique()) == ["code"]


def test_the_speedup_paired_over_rounds_has_its_interval():
    """Three rounds: the baseline's TPOT is 2 ms in each, n-gram's 1, 1 and 0.5 ms, so the
    round ratios are 2, 2, 4: geometric mean 2^(4/3); on the log scale the values are a, a,
    2a (a = ln 2) with sd a/sqrt(3), so the 95 % half-width is t(0.975, 2) * a / 3."""
    import math

    from scipy import stats

    parts = [served("base", "code", [(1, 0, 0)] * 9, 2.0, r) for r in range(3)]
    parts += [
        served("ng", "code", [(1, 2, 1)] * 9, gap, r)
        for r, gap in enumerate((1.0, 1.0, 0.5))
    ]
    requests = records_to_frame([r for r, _ in parts])
    responses = records_to_frame([x for _, rs in parts for x in rs])
    row = category_table(requests, responses, "base").set_index("variant").loc["ng"]
    a = math.log(2)
    half = stats.t.ppf(0.975, 2) * a / 3
    assert row["paired_rounds_count"] == 3
    assert row["tpot_speedup_paired_ratio"] == pytest.approx(2 ** (4 / 3))
    assert row["tpot_speedup_ci95_low_ratio"] == pytest.approx(
        math.exp(4 * a / 3 - half)
    )
    assert row["tpot_speedup_ci95_high_ratio"] == pytest.approx(
        math.exp(4 * a / 3 + half)
    )
    # pooled over the rounds, the median TPOT is 1 ms (1, 1, 0.5 per request): 2x
    assert row["tpot_speedup_p50_ratio"] == pytest.approx(2.0)


def test_fewer_than_three_rounds_state_no_interval():
    requests, responses = frames()
    table = category_table(requests, responses, "base").set_index(
        ["variant", "category"]
    )
    assert table.loc[("ng", "code"), "paired_rounds_count"] == 1
    assert pd.isna(table.loc[("ng", "code"), "tpot_speedup_ci95_low_ratio"])


def test_requests_from_before_the_repeat_column_count_as_one_pass():
    requests, responses = frames()
    table = category_table(requests.drop(columns="repeat"), responses, "base")
    row = table.set_index(["variant", "category"]).loc[("ng", "code")]
    assert row["paired_rounds_count"] == 1
    assert row["tpot_speedup_p50_ratio"] == pytest.approx(3.0)


def test_each_row_carries_its_tiers_status():
    requests, responses = frames()
    statuses = {("ng", "c1"): ("partial", "server died")}
    table = category_table(requests, responses, "base", statuses=statuses)
    status = table.set_index(["variant", "category"])["tier_status"]
    assert status[("ng", "code")] == status[("ng", "chat")] == "partial"
    assert status[("base", "code")] == "complete"


def test_request_throughput_and_its_speedup_per_category():
    """Each request is sent at 100 ns and ends at its last response (1000 ns + the gaps): the
    baseline's 10 tokens take 18 ms + 900 ns; n-gram's code request 6 ms + 900 ns (4
    responses 2 ms apart), so its throughput speedup is their ratio (variant / baseline)."""
    requests, responses = frames()
    table = category_table(requests, responses, "base").set_index(
        ["variant", "category"]
    )
    base_s, code_s = (18 * MS + 900) / 1e9, (6 * MS + 900) / 1e9
    base, code = table.loc[("base", "code")], table.loc[("ng", "code")]
    assert base["request_output_throughput_p50_tokens_per_s"] == pytest.approx(
        10 / base_s
    )
    assert code["request_output_throughput_p50_tokens_per_s"] == pytest.approx(
        10 / code_s
    )
    assert code["request_throughput_speedup_p50_ratio"] == pytest.approx(
        base_s / code_s
    )
    assert pd.isna(base["request_throughput_speedup_p50_ratio"])
    # one round: no interval
    assert pd.isna(code["request_throughput_speedup_ci95_low_ratio"])


def test_per_position_rates_and_histogram_per_category():
    """n-gram's chat request: 9 verify steps proposing 2 drafts, none accepted → rate 0 at
    both positions, all 9 steps in histogram bin 0. Its code request: 3 steps accepting both
    → rate 1 at positions 1 and 2, all 3 steps in bin 2. The baseline proposes nothing."""
    requests, responses = frames()
    table = category_acceptance_table(requests, responses)
    assert set(table["variant"]) == {"ng"}
    rows = table.set_index(["category", "kind", "draft_position"])
    for category, steps, hits in (("chat", 9, 0), ("code", 3, 3)):
        for j in (1, 2):
            row = rows.loc[(category, "position", j)]
            assert (row["steps_count"], row["hits_count"]) == (steps, hits)
            assert row["value_ratio"] == pytest.approx(hits / steps)
    assert rows.loc[("chat", "histogram", 0), "hits_count"] == 9
    assert rows.loc[("code", "histogram", 2), "hits_count"] == 3
    assert rows.loc[("code", "histogram", 0), "hits_count"] == 0
    outside = requests["category"] == "chat"
    only_code = category_acceptance_table(requests, responses, ~outside)
    assert set(only_code["category"]) == {"code"}
    assert category_acceptance_table(requests.assign(category=""), responses).empty
