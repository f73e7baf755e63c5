"""``trtbench loadtest --api openai-completions`` against the SGLang stand-in: each request's
``sglext.spec_tokens_details`` fills its tier's acceptance figures and rows, with the source
named.

A contract test of SGLang's formats (``tests/support/sglang_standin.py``), not a run of
SGLang. Each request of 12 tokens decodes, after its first token, in verify steps accepting
2, 0, 3, 1, 2 of K = 3 drafts: ``spec_verify_ct`` 5, ``spec_num_proposed_drafts`` 5 × 3 = 15,
``spec_num_correct_drafts`` 8, ``spec_correct_drafts_histogram`` [1, 1, 2, 1] (steps that
accepted 0, 1, 2, 3 drafts). A tier of 4 requests: 20 steps, 60 proposed, 32 accepted:
acceptance length 1 + 32/20 = 2.6, draft acceptance rate 32/60; steps that accepted ≥ 1, 2, 3
drafts: 16, 12, 4 of 20; exactly 0, 1, 2, 3: 4, 4, 8, 4 of 20.
"""

from __future__ import annotations

import pandas as pd
import pytest

from tests.support.sglang_standin import SGLangStandIn, sglang_standin_thread
from tests.support.vllm_serve import openai_loadtest

pytestmark = pytest.mark.integration


def run(standin: SGLangStandIn, tiny_models, tmp_path, capsys):
    out = tmp_path / "run"
    standin.model = str(tiny_models["target"])
    with sglang_standin_thread(standin) as url:
        openai_loadtest(
            capsys,
            url,
            tiny_models["target"],
            out,
            variant="sglang",
            concurrency="1",
            output_tokens=12,
        )
    return out / "loadtest"


def test_spec_tokens_details_fill_the_tier(tiny_models, tmp_path, capsys):
    files = run(SGLangStandIn(), tiny_models, tmp_path, capsys)
    summary = pd.read_csv(files / "summary.csv").iloc[0]
    assert summary["spec_decode_counts_source"] == "sglang_spec_tokens_details"
    assert summary["acceptance_length_tokens"] == pytest.approx(2.6)
    assert summary["draft_acceptance_rate_ratio"] == pytest.approx(32 / 60)
    assert summary["verify_steps_count"] == 20
    assert summary["proposed_draft_tokens_count"] == 60
    assert summary["accepted_draft_tokens_count"] == 32
    # each request: 1 + 8/5 (SGLang's own spec_accept_length would say 12/5)
    assert summary["acceptance_length_per_request_mean_tokens"] == pytest.approx(2.6)
    requests = pd.read_csv(files / "requests.csv", keep_default_na=False)
    assert list(requests["verify_steps"]) == [5] * 4
    assert list(requests["accepted_drafts_histogram"]) == ["1 1 2 1"] * 4
    assert set(requests["spec_counts_source"]) == {"sglang_spec_tokens_details"}
    acceptance = pd.read_csv(files / "acceptance.csv")
    assert set(acceptance["source"]) == {"sglang_spec_tokens_details"}
    pos = acceptance[acceptance["kind"] == "position"]
    assert list(pos["draft_position"]) == [1, 2, 3]
    assert list(pos["steps_count"]) == [20, 20, 20]
    assert list(pos["hits_count"]) == [16, 12, 4]
    hist = acceptance[acceptance["kind"] == "histogram"]
    assert list(hist["draft_position"]) == [0, 1, 2, 3]
    assert list(hist["hits_count"]) == [4, 4, 8, 4]
    assert list(hist["value_ratio"]) == pytest.approx([0.2, 0.2, 0.4, 0.2])


def test_an_sglang_without_the_field_gives_no_counts_and_says_why(
    tiny_models, tmp_path, capsys
):
    """sglang before 0.5.19 ignores return_spec_tokens_details: no counts, a warning."""
    files = run(
        SGLangStandIn(details=False, version="0.5.15"), tiny_models, tmp_path, capsys
    )
    summary = pd.read_csv(files / "summary.csv").iloc[0]
    assert pd.isna(summary["spec_decode_counts_source"])
    assert pd.isna(summary["acceptance_length_tokens"])
    log = (files.parent / "trtbench.log").read_text()
    assert "SGLang 0.5.15 (EAGLE) sent no sglext.spec_tokens_details" in log
    assert "0.5.19" in log
    # the stand-in's running average, named and refused
    assert (
        "avg_spec_accept_length 2.4 is a running average over the server's life" in log
    )
    assert "sglang:spec_accept_length" in log  # its gauges, refused as tier figures


