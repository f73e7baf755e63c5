"""One spec, two serving stacks: ``trtbench run`` serves a reference variant with a real
tritonserver and a draft-target variant (K=4) with a real vLLM CPU server (``.venv-vllm``),
measures both with the same tiers and writes them side by side in one summary and report.

What could be wrong and is checked: the vLLM variant's command line (``trtbench deploy
--check``), its token counts (fixed output length, from vLLM's token ids), its speculative
figures (per request from each stream's usage chunk, vLLM's per-request "detailed" metrics,
asked for with ``deploy.vllm_args``: the source is named and the counts equal vLLM's Prometheus
counters over the same tier), both variants in summary.csv and report.md,
the vLLM server's log in ``server/``, no vLLM process left once the run has ended, and the
lossless gate across stacks: vLLM's greedy draft-target output equals the reference engine's
baseline output on every prompt (both float32).
Skipped, with the reason, without a vLLM interpreter (``bash scripts/bootstrap_vllm.sh``).
"""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from tests.support.cli import run_cli
from tests.support.run_specs import reference_run_spec, write_spec
from trtbench.core.errors import ConfigError
from trtbench.core.proctree import group_members
from trtbench.spec.serving import resolve_vllm_python

pytestmark = pytest.mark.integration

K = 4
OUTPUT_TOKENS = 12
REQUESTS = 4
TIERS = ["c1", "c2"]


@pytest.fixture(scope="module")
def mixed_run(tiny_models, tmp_path_factory):
    """``trtbench build`` then ``run`` of the spec; (run dir, build/run outputs)."""
    try:
        python = resolve_vllm_python(None)
    except ConfigError as exc:
        pytest.skip(str(exc))
    root = tmp_path_factory.mktemp("mixed")
    spec = reference_run_spec(
        "mixed",
        tiny_models,
        [
            {"name": "base", "mode": "baseline"},
            {
                "name": "vllm-dt",
                "mode": "draft_target",
                "max_draft_len": K,
                "server": "vllm",
            },
        ],
        max_batch_size=2,
        deploy={
            "ready_timeout_s": 400,
            "vllm_python": str(python),
            "vllm_kv_cache_gib": 0.25,
            "vllm_args": ["--per-request-spec-decode-metrics", "detailed"],
        },
        profile={"memory_interval_ms": 100, "metrics_interval_ms": 500},
        requests=REQUESTS,
        output_tokens=OUTPUT_TOKENS,
    )
    spec_path = write_spec(root, spec)
    out = root / "run"
    return spec_path, out


def _vllm_groups_left(log: str) -> list[int]:
    """Living processes of the run's vLLM servers: each server is the leader of its own
    process group (its PID, from the run's log), and its engine-core children are in it.
    Only this run's: another run on the host (a second test session) has its own groups."""
    leaders = [int(m) for m in re.findall(r"vLLM server pid (\d+)", log)]
    assert leaders, "the run's log names no vLLM server"
    return [pid for leader in leaders for pid in group_members(leader)]


def test_deploy_check_prints_the_vllm_command_line(mixed_run, capsys):
    spec_path, out = mixed_run
    code, stdout, stderr = run_cli(["build", spec_path, "--out", out], capsys)
    assert code == 0, stdout + stderr
    code, stdout, stderr = run_cli(["deploy", out, "--check"], capsys)
    assert code == 0, stdout + stderr
    [line] = [x for x in stdout.splitlines() if x.startswith("vllm-dt:")]
    assert "served by vLLM" in line and "--port PORT" in line
    assert "--host 127.0.0.1" in line and "--served-model-name vllm-dt" in line
    config = json.loads(line.split("--speculative-config ")[1].split()[0].strip("'"))
    assert config["method"] == "draft_model"
    assert config["num_speculative_tokens"] == K
    assert not (out / "model_repo" / "vllm-dt").exists()  # no Triton repository


def test_run_measures_both_stacks_side_by_side(mixed_run, capsys):
    spec_path, out = mixed_run
    code, stdout, stderr = run_cli(["run", spec_path, "--out", out], capsys)
    assert code == 0, stdout + stderr
    # the stage line says servers came up; which one served what is in the run's log
    log = (out / "trtbench.log").read_text()
    assert "vllm-dt: serving vllm-dt with vLLM at http://127.0.0.1:" in log
    assert not _vllm_groups_left(log), "a vLLM process outlived the run"

    summary = pd.read_csv(out / "loadtest" / "summary.csv")
    got = {(r.variant, r.tier) for r in summary.itertuples()}
    assert got == {(v, t) for v in ("base", "vllm-dt") for t in TIERS}
    req = pd.read_csv(out / "loadtest" / "requests.csv")
    vreq = req[req["variant"] == "vllm-dt"]
    assert len(vreq) == REQUESTS * len(TIERS)
    assert (vreq["output_tokens"] == OUTPUT_TOKENS).all()

    v = summary[summary["variant"] == "vllm-dt"]
    # Per request, from the usage chunk of each stream (vLLM's per-request "detailed"
    # metrics): per step where a stream's chunks line up with vLLM's steps, else the
    # request's totals; a tier with one request of totals is named so.
    assert set(v["spec_decode_counts_source"]) <= {
        "server_per_step",
        "server_request_totals",
    }
    assert (v["proposed_draft_tokens_count"] > 0).all()
    # The same counts through vLLM's other path: its Prometheus counters around each tier.
    run = json.loads((out / "run.json").read_text())
    tiers = run["run"]["variants"]["vllm-dt"]["tiers"]
    for tier, reqs in vreq.groupby("tier"):
        [prom] = tiers[tier]["server_spec_counts"]
        assert (prom["draft_tokens"], prom["accepted"]) == (
            reqs["draft_tokens"].sum(),
            reqs["accepted_draft_tokens"].sum(),
        ), tier
        assert prom["draft_tokens"] <= K * prom["drafts"]
    # Across stacks: vLLM's greedy draft-target tokens equal the reference baseline's
    # (float32 on both sides; the lossless gate compares them prompt by prompt).
    assert list(v["lossless_compared_count"]) == [REQUESTS] * len(TIERS)
    assert list(v["lossless_match_count"]) == [REQUESTS] * len(TIERS)
    assert set(v["lossless_status"]) == {"ok"}

    assert (out / "server" / "vllm-dt.log").stat().st_size > 0
    assert (out / "server" / "base.log").stat().st_size > 0
    report = (out / "report.md").read_text()
    assert "vllm-dt" in report and "base" in report
    assert set(run["run"]["variants"]) == {"base", "vllm-dt"}
