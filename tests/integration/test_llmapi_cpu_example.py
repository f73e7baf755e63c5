"""``trtbench run examples/llmapi-cpu.yaml``: the LLM-API path end to end on a real tritonserver.

The bundled example, unchanged: two variants (baseline, DraftTarget K=4) built as
``llm_api.yaml`` plans for TensorRT-LLM 1.4.0rc4, deployed as Triton ``llmapi`` repositories
and served by the reference runtime, two concurrency tiers. Expected values come from the
definitions (acceptance length = 1 + accepted / verify steps; a DraftTarget step proposes K
drafts), from the files the run wrote (counted here independently of the summary code) and
from the lossless property (greedy speculative output = baseline output, compared here by
digest, not through trtbench's gate).
"""

from __future__ import annotations

import contextlib
import io
import json
import os

import pandas as pd
import pytest
import yaml

from tests.support.data import REPO_ROOT
from trtbench.cli import main

pytestmark = pytest.mark.integration

K = 4
REQUESTS = 8  # requests_per_tier in the example


@pytest.fixture(scope="module")
def example_run(tiny_models, tmp_path_factory):
    """Run the example once for the module; return (run dir, exit code, stdout)."""
    out = tmp_path_factory.mktemp("llmapi") / "run"
    cache = tiny_models["target"].parent.parent  # ${TRTBENCH_CACHE}/tiny-models/target
    before = os.environ.get("TRTBENCH_CACHE")
    os.environ["TRTBENCH_CACHE"] = str(cache)
    stdout = io.StringIO()
    try:
        with (
            contextlib.redirect_stdout(stdout),
            contextlib.redirect_stderr(io.StringIO()),
        ):
            main(
                [
                    "run",
                    str(REPO_ROOT / "examples" / "llmapi-cpu.yaml"),
                    "--out",
                    str(out),
                ]
            )
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    finally:
        if before is None:
            os.environ.pop("TRTBENCH_CACHE", None)
        else:
            os.environ["TRTBENCH_CACHE"] = before
    return out, code, stdout.getvalue()


def test_every_tier_completes(example_run):
    out, code, _ = example_run
    assert code == 0
    summary = pd.read_csv(out / "loadtest" / "summary.csv")
    assert list(zip(summary["variant"], summary["tier"], strict=True)) == [
        (v, t) for v in ("baseline", "draft-k4") for t in ("c1", "c4")
    ]
    assert (summary["error_count"] == 0).all()
    assert (summary["request_count"] == REQUESTS).all()
    # text_output only: the tokens were counted by re-tokenizing, and the run says so
    assert set(summary["output_token_source"]) == {"retokenized"}


def test_the_build_is_an_llm_api_plan_served_by_the_llmapi_model(example_run):
    out, _, _ = example_run
    build = json.loads((out / "engines" / "draft-k4" / "build.json").read_text())
    assert build["backend"] == "trtllm-pytorch"
    assert build["tensorrt_llm"]["version"] == "1.4.0rc4"
    assert build["tensorrt_llm"]["path"] == "llm-api"
    run = json.loads((out / "run.json").read_text())
    recorded = run["build"]["variants"]["draft-k4"]["tensorrt_llm"]
    assert (recorded["version"], recorded["path"]) == ("1.4.0rc4", "llm-api")
    model_yaml = out / "model_repo" / "draft-k4" / "tensorrt_llm" / "1" / "model.yaml"
    args = yaml.safe_load(model_yaml.read_text())
    assert args["triton_config"] == {"max_batch_size": 0, "decoupled": True}
    assert args["backend"] == "pytorch"
    assert args["speculative_config"]["decoding_type"] == "DraftTarget"
    assert args["speculative_config"]["max_draft_len"] == K
    # the plan trtllm-serve would take is the model.yaml minus model and triton_config
    plan = yaml.safe_load((out / "engines" / "draft-k4" / "llm_api.yaml").read_text())
    assert plan == {
        k: v for k, v in args.items() if k not in ("model", "triton_config")
    }


def test_acceptance_comes_from_the_servers_counts(example_run):
    out, _, _ = example_run
    summary = pd.read_csv(out / "loadtest" / "summary.csv").set_index(
        ["variant", "tier"]
    )
    responses = pd.read_csv(out / "loadtest" / "responses.csv")
    for tier in ("c1", "c4"):
        row = summary.loc[("draft-k4", tier)]
        assert row["spec_decode_counts_source"] in (
            "server_per_step",
            "server_request_totals",
        )
        mine = responses[
            (responses["variant"] == "draft-k4") & (responses["tier"] == tier)
        ]
        drafting = mine[mine["draft_tokens"] > 0]
        # every verify step of DraftTarget K=4 proposes exactly K drafts
        assert set(drafting["draft_tokens"]) == {K}
        assert (mine["accepted_draft_tokens"] <= mine["draft_tokens"]).all()
        steps = len(drafting)
        accepted = int(drafting["accepted_draft_tokens"].sum())
        assert row["verify_steps_count"] == steps
        assert row["proposed_draft_tokens_count"] == K * steps
        assert row["accepted_draft_tokens_count"] == accepted
        assert row["acceptance_length_tokens"] == pytest.approx(1 + accepted / steps)
        assert row["draft_acceptance_rate_ratio"] == pytest.approx(
            accepted / (K * steps)
        )
        assert 1.0 < row["acceptance_length_tokens"] <= 1 + K


def test_speculative_outputs_equal_the_baselines(example_run):
    out, _, _ = example_run
    outputs = pd.read_csv(out / "loadtest" / "outputs.csv")
    key = ["tier", "repeat", "request_index"]
    base = outputs[outputs["variant"] == "baseline"].set_index(key)["output_digest"]
    spec = outputs[outputs["variant"] == "draft-k4"].set_index(key)["output_digest"]
    assert len(spec) == 2 * REQUESTS
    assert spec.sort_index().equals(base.sort_index())


def test_ttft_splits_into_server_queue_and_prefill(example_run):
    out, _, _ = example_run
    requests = pd.read_csv(out / "loadtest" / "requests.csv")
    ok = requests[requests["error"].isna()]
    arrival, scheduled, first = (
        ok["server_arrival_ns"],
        ok["server_scheduled_ns"],
        ok["server_first_token_ns"],
    )
    # the server's stamps, on the client's clock, fall inside the client's send → first token
    assert (ok["sent_ns"] <= arrival + 1_000_000).all()  # 1 ms clock-offset tolerance
    assert (arrival <= scheduled).all() and (scheduled <= first).all()
    assert (first <= ok["first_token_ns"] + 1_000_000).all()
    summary = pd.read_csv(out / "loadtest" / "summary.csv")
    for _, row in summary.iterrows():
        mine = ok[(ok["variant"] == row["variant"]) & (ok["tier"] == row["tier"])]
        queue_ms = (mine["server_scheduled_ns"] - mine["server_arrival_ns"]) / 1e6
        prefill_ms = (mine["server_first_token_ns"] - mine["server_scheduled_ns"]) / 1e6
        assert row["server_queue_time_p50_ms"] == pytest.approx(queue_ms.median())
        assert row["server_prefill_time_p50_ms"] == pytest.approx(prefill_ms.median())
