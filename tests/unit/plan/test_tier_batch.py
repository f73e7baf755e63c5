"""Effective batch from request/response records (``trtbench.plan.tier_batch``), hand-worked.

Pass 0 of tier c2 (times in ns; a request decodes from its first to its last token):

* A decodes [0, 100]; decode responses at 10, 50, 100 -> decoding then: {A}, {A, B},
  {A, C} -> B_A = (1 + 2 + 2) / 3 = 5/3 (an empty response of B at 55 is not a step).
* B decodes [40, 60]; decode responses at 50, 60 -> {A, B}, {A, B} -> B_B = 2.
* C decodes [80, 200]; decode responses at 100, 150, 200 -> {A, C}, {C, E}, {C}
  -> B_C = 5/3.
* E decodes [120, 160] but ended in the warm-up (in_window false): it counts in C's batch,
  its own responses are not averaged. D failed (no tokens): ignored.

Pass 1 (same clock values, a later pass): F decodes [0, 100] alone, responses at 50, 100
-> B_F = 1 (A, B, C of pass 0 must not count).

B_eff(c2) = mean over measured requests (5/3, 2, 5/3, 1) = 19/12. (Pooling the responses
instead would give (1+2+2+2+2+2+2+1+1+1)/10 = 1.6: the per-request mean is what the TPOT
mean over requests sees.)

Admissions (other requests of the pass whose first token came strictly inside a request's
decode window), per decode token (output tokens − the first response's 1):
A: B (40) and C (80) inside (0, 100) -> 2 / 3; B: none inside (40, 60) -> 0 / 2;
C: E (120, warm-up but prefilled all the same) inside (80, 200) -> 1 / 3; F: alone -> 0 / 2
(pass 0's requests are another pass). A(c2) = (2/3 + 0 + 1/3 + 0) / 4 = 1/4.
"""

from __future__ import annotations

import pandas as pd
import pytest

from trtbench.core.export import records_to_frame, write_csv
from trtbench.core.records import RequestRecord, ResponseRecord
from trtbench.core.run_dir import RunDir
from trtbench.plan.tier_batch import effective_batch, read_effective_batch, with_batch
from trtbench.profiling.loadtest.files.schemas import (
    REQUESTS_SCHEMA,
    RESPONSES_SCHEMA,
    requests_table,
)

# request -> (repeat, first, last, decode response times, in_window, error)
REQUESTS = {
    "A": (0, 0, 100, (10, 50, 100), True, None),
    "B": (0, 40, 60, (50, 60), True, None),
    "C": (0, 80, 200, (100, 150, 200), True, None),
    "D": (0, None, None, (), True, "timeout"),
    "E": (0, 120, 160, (160,), False, None),
    "F": (1, 0, 100, (50, 100), True, None),
}
EXPECTED = 19 / 12
ADMISSIONS = 1 / 4


def _request(name, repeat, first, last, n, error):
    return RequestRecord(
        variant="spec",
        tier="c2",
        concurrency=2,
        request_rate_per_s=None,
        request_id=name,
        task_id=f"synthetic-{name}",
        scheduled_ns=0,
        sent_ns=0,
        first_token_ns=first,
        last_token_ns=last,
        end_ns=(last or 0) + 1,
        input_tokens=8,
        requested_output_tokens=n + 1,
        output_tokens=0 if error else n + 1,
        token_responses=0 if error else n + 1,
        empty_responses=1,
        echoed_tokens=0,
        first_response_tokens=0 if error else 1,
        draft_tokens=None,
        accepted_draft_tokens=None,
        input_token_source="tokenizer",
        output_token_source="output_ids",
        error=error,
        repeat=repeat,
    )


def _records():
    requests, responses, window = [], [], []
    for name, (repeat, first, last, times, kept, error) in REQUESTS.items():
        requests.append(_request(name, repeat, first, last, len(times), error))
        window.append(kept)
        if first is None:
            continue
        stamps = [(first, 1), *((t, 1) for t in times)]
        if name == "B":
            stamps.append((55, 0))  # an empty response: not a decode step
        responses += [
            ResponseRecord("spec", "c2", name, i, t, tokens, False)
            for i, (t, tokens) in enumerate(stamps)
        ]
    req = requests_table(records_to_frame(requests)).assign(in_window=window)
    return req, records_to_frame(responses)


def test_effective_batch_hand_worked():
    req, resp = _records()
    out = effective_batch(req, resp)
    assert out["variant"].tolist() == ["spec"] and out["tier"].tolist() == ["c2"]
    assert out["batch_effective"].iloc[0] == pytest.approx(EXPECTED)
    assert out["admissions_per_token"].iloc[0] == pytest.approx(ADMISSIONS)
    assert out["requests_count"].iloc[0] == 4  # A, B, C, F (D failed, E warm-up)


def test_without_window_or_repeat_columns_every_request_counts_in_one_pass():
    req, resp = _records()
    one = req[req["request_id"].isin(["A", "B", "C", "E"])].drop(
        columns=["in_window", "repeat"]
    )
    # E now measured: its response at 160 sees {C, E} -> 2; B_eff = (5/3+2+5/3+2)/4
    out = effective_batch(one, resp)
    assert out["batch_effective"].iloc[0] == pytest.approx((5 / 3 + 2 + 5 / 3 + 2) / 4)
    # E measured too: nothing starts inside (120, 160) -> 0; A = (2/3 + 0 + 1/3 + 0) / 4
    assert out["admissions_per_token"].iloc[0] == pytest.approx(1 / 4)


def test_read_effective_batch_from_the_run_files(tmp_path):
    req, resp = _records()
    run = RunDir(tmp_path)
    assert read_effective_batch(tmp_path) is None  # no records: caller falls back to c
    write_csv(req, run.requests_csv, REQUESTS_SCHEMA)
    assert read_effective_batch(tmp_path) is None  # responses.csv still absent
    write_csv(resp, run.responses_csv, RESPONSES_SCHEMA)
    out = read_effective_batch(tmp_path)
    assert out["batch_effective"].iloc[0] == pytest.approx(EXPECTED)
    assert out["admissions_per_token"].iloc[0] == pytest.approx(ADMISSIONS)


def test_with_batch_falls_back_to_the_concurrency():
    summary = pd.DataFrame(
        {"variant": ["spec", "spec"], "tier": ["c2", "c4"], "concurrency": [2, 4]}
    )
    batch = pd.DataFrame(
        {
            "variant": ["spec"],
            "tier": ["c2"],
            "batch_effective": [EXPECTED],
            "admissions_per_token": [ADMISSIONS],
            "requests_count": [4],
        }
    )
    out = with_batch(summary, batch)
    assert out["batch"].tolist() == pytest.approx([EXPECTED, 4.0])
    assert out["admissions_per_token"].iloc[0] == pytest.approx(ADMISSIONS)
    assert pd.isna(out["admissions_per_token"].iloc[1])  # not measured: no stall
    assert out["batch_source"].tolist() == ["records", "concurrency"]
    assert with_batch(summary, None)["batch_source"].tolist() == ["concurrency"] * 2
