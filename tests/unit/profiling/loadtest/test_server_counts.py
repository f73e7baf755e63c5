"""Prometheus counter deltas → summary.csv / acceptance.csv rows (hand-made exposition text,
hand-worked figures)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.support.cli import run_cli
from trtbench.core.errors import ConfigError
from trtbench.core.export import write_csv
from trtbench.profiling.loadtest.clients.server_counts import (
    add_server_counts,
    pass_delta,
)
from trtbench.profiling.loadtest.clients.target import API_CHAT, check_workers_api
from trtbench.profiling.loadtest.records.outcome import (
    LoadResult,
    TierOutcome,
    result_json,
)
from trtbench.profiling.loadtest.records.spec_counters import (
    SpecCounters,
    parse_spec_counters,
)
from trtbench.profiling.loadtest.stats.acceptance import (
    ACCEPTANCE_SCHEMA,
    ACCEPTANCE_SUMMARY_COLUMNS,
)
from trtbench.profiling.loadtest.workload.repeats import merge_passes

NAMES = [c.name for c in ACCEPTANCE_SUMMARY_COLUMNS]


def exposition(drafts, draft_tokens, accepted, per_pos) -> str:
    """vLLM-style counters of one engine (plus a gauge that must be ignored)."""
    lines = [
        "# TYPE vllm:spec_decode_num_drafts counter",
        f'vllm:spec_decode_num_drafts_total{{engine="0",model_name="m"}} {drafts}',
        "# TYPE vllm:spec_decode_num_draft_tokens counter",
        f'vllm:spec_decode_num_draft_tokens_total{{engine="0",model_name="m"}} {draft_tokens}',
        "# TYPE vllm:spec_decode_num_accepted_tokens counter",
        f'vllm:spec_decode_num_accepted_tokens_total{{engine="0",model_name="m"}} {accepted}',
        "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter",
    ]
    lines += [
        f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",model_name="m",position="{j}"}} {a}'
        for j, a in enumerate(per_pos)
    ]
    lines += [
        "# TYPE vllm:num_requests_running gauge",
        'vllm:num_requests_running{engine="0",model_name="m"} 3.0',
    ]
    return "\n".join(lines) + "\n"


def summary_frame(rows):
    """A summary frame: (variant, tier, source, per-step figures or None)."""
    out = []
    for variant, tier, source in rows:
        row = {"variant": variant, "tier": tier, **dict.fromkeys(NAMES, np.nan)}
        row["spec_decode_counts_source"] = source
        if source:
            row.update(acceptance_length_tokens=2.0, verify_steps_count=7.0)
        out.append(row)
    return pd.DataFrame(out)


def test_pass_delta_cases():
    a = SpecCounters(1.0, 4.0, 2.0, (1.0, 1.0))
    b = SpecCounters(3.0, 12.0, 5.0, (3.0, 2.0))
    assert pass_delta(None, None) == ()
    assert pass_delta(a, None) == (None,)
    assert pass_delta(a, b) == (SpecCounters(2.0, 8.0, 3.0, (2.0, 1.0)),)


def test_two_passes_summed_into_summary_and_positions(tmp_path):
    """Pass 1: 5 → 25 drafts (K = 4: 80 draft tokens), 40 accepted (18/12/7/3 per position);
    pass 2: 10 drafts, 40 draft tokens, 12 accepted (6/4/2/0). Tier: 30 drafts, 120 draft
    tokens, 52 accepted → acceptance length 1 + 52/30, rate 52/120, positions 24/30, 16/30,
    9/30, 3/30. A tier whose responses carried counts keeps them."""
    s0 = parse_spec_counters(exposition(5, 20, 8, [4, 3, 1, 0]))
    s1 = parse_spec_counters(exposition(25, 100, 48, [22, 15, 8, 3]))
    s2 = parse_spec_counters(exposition(35, 140, 60, [28, 19, 10, 3]))
    passes = [
        TierOutcome("c1", requests=4, spec_counts=pass_delta(s0, s1)),
        TierOutcome("c2", requests=4, spec_counts=pass_delta(s1, s1)),
        TierOutcome("c1", requests=4, spec_counts=pass_delta(s1, s2)),
    ]
    result = LoadResult(merge_passes(passes))
    run_json = result_json(result)["tiers"]["c1"]["server_spec_counts"]
    assert [p["drafts"] for p in run_json] == [20.0, 10.0]  # per repeat
    summary = summary_frame(
        [("v", "c1", ""), ("v", "c2", ""), ("w", "c1", "server_per_step")]
    )
    acc = pd.DataFrame(columns=[c.name for c in ACCEPTANCE_SCHEMA])
    out, rows = add_server_counts(summary, acc, {"v": result, "w": LoadResult()})
    c1 = out.iloc[0]
    assert c1["acceptance_length_tokens"] == pytest.approx(1 + 52 / 30)
    assert c1["draft_acceptance_rate_ratio"] == pytest.approx(52 / 120)
    assert c1["accepted_drafts_per_step_tokens"] == pytest.approx(52 / 30)
    assert (
        c1["verify_steps_count"],
        c1["proposed_draft_tokens_count"],
        c1["accepted_draft_tokens_count"],
    ) == (30, 120, 52)
    assert c1["spec_decode_counts_source"] == "server_prometheus"
    # c2 proposed nothing between its scrapes: nothing to fill
    assert np.isnan(out.iloc[1]["acceptance_length_tokens"])
    assert out.iloc[1]["spec_decode_counts_source"] == ""
    # per-step counts from the responses win
    assert out.iloc[2]["acceptance_length_tokens"] == 2.0
    assert out.iloc[2]["spec_decode_counts_source"] == "server_per_step"
    assert list(rows["draft_position"]) == [1, 2, 3, 4]
    assert set(rows["kind"]) == {"position"} and set(rows["source"]) == {
        "server_prometheus"
    }
    assert list(rows["steps_count"]) == [30] * 4
    assert list(rows["hits_count"]) == [24, 16, 9, 3]
    assert list(rows["value_ratio"]) == pytest.approx(
        [24 / 30, 16 / 30, 9 / 30, 3 / 30]
    )


def test_a_pass_that_lost_a_scrape_gives_no_figures():
    passes = [
        TierOutcome(
            "c1",
            requests=2,
            spec_counts=pass_delta(
                SpecCounters(0.0, 0.0, 0.0, ()),
                SpecCounters(4.0, 16.0, 6.0, (3.0, 2.0, 1.0, 0.0)),
            ),
        ),
        TierOutcome("c1", requests=2, spec_counts=(None,)),
    ]
    summary = summary_frame([("v", "c1", "")])
    out, rows = add_server_counts(
        summary, pd.DataFrame(), {"v": LoadResult(merge_passes(passes))}
    )
    assert np.isnan(out.iloc[0]["acceptance_length_tokens"]) and rows.empty


def test_other_variants_keep_their_earlier_server_counts(tmp_path):
    """Re-measuring variant v keeps variant old's Prometheus figures from the earlier files."""
    first = summary_frame([("old", "c1", "")])
    counts = SpecCounters(10.0, 40.0, 15.0, (8.0, 5.0, 2.0, 0.0))
    result = LoadResult([TierOutcome("c1", requests=1, spec_counts=(counts,))])
    acc0 = pd.DataFrame(columns=[c.name for c in ACCEPTANCE_SCHEMA])
    s1, a1 = add_server_counts(first, acc0, {"old": result})
    s1.to_csv(tmp_path / "summary.csv", index=False)
    write_csv(a1, tmp_path / "acceptance.csv", ACCEPTANCE_SCHEMA)
    second = summary_frame([("old", "c1", ""), ("v", "c1", "")])
    s2, a2 = add_server_counts(
        second,
        acc0,
        {"v": LoadResult()},
        tmp_path / "summary.csv",
        tmp_path / "acceptance.csv",
    )
    assert s2.iloc[0]["acceptance_length_tokens"] == pytest.approx(2.5)  # 1 + 15/10
    assert s2.iloc[0]["spec_decode_counts_source"] == "server_prometheus"
    assert np.isnan(s2.iloc[1]["acceptance_length_tokens"])
    assert list(a2["variant"]) == ["old"] * 4
    assert list(a2["value_ratio"]) == pytest.approx([0.8, 0.5, 0.2, 0.0])


def test_workers_refused_with_an_openai_api(tmp_path, capsys):
    with pytest.raises(ConfigError, match="--workers 2 with --api openai-chat"):
        check_workers_api(API_CHAT, 2)
    check_workers_api(API_CHAT, 1)
    code, stdout, stderr = run_cli(
        [
            "loadtest",
            "--api",
            "openai-chat",
            "--url",
            "http://127.0.0.1:9/v1",
            "--model",
            "m",
            "--concurrency",
            "2",
            "--workers",
            "2",
            "--out",
            str(tmp_path / "r"),
        ],
        capsys,
    )
    assert code == 2, stdout + stderr
    lines = [s for s in stderr.splitlines() if s.strip()]
    assert len(lines) == 1 and "--workers 2 with --api openai-chat" in lines[0], stderr
