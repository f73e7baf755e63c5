"""SGLang's per-request speculative counts: the ``sglext`` chunk parsed from a stream, the
request record it leaves, the tier figures and rows made of them, and the refusals.

Payloads are hand-written in SGLang's format: the streamed extra chunk ``{"choices": [],
"sglext": {"spec_tokens_details": {...}}}`` after the content chunks and before the usage
chunk (sglang 0.5.23 ``serving_completions.py`` lines 444–476; a list per choice with n > 1),
its fields as ``tokenizer_manager.py`` 0.5.23 ``_calculate_spec_decoding_metrics`` (lines
3138–3207) computes them with ``speculative_num_draft_tokens`` = 4 (3 drafts per step).
"""

from __future__ import annotations

import json
import logging

import pandas as pd
import pytest

from trtbench.core.export import records_to_frame
from trtbench.profiling.loadtest.clients.openai_client import COMPLETIONS, sse_to_parsed
from trtbench.profiling.loadtest.clients.response_parse import Exchange
from trtbench.profiling.loadtest.clients.sglang_spec import (
    REQUEST_FIELD,
    details_missing_reason,
    details_of,
    is_sglang,
    parse_details,
    request_fields,
    server_info_acceptance,
)
from trtbench.profiling.loadtest.files.responses import RequestSlot, exchange_to_records
from trtbench.profiling.loadtest.stats.acceptance import (
    SGLANG_DETAILS,
    SGLANG_NOMINAL,
    acceptance_summary,
    acceptance_table,
)
from trtbench.profiling.loadtest.workload.prompts import Prompt
from trtbench.profiling.loadtest.workload.schedule import Tier

# One request: after the prefill's token, 3 verify steps accepting 2, 0, 3 of 3 drafts
# (3 + 1 + 4 tokens): verify_ct 3, proposed 3 × 3 = 9, correct 5, histogram [1, 0, 1, 1];
# completion_tokens 9, spec_accept_length 9 / 3 = 3.0 (bonus and prefill token included),
# spec_accept_rate 5 / 9.
DETAILS = {
    "spec_accept_rate": 5 / 9,
    "spec_accept_length": 3.0,
    "spec_cap_length": 0.0,
    "spec_block_accept_length": 0.0,
    "spec_num_correct_drafts": 5,
    "spec_num_proposed_drafts": 9,
    "spec_verify_ct": 3,
    "spec_correct_drafts_histogram": [1, 0, 1, 1],
    "spec_cap_lens_histogram": [],
}


def content(text: str, ids: list[int], finish: str | None = None) -> dict:
    choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
    return {
        "id": "cmpl-1",
        "object": "text_completion",
        "choices": [choice | {"token_ids": ids}],
    }


def stream(details: dict | list | None) -> list[tuple[int, str]]:
    events = [
        content("a", [1]),
        content("bcd", [2, 3, 4]),
        content("e", [5]),
        content("fghi", [6, 7, 8, 9], "length"),
    ]
    if details is not None:
        events.append(
            {"id": "cmpl-1", "choices": [], "sglext": {"spec_tokens_details": details}}
        )
    events.append(
        {
            "id": "cmpl-1",
            "choices": [],
            "usage": {"prompt_tokens": 4, "completion_tokens": 9},
        }
    )
    lines = [f"data: {json.dumps(e)}" for e in events] + ["data: [DONE]"]
    return [(100 * (i + 1), line) for i, line in enumerate(lines)]


def test_the_extra_chunk_puts_the_request_totals_on_the_final_response():
    parsed, done, error = sse_to_parsed(stream(DETAILS), COMPLETIONS)
    assert error is None and done == 700
    last = parsed[-1][1]
    assert last.final and last.cumulative_counts
    assert (last.draft_tokens, last.accepted_draft_tokens) == (9, 5)
    assert last.verify_steps == 3
    assert last.accepted_histogram == (1, 0, 1, 1)
    assert last.counts_source == SGLANG_DETAILS
    assert all(p.draft_tokens is None for _, p in parsed[:-1])


