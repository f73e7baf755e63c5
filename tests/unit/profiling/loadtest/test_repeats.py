"""Repeated passes, the steady-state window, thin percentiles and the token source, on
hand-made records; every expected value is worked out in the comments."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from trtbench.core.export import records_to_frame
from trtbench.core.records import RequestRecord, ResponseRecord
from trtbench.profiling.loadtest.records.outcome import TierOutcome
from trtbench.profiling.loadtest.stats.metrics import METRICS
from trtbench.profiling.loadtest.stats.sample_checks import n_ok_flags, token_sources
from trtbench.profiling.loadtest.stats.trusted_summary import summarize_trusted
from trtbench.profiling.loadtest.workload.repeats import (
    ONE_PASS_NOTE,
    merge_passes,
    t_interval,
    tier_passes,
)
from trtbench.profiling.loadtest.workload.schedule import Tier

MS = 1_000_000
S = 1_000_000_000
T975_2 = 4.302653  # t(0.975, 2 dof), from a t table


def request(
    variant: str,
    repeat: int,
    index: int,
    sent_ns: int,
    tpot_ms: float,
    *,
    tier: str = "c1",
    ttft_ms: float = 10.0,
    osl: int = 5,
    source: str = "output_ids",
) -> tuple[RequestRecord, list[ResponseRecord]]:
    """One request of ``osl`` one-token responses: the first after ``ttft_ms``, then one
    every ``tpot_ms``; so TTFT = ttft_ms, TPOT = tpot_ms, E2E = ttft + (osl − 1)·tpot."""
    times = [sent_ns + int((ttft_ms + k * tpot_ms) * MS) for k in range(osl)]
    rid = f"{variant}-{tier}-r{repeat}-{index}"
    rec = RequestRecord(
        variant=variant,
        tier=tier,
        concurrency=int(tier[1:]),
        request_rate_per_s=None,
        request_id=rid,
        task_id=f"t{index}",
        scheduled_ns=sent_ns,
        sent_ns=sent_ns,
        first_token_ns=times[0],
        last_token_ns=times[-1],
        end_ns=times[-1],
        input_tokens=4,
        requested_output_tokens=osl,
        output_tokens=osl,
        token_responses=osl,
        empty_responses=0,
        echoed_tokens=0,
        first_response_tokens=1,
        draft_tokens=None,
        accepted_draft_tokens=None,
        input_token_source="words",
        output_token_source=source,
        repeat=repeat,
        request_index=index,
    )
    resp = [
        ResponseRecord(variant, tier, rid, k, t, 1, k == osl - 1)
        for k, t in enumerate(times)
    ]
    return rec, resp


def frames(recs) -> tuple[pd.DataFrame, pd.DataFrame]:
    return (
        records_to_frame([r for r, _ in recs]),
        records_to_frame([x for _, rs in recs for x in rs]),
    )


# --- the interval ------------------------------------------------------------------------


def test_t_interval_of_three_numbers_by_hand():
    # values 1, 2, 3: mean 2, s = sqrt(((−1)² + 0² + 1²) / 2) = 1,
    # half-width t(0.975, 2) · s / sqrt(3) = 4.302653 / 1.7320508 = 2.484138
    mean, low, high, n = t_interval([1.0, 2.0, 3.0])
    assert n == 3 and mean == 2.0
    assert low == pytest.approx(2 - 2.484138, abs=1e-5)
    assert high == pytest.approx(2 + 2.484138, abs=1e-5)


def test_t_interval_needs_two_values_and_ignores_nan():
    mean, low, high, n = t_interval([5.0, float("nan")])
    assert (mean, n) == (5.0, 1) and math.isnan(low) and math.isnan(high)
    assert t_interval([])[3] == 0
    assert t_interval([4.0, 4.0])[1:3] == (
        4.0,
        4.0,
    )  # no spread: the interval is a point


# --- passes and their outcomes ------------------------------------------------------------


def test_pass_zero_keeps_the_order_later_passes_are_seeded_permutations():
    tiers = [Tier(concurrency=c) for c in (1, 2, 4, 8)]
    passes = tier_passes(tiers, 3, seed=7)
    assert [p.repeat for p in passes] == [0] * 4 + [1] * 4 + [2] * 4
    assert [p.tier for p in passes[:4]] == tiers
    for r in (1, 2):
        order = [p.index for p in passes if p.repeat == r]
        assert order == list(np.random.default_rng(7 + r).permutation(4))
        assert [p.tier for p in passes if p.repeat == r] == [tiers[i] for i in order]
    with pytest.raises(ValueError):
        tier_passes(tiers, 0, seed=0)


def test_a_later_pass_never_repeats_the_previous_order():
    tiers = [Tier(concurrency=c) for c in (1, 2, 4, 8)]
    # default_rng(1).permutation(4) is [0, 1, 2, 3], pass 0's order: rotated to [3, 0, 1, 2]
    assert list(np.random.default_rng(1).permutation(4)) == [0, 1, 2, 3]
    passes = tier_passes(tiers, 3, seed=0)
    assert [p.index for p in passes if p.repeat == 1] == [3, 0, 1, 2]
    orders = [[p.index for p in passes if p.repeat == r] for r in range(3)]
    assert orders[1] != orders[0] and orders[2] != orders[1]


def test_a_tier_is_as_bad_as_its_worst_pass_and_counts_add_up():
    outcomes = [
        TierOutcome("c1", "complete", 4, 0),
        TierOutcome("c2", "complete", 4, 1),
        TierOutcome("c1", "partial", 3, 2, 1, "server died"),
        TierOutcome("c2", "complete", 4, 0),
        TierOutcome("c1", "complete", 4, 0),
        TierOutcome("c2", "interrupted", 1, 0, 3, "stopped by SIGINT"),
    ]
    c1, c2 = merge_passes(outcomes)
    assert (c1.tier, c1.status, c1.reason) == ("c1", "partial", "server died")
    assert (c1.requests, c1.failed, c1.unfinished) == (11, 2, 1)
    assert (c2.status, c2.reason) == ("interrupted", "stopped by SIGINT")
    assert (c2.requests, c2.failed, c2.unfinished) == (9, 1, 3)
    failed_beats_partial = merge_passes(
        [
            TierOutcome("c1", "partial", 1, 0, 0, "a"),
            TierOutcome("c1", "failed", 0, 0, 0, "b"),
        ]
    )
    assert failed_beats_partial[0].status == "failed"


# --- summary over passes ------------------------------------------------------------------


def three_passes():
    """base TPOT 10, 12, 14 ms; spec TPOT 5, 6, 10 ms in passes 0, 1, 2 (two requests each,
    one after the other); passes 1000 s apart (other tiers run in between)."""
    recs = []
    for r, (tb, ts) in enumerate([(10, 5), (12, 6), (14, 10)]):
        start = r * 1000 * S
        for variant, tpot in (("base", tb), ("spec", ts)):
            first = request(variant, r, 0, start, tpot)
            second = request(variant, r, 1, first[0].end_ns, tpot)
            recs += [first, second]
    return frames(recs)


def test_speedup_interval_pairs_pass_r_with_the_baselines_pass_r():
    req, resp = three_passes()
    out = summarize_trusted(req, resp, baseline="base").summary.set_index("variant")
    spec, base = out.loc["spec"], out.loc["base"]
    # per pass TPOT speedup: 10/5 = 2, 12/6 = 2, 14/10 = 1.4. Ratios are averaged on the log
    # scale: ln 2 = 0.693147, ln 1.4 = 0.336472; mean 0.574256 (geometric mean e^0.574256 =
    # 1.775808), s = 0.205926, half-width 4.302653 · 0.205926 / sqrt(3) = 0.511545,
    # interval e^(0.574256 ∓ 0.511545) = [1.064714, 2.961823]
    assert spec["tpot_speedup_ratio_repeat_mean"] == pytest.approx(1.775808, abs=1e-5)
    assert spec["tpot_speedup_ratio_ci95_low"] == pytest.approx(1.064714, abs=1e-5)
    assert spec["tpot_speedup_ratio_ci95_high"] == pytest.approx(2.961823, abs=1e-5)
    # base TPOT mean per pass 10, 12, 14; logs 2.302585, 2.484907, 2.639057: mean 2.475516,
    # s = 0.168433, half-width 4.302653 · 0.168433 / sqrt(3) = 0.418410,
    # interval e^(2.475516 ∓ 0.418410) = [7.823302, 18.064091], geometric mean 11.887844
    assert base["time_per_output_token_mean_ms_repeat_mean"] == pytest.approx(
        11.887844, abs=1e-5
    )
    assert base["time_per_output_token_mean_ms_ci95_low"] == pytest.approx(
        7.823302, abs=1e-5
    )
    assert base["time_per_output_token_mean_ms_ci95_high"] == pytest.approx(
        18.064091, abs=1e-5
    )
    assert base["repeats_count"] == 3 and spec["repeat_ci_note"] == ""
    # pooled stays: all 6 base requests, TPOT mean (2·10 + 2·12 + 2·14) / 6 = 12
    assert base["time_per_output_token_mean_ms"] == pytest.approx(12.0)
    assert base["request_count"] == 6
    # pooled speedup 12 / 7 (spec mean (2·5 + 2·6 + 2·10) / 6 = 7)
    assert spec["tpot_speedup_ratio"] == pytest.approx(12 / 7)


def test_pooled_throughput_counts_each_pass_not_the_gaps_between_them():
    req, resp = three_passes()
    base = summarize_trusted(req, resp).summary.set_index("variant").loc["base"]
    # a pass of base: 2 requests back to back of E2E 10 + 4·tpot ms →
    # 2·(10 + 40) + 2·(10 + 48) + 2·(10 + 56) = 348 ms for 30 tokens
    assert base["duration_s"] == pytest.approx(0.348)
    assert base["output_token_throughput_tokens_per_s"] == pytest.approx(30 / 0.348)
    # pass 0: 10 tokens / 0.1 s = 100 tok/s; pass 1: 10 / 0.116; pass 2: 10 / 0.132
    per_pass = [100.0, 10 / 0.116, 10 / 0.132]
    # geometric mean over the passes
    assert base["output_token_throughput_tokens_per_s_repeat_mean"] == pytest.approx(
        float(np.prod(per_pass)) ** (1 / 3)
    )


def test_one_pass_has_no_interval_and_says_why():
    req, resp = frames([request("base", 0, i, i * 100 * MS, 10) for i in range(3)])
    row = summarize_trusted(req, resp, baseline="base").summary.iloc[0]
    assert row["repeats_count"] == 1
    assert row["time_to_first_token_p50_ms_repeat_mean"] == pytest.approx(10.0)
    assert math.isnan(row["time_to_first_token_p50_ms_ci95_low"])
    assert math.isnan(row["tpot_speedup_ratio_ci95_high"])
    assert row["repeat_ci_note"] == ONE_PASS_NOTE


# --- the window ---------------------------------------------------------------------------


def test_window_drops_completions_in_each_pass_start():
    # pass 0 starts at 0 s, pass 1 at 500 s; requests end 0.5, 1.5, 2.5 s into each pass
    # and are sent 0.45 s before (E2E = ttft 10 ms + 4 · 110 ms = 450 ms)
    recs = []
    for r in (0, 1):
        start = r * 500 * S
        for i, end_s in enumerate((0.5, 1.5, 2.5)):
            sent = start + int((end_s - 0.45) * S)
            recs.append(request("base", r, i, sent, 110.0))
    # the pass's first send is 0.05 s (pass 0) / 500.05 s (pass 1): with S = 1 s the
    # cut is at 1.05 s into each pass: the 0.5 s completion goes, the others stay
    req, resp = frames(recs)
    trusted = summarize_trusted(req, resp, warmup_s=1.0)
    assert list(trusted.in_window) == [False, True, True, False, True, True]
    row = trusted.summary.iloc[0]
    assert row["request_count"] == 4
    assert row["measurement_window"] == "completions after the first 1 s of each pass"
    everything = summarize_trusted(req, resp).summary.iloc[0]
    assert everything["request_count"] == 6
    assert everything["measurement_window"] == "all completions"


def test_a_window_that_empties_a_tier_marks_it_and_warns():
    req, resp = frames(
        [request("base", 0, i, i * 10 * MS, 10.0) for i in range(3)]
        + [request("base", 0, 0, 0, 10.0, tier="c2")]
    )
    req.loc[req["tier"] == "c2", "end_ns"] += 5 * S  # c2's request ends 5 s in
    trusted = summarize_trusted(req, resp, warmup_s=2.0)
    rows = trusted.summary.set_index("tier")
    assert rows.loc["c1", "request_count"] == 0
    assert (
        "every completion fell in the first 2 s" in rows.loc["c1", "tier_status_reason"]
    )
    assert rows.loc["c2", "request_count"] == 1
    assert len(trusted.warnings) == 1 and trusted.warnings[0].startswith("base c1: ")


def test_a_window_that_empties_every_tier_still_writes_a_summary(tmp_path):
    from trtbench.core.export import write_csv
    from trtbench.profiling.loadtest.files.schemas import SUMMARY_SCHEMA

    req, resp = frames([request("base", 0, i, i * 10 * MS, 10.0) for i in range(3)])
    trusted = summarize_trusted(req, resp, warmup_s=60.0)
    row = trusted.summary.iloc[0]
    assert row["request_count"] == 0 and math.isnan(row["duration_s"])
    assert "every completion fell in the first 60 s" in row["tier_status_reason"]
    out = write_csv(trusted.summary, tmp_path / "summary.csv", SUMMARY_SCHEMA)
    assert out.read_text().count("\n") == 2  # header + the one tier


def test_a_window_that_keeps_few_completions_warns():
    # 4 requests end 0.1, 0.2, 0.3 and 3 s after the first send; a 1 s window keeps 1 of 4
    recs = [request("base", 0, i, 0, 10.0) for i in range(4)]
    req, resp = frames(recs)
    req["end_ns"] = [int(x * S) for x in (0.1, 0.2, 0.3, 3.0)]
    warnings = summarize_trusted(req, resp, warmup_s=1.0).warnings
    assert len(warnings) == 1
    assert (
        warnings[0].startswith("base c1: the window") and "keeps 1 of 4" in warnings[0]
    )


# --- thin percentiles and token source ----------------------------------------------------


def test_n_ok_flags_at_the_thresholds():
    counts = [0, 19, 20, 99, 100]
    summary = pd.DataFrame({"time_to_first_token_count": counts})
    flags = n_ok_flags(summary, METRICS[:1])
    assert list(flags["time_to_first_token_p95_n_ok"]) == [
        False,
        False,
        True,
        True,
        True,
    ]
    assert list(flags["time_to_first_token_p99_n_ok"]) == [
        False,
        False,
        False,
        False,
        True,
    ]


def test_token_source_per_tier_and_a_warning_for_retokenized_text():
    recs = [
        request("v", 0, 0, 0, 5.0),
        request("v", 0, 1, 0, 5.0),
        request("v", 0, 0, 0, 5.0, tier="c2"),
        request("v", 0, 1, 0, 5.0, tier="c2", source="retokenized"),
    ]
    req, resp = frames(recs)
    sources = token_sources(req).set_index("tier")
    assert sources.loc["c1", "output_token_source"] == "output_ids"
    assert sources.loc["c2", "output_token_source"] == "mixed"
    assert sources.loc["c2", "retokenized_count"] == 1
    trusted = summarize_trusted(req, resp)
    assert list(trusted.summary["output_token_source"]) == ["output_ids", "mixed"]
    (warning,) = trusted.warnings
    assert warning.startswith("v c2: 1 requests")
    assert "15 generated single-space tokens re-encode as 1" in warning


def test_a_race_states_its_summary_intervals_at_its_looks_level():
    from scipy import stats as st

    from trtbench.profiling.loadtest.workload.repeats import repeat_stats

    # one variant, one tier; output tok/s 110, 100, 120 in three passes
    summary = pd.DataFrame(
        {"variant": ["a"], "tier": ["c1"], "tier_status": ["complete"]}
    )
    passes = pd.DataFrame(
        {
            "variant": ["a"] * 3,
            "tier": ["c1"] * 3,
            "repeat": [0, 1, 2],
            "request_count": [8, 8, 8],
            "output_token_throughput_tokens_per_s": [110.0, 100.0, 120.0],
        }
    )
    col = "output_token_throughput_tokens_per_s"
    logs = np.log([110.0, 100.0, 120.0])
    sd = logs.std(ddof=1)
    for level_at, level in ((None, 0.95), (lambda n: 0.993, 0.993)):
        row = repeat_stats(summary, passes, level_at).iloc[0]
        half = st.t.ppf(0.5 + level / 2, 2) * sd / math.sqrt(3)
        assert row[f"{col}_ci95_low"] == pytest.approx(math.exp(logs.mean() - half))
        assert row[f"{col}_ci95_high"] == pytest.approx(math.exp(logs.mean() + half))
    # below its first look a race has no interval (level 1): no bound, never inf
    row = repeat_stats(summary, passes.iloc[:2], lambda n: 1.0 if n < 3 else 0.99).iloc[
        0
    ]
    assert math.isnan(row[f"{col}_ci95_low"]) and math.isnan(row[f"{col}_ci95_high"])


def test_speedup_intervals_carry_the_instance_term_and_single_figures_do_not():
    from scipy import stats as st

    from trtbench.profiling.loadtest.workload.repeats import repeat_stats

    # speedups 2, 2, 1.4 in rounds 0-2 (as three_passes), tau = 0.05, one server instance:
    # V = s^2/3 + 0.05^2 with s = 0.205926 (the hand-worked case above), Satterthwaite
    # nu = V^2 / ((s^2/3)^2 / 2).
    summary = pd.DataFrame(
        {"variant": ["spec"], "tier": ["c1"], "tier_status": ["complete"]}
    )
    passes = pd.DataFrame(
        {
            "variant": ["spec"] * 3,
            "tier": ["c1"] * 3,
            "repeat": [0, 1, 2],
            "request_count": [8, 8, 8],
            "tpot_speedup_ratio": [2.0, 2.0, 1.4],
            "output_token_throughput_tokens_per_s": [110.0, 100.0, 120.0],
        }
    )
    row = repeat_stats(summary, passes, None, (0.05, lambda r: 0)).iloc[0]
    within = 0.205926**2 / 3
    v = within + 0.05**2
    half = st.t.ppf(0.975, v**2 / (within**2 / 2)) * math.sqrt(v)
    assert row["tpot_speedup_ratio_ci95_low"] == pytest.approx(
        math.exp(0.574256 - half), abs=1e-5
    )
    assert row["tpot_speedup_ratio_ci95_high"] == pytest.approx(
        math.exp(0.574256 + half), abs=1e-5
    )
    # one variant's own figure is not a comparison between servers: the plain interval
    plain = repeat_stats(summary, passes).iloc[0]
    col = "output_token_throughput_tokens_per_s_ci95_low"
    assert row[col] == plain[col]


def test_the_baseline_over_itself_carries_no_instance_term():
    from trtbench.profiling.loadtest.workload.repeats import repeat_stats

    summary = pd.DataFrame(
        {"variant": ["base"], "tier": ["c1"], "tier_status": ["complete"]}
    )
    passes = pd.DataFrame(
        {
            "variant": ["base"] * 3,
            "tier": ["c1"] * 3,
            "repeat": [0, 1, 2],
            "request_count": [8, 8, 8],
            "tpot_speedup_ratio": [1.0, 1.0, 1.0],
        }
    )
    row = repeat_stats(summary, passes, None, (0.05, lambda r: 0), "base").iloc[0]
    assert row["tpot_speedup_ratio_ci95_low"] == pytest.approx(1.0)
    assert row["tpot_speedup_ratio_ci95_high"] == pytest.approx(1.0)


def test_an_interval_too_wide_for_a_float_has_no_bounds_never_inf():
    from trtbench.profiling.loadtest.workload.repeats import log_t_interval

    # two values at 99.9999 %: t(0.9999995, 1) ≈ 6.4e5, times SD(log 1, log 2) / √2 ≈ 0.49:
    # a half-width near 2e5 on the log scale, e^(2e5) overflows a float
    mean, low, high, n = log_t_interval([1.0, 2.0], 0.999999)
    assert mean == pytest.approx(math.sqrt(2)) and n == 2
    assert math.isnan(low) and math.isnan(high)
