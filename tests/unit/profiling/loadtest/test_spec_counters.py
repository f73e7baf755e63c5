"""vLLM's Prometheus speculative counters → a tier's counts and figures (hand-worked)."""

from __future__ import annotations

import pytest

from trtbench.profiling.loadtest.records.spec_counters import (
    SpecCounters,
    parse_spec_counters,
)

BEFORE = """# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 10.0
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 40.0
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 15.0
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 8.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 5.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="2"} 2.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="3"} 0.0
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 0.0
"""
# after a tier: 20 more verify steps (K=4: 80 draft tokens), 30 more accepted: 16/9/4/1
AFTER = (
    BEFORE.replace(" 10.0", " 30.0")
    .replace(" 40.0", " 120.0")
    .replace(" 15.0", " 45.0")
    .replace('"0"} 8.0', '"0"} 24.0')
    .replace('"1"} 5.0', '"1"} 14.0')
    .replace('"2"} 2.0', '"2"} 6.0')
    .replace('"3"} 0.0', '"3"} 1.0')
)


def test_tier_delta_and_vllm_figures():
    before, after = parse_spec_counters(BEFORE), parse_spec_counters(AFTER)
    assert before == SpecCounters(10.0, 40.0, 15.0, (8.0, 5.0, 2.0, 0.0))
    tier = after.minus(before)
    assert tier == SpecCounters(20.0, 80.0, 30.0, (16.0, 9.0, 4.0, 1.0))
    f = tier.figures()
    assert f["acceptance_length_tokens"] == pytest.approx(2.5)  # 1 + 30/20
    assert f["draft_acceptance_rate_ratio"] == pytest.approx(0.375)  # 30/80
    assert f["accepted_drafts_per_step_tokens"] == pytest.approx(1.5)
    rates = [f[f"acceptance_rate_pos{j}"] for j in range(1, 5)]
    assert rates == pytest.approx([0.8, 0.45, 0.2, 0.05])  # 16, 9, 4, 1 of 20


def test_no_speculation_no_counters():
    assert parse_spec_counters("# TYPE x counter\nx_total 1.0\n") is None
    assert SpecCounters(0.0, 0.0, 0.0, ()).figures() == {}
