"""Speculative acceptance (``acceptance.py``) on hand-worked step sequences.

Tier ``dt c1`` (draft-target, K = 4), steps written as (tokens emitted, proposed, accepted):

- request A: (1, 0, 0) prefill, (3, 4, 2), (5, 4, 4), (1, 4, 0), (2, 4, 3) — the last step is
  cut by max_tokens: the engine accepted 3 drafts but only 2 tokens fit. OSL = 12 (emitted),
  4 verify steps, 9 accepted (3 at the cut step), 16 proposed.
- request B: (1, 0, 0), (2, 4, 1), (4, 4, 3): OSL 7, 2 verify steps, 4 accepted, 8 proposed.
- request C failed (error): (1, 0, 0), (5, 4, 4) — not counted.

Pooled: 6 verify steps, Σ accepted 13, Σ proposed 24 → acceptance length 1 + 13/6,
rate 13/24, accepted per step 13/6. Accepted per verify step: [2, 4, 0, 3, 1, 3], so position
j (accepted ≥ j of 6 steps that all proposed 4): j=1 5/6, j=2 4/6, j=3 3/6, j=4 1/6; histogram
j=0..4: 1, 1, 1, 2, 1 steps (shares /6). Per request: A 1 + 9/4 = 3.25 and 9/16; B 1 + 4/2
= 3.0 and 4/8 → means 3.125 and 0.53125.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.support.streams import stream
from trtbench.core.export import records_to_frame, write_csv
from trtbench.profiling.loadtest.stats.acceptance import (
    ACCEPTANCE_SCHEMA,
    acceptance_summary,
    acceptance_table,
)
from trtbench.profiling.loadtest.stats.metrics import summarize


def frames(*streams):
    requests = records_to_frame([s[0] for s in streams])
    responses = records_to_frame([r for s in streams for r in s[1]])
    return requests, responses


A = [(1, 0, 0), (3, 4, 2), (5, 4, 4), (1, 4, 0), (2, 4, 3)]
B = [(1, 0, 0), (2, 4, 1), (4, 4, 3)]
C = [(1, 0, 0), (5, 4, 4)]


@pytest.fixture
def hand():
    return frames(
        stream("dt", "a", A),
        stream("dt", "b", B),
        stream("dt", "c", C, error="server died"),
        # baseline: counts reported, nothing proposed
        stream("base", "d", [(1, 0, 0), (1, 0, 0), (1, 0, 0)]),
        # totals only on the final response: 4 token responses → 3 verify steps
        stream(
            "trt",
            "e",
            [(1, 0, 0), (3, 0, 0), (2, 0, 0), (4, 0, 0)],
            totals=(12, 5),
        ),
        # one response (not streamed), 9 tokens, 5 accepted: 9 − 1 − 5 = 3 verify steps
        stream("trt", "f", [(9, 0, 0)], tier="c2", totals=(8, 5)),
        # no counts at all
        stream("plain", "g", [(1, 0, 0), (2, 0, 0)], totals=(None, None)),
    )


def test_pooled_figures(hand):
    s = acceptance_summary(*hand).set_index(["variant", "tier"])
    dt = s.loc[("dt", "c1")]
    assert dt["acceptance_length_tokens"] == pytest.approx(1 + 13 / 6)
    assert dt["draft_acceptance_rate_ratio"] == pytest.approx(13 / 24)
    assert dt["accepted_drafts_per_step_tokens"] == pytest.approx(13 / 6)
    assert dt["verify_steps_count"] == 6
    assert dt["proposed_draft_tokens_count"] == 24
    assert dt["accepted_draft_tokens_count"] == 13  # the cut step counts 3, not 2
    assert dt["spec_decode_counts_source"] == "server_per_step"
    trt = s.loc[("trt", "c1")]
    assert trt["acceptance_length_tokens"] == pytest.approx(1 + 5 / 3)
    assert trt["draft_acceptance_rate_ratio"] == pytest.approx(5 / 12)
    assert trt["spec_decode_counts_source"] == "server_request_totals"
    assert s.loc[("trt", "c2"), "acceptance_length_tokens"] == pytest.approx(1 + 5 / 3)
    for key in (("base", "c1"), ("plain", "c1")):
        assert s.loc[key, "spec_decode_counts_source"] == ""
        assert np.isnan(s.loc[key, "acceptance_length_tokens"])


def test_positions_and_histogram(hand):
    t = acceptance_table(*hand)
    # Only the per-step tier has rows; totals-only and baseline tiers have none.
    assert set(zip(t["variant"], t["tier"], strict=True)) == {("dt", "c1")}
    assert set(t["source"]) == {"server_per_step"}
    pos = t[t["kind"] == "position"]
    assert list(pos["draft_position"]) == [1, 2, 3, 4]
    assert list(pos["steps_count"]) == [6, 6, 6, 6]
    assert list(pos["hits_count"]) == [5, 4, 3, 1]
    assert list(pos["value_ratio"]) == pytest.approx([5 / 6, 4 / 6, 3 / 6, 1 / 6])
    hist = t[t["kind"] == "histogram"]
    assert list(hist["draft_position"]) == [0, 1, 2, 3, 4]
    assert list(hist["hits_count"]) == [1, 1, 1, 2, 1]
    assert list(hist["value_ratio"]) == pytest.approx(
        [1 / 6, 1 / 6, 1 / 6, 2 / 6, 1 / 6]
    )


def test_medusa_tree_positions_beyond_depth_read_zero():
    # A 6-node tree of depth 3: every step proposes 6; accepted 1, 3, 0 →
    # j=1: 2/3, j=2: 1/3, j=3: 1/3, j=4..6: 0/3; draft acceptance rate 4/18.
    req, resp = frames(stream("med", "m", [(1, 0, 0), (2, 6, 1), (4, 6, 3), (1, 6, 0)]))
    pos = acceptance_table(req, resp).query("kind == 'position'")
    assert list(pos["value_ratio"]) == pytest.approx([2 / 3, 1 / 3, 1 / 3, 0, 0, 0])
    s = acceptance_summary(req, resp).iloc[0]
    assert s["draft_acceptance_rate_ratio"] == pytest.approx(4 / 18)
    assert s["acceptance_length_tokens"] == pytest.approx(1 + 4 / 3)


def test_summary_columns_pooled_and_per_request(hand):
    s = summarize(*hand).set_index(["variant", "tier"])
    dt = s.loc[("dt", "c1")]
    assert dt["acceptance_length_tokens"] == pytest.approx(1 + 13 / 6)
    assert dt["acceptance_length_per_request_mean_tokens"] == pytest.approx(3.125)
    assert dt["draft_acceptance_rate_per_request_mean_ratio"] == pytest.approx(0.53125)
    assert dt["acceptance_length_per_request_count"] == 2  # the failed request is out
    # Output length counts the emitted tokens: A 12 (the cut step gives 2), B 7.
    assert dt["output_sequence_length_mean_tokens"] == pytest.approx((12 + 7) / 2)
    trt = s.loc[("trt", "c1")]
    assert trt["acceptance_length_per_request_mean_tokens"] == pytest.approx(1 + 5 / 3)
    assert np.isnan(s.loc[("base", "c1"), "acceptance_length_per_request_mean_tokens"])


def test_no_speculative_variant_gives_a_header_only_file(tmp_path):
    req, resp = frames(stream("base", "d", [(1, 0, 0), (1, 0, 0)]))
    table = acceptance_table(req, resp)
    assert table.empty
    path = write_csv(table, tmp_path / "acceptance.csv", ACCEPTANCE_SCHEMA)
    assert path.read_text().strip() == ",".join(c.name for c in ACCEPTANCE_SCHEMA)
    assert acceptance_table(pd.DataFrame(), pd.DataFrame()).empty