def test_with_several_choices_the_first_choices_details_are_read():
    other = DETAILS | {
        "spec_num_correct_drafts": 0,
        "spec_correct_drafts_histogram": [3],
    }
    assert (
        details_of({"choices": [], "sglext": {"spec_tokens_details": [DETAILS, other]}})
        == DETAILS
    )
    parsed, _, _ = sse_to_parsed(stream([DETAILS, other]), COMPLETIONS)
    assert parsed[-1][1].accepted_draft_tokens == 5


@pytest.mark.parametrize(
    "event",
    [
        {"choices": []},
        {"choices": [], "sglext": {"cached_tokens_details": {"device": 4}}},
        {"choices": [], "sglext": {"spec_tokens_details": []}},
        {"choices": [], "sglext": "spec"},
    ],
    ids=["no-sglext", "other-sglext", "empty-list", "not-an-object"],
)
def test_chunks_without_details_give_none(event):
    assert details_of(event) is None


def test_a_stream_without_sglext_has_no_counts():
    """An SGLang before 0.5.19 ignores the request field and sends no extra chunk."""
    parsed, done, _ = sse_to_parsed(stream(None), COMPLETIONS)
    assert done is not None
    assert all(p.draft_tokens is None and p.counts_source is None for _, p in parsed)


@pytest.mark.parametrize(
    "change",
    [
        {"spec_num_proposed_drafts": None},  # a server without speculation
        {"spec_verify_ct": -1},
        {"spec_num_correct_drafts": True},
        {"spec_num_correct_drafts": 10},  # more accepted than proposed
        {"spec_verify_ct": 0},  # drafts without a verify step
    ],
)
def test_unusable_totals_give_no_counts(change):
    assert parse_details(DETAILS | change) is None


@pytest.mark.parametrize(
    "hist",
    [[1, 0, 2], [1, 1, 1], [1, 0, 1, -1], "1 0 1 1", None],
    ids=["too-many-steps", "wrong-accepted", "negative", "text", "absent"],
)
def test_a_histogram_that_disagrees_with_the_totals_is_dropped(hist):
    details = parse_details(DETAILS | {"spec_correct_drafts_histogram": hist})
    assert details is not None
    assert (details.proposed, details.accepted, details.verify_steps) == (9, 5, 3)
    assert details.histogram == ()


def request_frames(
    streams: list[list[tuple[int, str]]],
) -> tuple[pd.DataFrame, pd.DataFrame]:
    return _frames([sse_to_parsed(lines, COMPLETIONS)[0] for lines in streams])


def _frames(streams: list[list]) -> tuple[pd.DataFrame, pd.DataFrame]:
    tier = Tier(concurrency=1)
    reqs, resps = [], []
    for i, parsed in enumerate(streams):
        exchange = Exchange(0, parsed[-1][0] + 100, parsed)  # [DONE] follows
        record, responses = exchange_to_records(
            exchange,
            Prompt(f"t{i}", "Hello", 4, 9, "words"),
            RequestSlot("sg", tier, i, 0),
        )
        reqs.append(record)
        resps += responses
    return records_to_frame(reqs), records_to_frame(resps)


def test_the_request_record_keeps_steps_histogram_and_source():
    requests, _ = request_frames([stream(DETAILS)])
    row = requests.iloc[0]
    assert (row["draft_tokens"], row["accepted_draft_tokens"]) == (9, 5)
    assert row["verify_steps"] == 3
    assert row["accepted_drafts_histogram"] == "1 0 1 1"
    assert row["spec_counts_source"] == SGLANG_DETAILS