def test_an_sglang_that_has_the_field_but_sent_none_is_not_blamed_on_its_version(
    tiny_models, tmp_path, capsys
):
    """SGLang 0.5.21 has return_spec_tokens_details (it came in 0.5.19): a reply without
    the sglext chunk on /v1/completions is not the version's doing, and the log must not
    say it is."""
    files = run(
        SGLangStandIn(details=False, version="0.5.21"), tiny_models, tmp_path, capsys
    )
    summary = pd.read_csv(files / "summary.csv").iloc[0]
    assert pd.isna(summary["acceptance_length_tokens"])
    log = (files.parent / "trtbench.log").read_text()
    assert "SGLang 0.5.21 (EAGLE) sent no sglext.spec_tokens_details" in log
    assert "/v1/completions" in log
    assert "older releases give no per-request counts" not in log
    assert "SGLANG_RUST_SERVER" in log  # 0.5.19–0.5.22's embedded Rust server lacks it


def test_adaptive_drafting_counts_nominal_proposals_so_no_rate_or_positions(
    tiny_models, tmp_path, capsys
):
    """speculative_adaptive: the steps propose 3, 1, 3, 1, 2 drafts (10 per request, 40 per
    tier) but SGLang's details say spec_verify_ct × 3 = 15 (60): the draft acceptance rate
    would read 32/60 = 0.53 where it is 32/40 = 0.8, and position j's steps would be all 20
    where 20, 12, 8 proposed it. trtbench keeps what the details count right (20 steps, 32
    accepted: acceptance length 2.6; the histogram of accepted drafts) and gives no rate and
    no position rows, with the reason in the log."""
    files = run(SGLangStandIn(adaptive=True), tiny_models, tmp_path, capsys)
    summary = pd.read_csv(files / "summary.csv").iloc[0]
    assert summary["acceptance_length_tokens"] == pytest.approx(2.6)
    assert summary["verify_steps_count"] == 20
    assert pd.isna(summary["draft_acceptance_rate_ratio"])
    acceptance = pd.read_csv(files / "acceptance.csv")
    assert acceptance[acceptance["kind"] == "position"].empty
    hist = acceptance[acceptance["kind"] == "histogram"]
    assert list(hist["hits_count"]) == [4, 4, 8, 4]
    log = (files.parent / "trtbench.log").read_text()
    assert "speculative_adaptive" in log


def test_actual_proposals_by_position_give_each_positions_own_denominator(
    tiny_models, tmp_path, capsys
):
    """An SGLang that counts the proposals (spec_num_proposed_drafts 10 per request and
    spec_num_proposed_drafts_by_position [5, 3, 2]): rate 32/40; position j's steps are
    those that proposed it, 20, 12, 8, of which 16, 12, 4 accepted it (0.8, 1.0, 0.5)."""
    files = run(SGLangStandIn(by_position=True), tiny_models, tmp_path, capsys)
    summary = pd.read_csv(files / "summary.csv").iloc[0]
    assert summary["draft_acceptance_rate_ratio"] == pytest.approx(32 / 40)
    assert summary["proposed_draft_tokens_count"] == 40
    assert summary["acceptance_length_tokens"] == pytest.approx(2.6)
    acceptance = pd.read_csv(files / "acceptance.csv")
    pos = acceptance[acceptance["kind"] == "position"]
    assert list(pos["draft_position"]) == [1, 2, 3]
    assert list(pos["steps_count"]) == [20, 12, 8]
    assert list(pos["hits_count"]) == [16, 12, 4]
    hist = acceptance[acceptance["kind"] == "histogram"]
    assert list(hist["hits_count"]) == [4, 4, 8, 4]