def test_tier_figures_and_rows_from_two_requests():
    """Request 1 as above; request 2: 2 steps accepting 1, 1 of 3 (proposed 6, correct 2,
    histogram [0, 2]). Tier: 5 steps, 15 proposed, 7 accepted: acceptance length 1 + 7/5,
    rate 7/15; steps that accepted ≥ 1, 2, 3: 4, 2, 1 of 5; exactly 0..3: 1, 2, 1, 1."""
    second = DETAILS | {
        "spec_num_correct_drafts": 2,
        "spec_num_proposed_drafts": 6,
        "spec_verify_ct": 2,
        "spec_correct_drafts_histogram": [0, 2],
    }
    requests, responses = request_frames([stream(DETAILS), stream(second)])
    summary = acceptance_summary(requests, responses).iloc[0]
    assert summary["spec_decode_counts_source"] == SGLANG_DETAILS
    assert summary["acceptance_length_tokens"] == pytest.approx(1 + 7 / 5)
    assert summary["draft_acceptance_rate_ratio"] == pytest.approx(7 / 15)
    assert summary["verify_steps_count"] == 5
    table = acceptance_table(requests, responses)
    assert set(table["source"]) == {SGLANG_DETAILS}
    pos = table[table["kind"] == "position"]
    assert list(pos["steps_count"]) == [5, 5, 5]
    assert list(pos["hits_count"]) == [4, 2, 1]
    hist = table[table["kind"] == "histogram"]
    assert list(hist["hits_count"]) == [1, 2, 1, 1]


def test_a_tier_with_a_request_without_histogram_gets_no_rows():
    """Its pooled figures stand (every request's totals are known), but rows from part of
    its steps would be printed as the tier's: none."""
    bare = DETAILS | {"spec_correct_drafts_histogram": None}
    requests, responses = request_frames([stream(DETAILS), stream(bare)])
    assert acceptance_summary(requests, responses).iloc[0]["verify_steps_count"] == 6
    assert acceptance_table(requests, responses).empty


def test_request_fields_ask_sglang_alone_and_say_why_details_are_missing(caplog):
    info = {
        "internal_states": [{}],
        "version": "0.5.15",
        "speculative_algorithm": "EAGLE",
    }
    assert request_fields(None, {"top_k": 1}, "u", None) == {"top_k": 1}
    assert request_fields(info, {}, "u", SGLANG_DETAILS) == {REQUEST_FIELD: True}
    assert request_fields(info, {REQUEST_FIELD: False}, "u", SGLANG_DETAILS) == {
        REQUEST_FIELD: False
    }
    caplog.set_level(logging.INFO)
    request_fields(info, {}, "http://h/v1", None)
    [warned] = caplog.records
    assert warned.levelno == logging.WARNING
    assert "SGLang 0.5.15 (EAGLE) sent no sglext.spec_tokens_details" in warned.message
    assert "0.5.19" in warned.message
    caplog.clear()
    baseline = {"internal_states": [{}], "version": "0.5.23"}
    request_fields(baseline, {}, "http://h/v1", None)
    [said] = caplog.records
    assert said.levelno == logging.INFO
    assert "serves without speculative decoding" in said.message


def test_server_info_is_sglangs_only_with_internal_states():
    assert is_sglang(
        {"internal_states": [{"avg_spec_accept_length": 2.0}], "version": "0.5.23"}
    )
    assert not is_sglang({"disaggregated_params": None})  # trtllm-serve's /server_info
    assert not is_sglang([])


def test_server_info_running_average_is_read_but_refused():
    """Two data-parallel ranks at 2.0 and 3.0: the server's life-long mean 2.5, never a
    tier's (it holds trtbench's own probe and warm-up requests)."""
    info = {
        "internal_states": [
            {"avg_spec_accept_length": 2.0},
            {"avg_spec_accept_length": 3.0},
        ]
    }
    value, why = server_info_acceptance(info)
    assert value == pytest.approx(2.5)
    assert "running average over the server's life" in why
    assert server_info_acceptance({"internal_states": [{}]})[0] is None


# A request of SGLang's main branch after 0.5.23 (counts its proposals): 3 verify steps
# proposing 3, 1, 2 drafts (6) and accepting 2, 0, 2 (4): by position, steps that proposed
# a draft at j = 0, 1, 2: 3, 2, 1; steps that accepted it: 2, 2, 0; steps by proposed
# drafts: 0 × 0, 1 × 1, 1 × 2, 1 × 3.
ACTUAL = DETAILS | {
    "spec_num_proposed_drafts": 6,
    "spec_num_correct_drafts": 4,
    "spec_correct_drafts_histogram": [1, 0, 2],
    "spec_num_proposed_drafts_by_position": [3, 2, 1],
    "spec_num_correct_drafts_by_position": [2, 2, 0],
}


def test_proposals_by_position_become_the_steps_by_proposed_drafts():
    details = parse_details(ACTUAL)
    assert details is not None
    assert (details.proposed, details.accepted, details.verify_steps) == (6, 4, 3)
    assert details.proposed_histogram == (0, 1, 1, 1)
    # the server's own histogram, where sent, is taken as it is (when it agrees)
    given = parse_details(ACTUAL | {"spec_proposed_drafts_histogram": [0, 1, 1, 1]})
    assert given is not None and given.proposed_histogram == (0, 1, 1, 1)
    # by-position counts that do not add up to the proposals: no proposed histogram
    wrong = parse_details(ACTUAL | {"spec_num_proposed_drafts_by_position": [3, 3, 3]})
    assert wrong is not None and wrong.proposed_histogram == ()
    # a fixed-length server sends none
    assert parse_details(DETAILS).proposed_histogram == ()  # type: ignore[union-attr]


def test_adaptive_drafting_names_nominal_proposals_unless_counted():
    parsed, _, _ = sse_to_parsed(stream(DETAILS), COMPLETIONS, adaptive=True)
    assert parsed[-1][1].counts_source == SGLANG_NOMINAL
    parsed, _, _ = sse_to_parsed(stream(ACTUAL), COMPLETIONS, adaptive=True)
    assert parsed[-1][1].counts_source == SGLANG_DETAILS
    assert parsed[-1][1].proposed_histogram == (0, 1, 1, 1)


def test_nominal_proposals_give_length_and_histogram_but_no_rate_or_positions():
    """Two requests as DETAILS (3 steps, 5 accepted, histogram [1, 0, 1, 1]) drafting
    adaptively: length 1 + 10/6; the 18 nominal proposals give no rate; exactly 0..3
    accepted: 2, 0, 2, 2 of 6; no position rows."""
    streams = [
        sse_to_parsed(stream(DETAILS), COMPLETIONS, adaptive=True)[0] for _ in range(2)
    ]
    requests, responses = _frames(streams)
    summary = acceptance_summary(requests, responses).iloc[0]
    assert summary["spec_decode_counts_source"] == SGLANG_NOMINAL
    assert summary["acceptance_length_tokens"] == pytest.approx(1 + 10 / 6)
    assert pd.isna(summary["draft_acceptance_rate_ratio"])
    assert pd.isna(summary["proposed_draft_tokens_count"])
    table = acceptance_table(requests, responses)
    assert set(table["kind"]) == {"histogram"}
    assert list(table["hits_count"]) == [2, 0, 2, 2]


def test_counted_proposals_give_each_position_its_own_steps():
    """ACTUAL twice: rate 8/12; steps that proposed position 1, 2, 3: 6, 4, 2; that
    accepted it: 4, 4, 0."""
    requests, responses = request_frames([stream(ACTUAL), stream(ACTUAL)])
    assert list(requests["proposed_drafts_histogram"]) == ["0 1 1 1"] * 2
    summary = acceptance_summary(requests, responses).iloc[0]
    assert summary["draft_acceptance_rate_ratio"] == pytest.approx(8 / 12)
    pos = acceptance_table(requests, responses)
    pos = pos[pos["kind"] == "position"]
    assert list(pos["steps_count"]) == [6, 4, 2]
    assert list(pos["hits_count"]) == [4, 4, 0]


@pytest.mark.parametrize(
    ("version", "blamed", "rust"),
    [("0.5.18", True, False), ("0.5.21", False, True), ("0.5.23", False, False)],
)
def test_missing_details_blame_the_version_only_before_the_field(version, blamed, rust):
    info = {
        "internal_states": [{}],
        "version": version,
        "speculative_algorithm": "EAGLE",
    }
    why = details_missing_reason(info, "chat/completions")
    assert ("older releases give no per-request counts" in why) == blamed
    assert ("SGLANG_RUST_SERVER" in why) == rust
    if not blamed:
        assert "/v1/chat/completions" in why and "version is not the cause" in why
