"""``trtbench run --executor slurm`` through a real single-node Slurm cluster
(``slurm_cluster``), checked against the same spec run locally.

Three variants (baseline, draft-target, Medusa) of the small real models make two shards,
``s0`` (base, dt) and ``s1`` (base, med). One chain of commands, as a user would type them:
submit with ``--no-wait``; shard s1 is killed (``scancel`` of its array task) while it runs;
``trtbench collect`` gathers a partial run; the same ``run`` again resubmits s1 only and
gathers the whole run, which is compared with the local one. A second run whose jobs are
held (``--begin``) is stopped with SIGTERM. Expected values come from the definitions (a
speedup is the baseline's mean TPOT over the variant's, both from the same shard), from
Slurm itself (squeue, scontrol) and from the local run; none from the code under test.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from tests.support.run_specs import reference_run_spec, write_spec
from trtbench.cli import main

pytestmark = pytest.mark.integration

REQUESTS = 4
OUTPUT_TOKENS = 12
TIERS = ("c1", "c2")
POLL = ["--poll-s", "0.5", "--slurm-cpus", "1"]


def cli(argv: list) -> tuple[int, str, str]:
    """``trtbench ARGV`` in this process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main([str(a) for a in argv])
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


def slurm(*argv: str) -> str:
    """A Slurm command's stdout (SLURM_CONF is the session cluster's)."""
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def spec_path(tiny_models, tmp_path_factory) -> Path:
    spec = reference_run_spec(
        "slurm-test",
        tiny_models,
        [
            {"name": "base", "mode": "baseline"},
            {"name": "dt", "mode": "draft_target", "max_draft_len": 3},
            {"name": "med", "mode": "medusa", "medusa_choices": [[0], [0, 0], [1]]},
        ],
        max_batch_size=4,
        deploy={"ready_timeout_s": 120},
        profile={},
        requests=REQUESTS,
        output_tokens=OUTPUT_TOKENS,
    )
    return write_spec(tmp_path_factory.mktemp("slurm-spec"), spec)


@pytest.fixture(scope="module")
def local_run(spec_path, tmp_path_factory) -> Path:
    """The same spec run on this machine, every variant in one run."""
    out = tmp_path_factory.mktemp("local") / "run"
    code, _, err = cli(["run", spec_path, "--out", out])
    assert code == 0, err
    return out


def wait_started(job: str, task: int, folder: Path) -> None:
    """Until task ``task`` of array ``job`` has made its shard's run directory ``folder``
    (what the test later asserts is set aside), while Slurm still has it RUNNING. A task
    RUNNING in squeue may not yet have started its ``trtbench run`` (a busy host), so the
    scheduler's state alone is not waited on. pytest's timeout bounds the wait."""
    while True:
        line = slurm("squeue", "-h", "-r", "-j", job, "-o", "%i %T")
        running = f"{job}_{task} RUNNING" in line
        assert running or f"{job}_{task} " in line, f"task left the queue: {line!r}"
        if running and folder.is_dir():
            return
        time.sleep(0.2)


@pytest.fixture(scope="module")
def chain(slurm_cluster, spec_path, tmp_path_factory) -> dict:
    """submit --no-wait → kill s1 → collect (partial) → run again (s1 resubmitted)."""
    out = tmp_path_factory.mktemp("slurm") / "run"
    steps: dict = {"out": out}
    steps["submit"] = cli(
        ["run", spec_path, "--executor", "slurm", "--out", out, "--no-wait", *POLL]
    )
    state = json.loads((out / "cluster" / "state.json").read_text())
    job = state["submissions"][0]["job_id"]
    steps["job"] = job
    wait_started(job, 1, out / "shards" / "s1")
    slurm("scancel", f"{job}_1")
    steps["collect"] = cli(["collect", out, "--poll-s", "0.5"])
    steps["partial_summary"] = pd.read_csv(out / "loadtest" / "summary.csv")
    steps["partial_report"] = (out / "report.md").read_text()
    steps["partial_run_json"] = json.loads((out / "run.json").read_text())
    steps["killed_log"] = (out / "cluster" / "logs" / f"{job}_1.log").read_text()
    steps["s0_run_json"] = (out / "shards" / "s0" / "run.json").read_bytes()
    steps["resubmit"] = cli(
        ["run", spec_path, "--executor", "slurm", "--out", out, *POLL]
    )
    return steps


def test_no_wait_submits_both_shards_as_one_array(chain):
    code, _, err = chain["submit"]
    assert code == 0, err
    assert f"submitted 2 of 2 shard(s) as job array {chain['job']}" in err
    assert "s0 (base, dt), s1 (base, med)" in err
    assert f"trtbench collect {chain['out']}" in err


def test_a_killed_shard_gives_a_partial_run_naming_it(chain):
    code, out, err = chain["collect"]
    assert code == 1
    assert f"shard s1 (base, med) job {chain['job']}_1 CANCELLED" in err
    assert "PARTIAL RUN: shard(s) s1" in out
    # s0 is kept: its variants are gathered, s1's are not.
    summary = chain["partial_summary"]
    assert sorted(set(summary["variant"])) == ["base@s0", "dt"]
    report = chain["partial_report"]
    assert report.splitlines()[0].endswith("PARTIAL")
    assert f"**s1** (med): job {chain['job']}_1 CANCELLED" in report
    last = [line for line in chain["killed_log"].splitlines() if line.strip()][-1]
    assert last in report  # the last line of its log
    cluster = chain["partial_run_json"]["cluster"]
    assert cluster["complete"] is False and cluster["missing"] == ["s1"]
    assert cluster["shards"]["s1"]["state"] == "CANCELLED"


def test_the_second_run_resubmits_only_the_missing_shard(chain):
    code, out, err = chain["resubmit"]
    assert code == 0, err
    assert re.search(
        r"submitted 1 of 2 shard\(s\) as job array \d+: s1 \(base, med\)", err
    )
    state = json.loads((chain["out"] / "cluster" / "state.json").read_text())
    shards = [s["shard"] for s in state["submissions"]]
    assert shards == ["s0", "s1", "s1"]
    assert state["submissions"][2]["job_id"] != chain["job"]
    # s0's results are the ones from the first submission, untouched.
    assert (chain["out"] / "shards" / "s0" / "run.json").read_bytes() == chain[
        "s0_run_json"
    ]
    assert "shards: s0 done" in err and "s1 done" in err
    # The killed attempt's directory is set aside, not deleted.
    assert (chain["out"] / "shards" / f"s1.attempt-{chain['job']}_1").is_dir()


def test_the_merged_summary_holds_every_variant_and_tier(chain):
    summary = pd.read_csv(chain["out"] / "loadtest" / "summary.csv")
    assert list(zip(summary["variant"], summary["tier"], strict=True)) == [
        (v, t) for v in ("base@s0", "dt", "base@s1", "med") for t in TIERS
    ]
    assert (summary["request_count"] == REQUESTS).all()
    assert (summary["error_count"] == 0).all()
    assert (summary["output_sequence_length_mean_tokens"] == OUTPUT_TOKENS).all()


def test_speedups_are_over_the_baseline_of_the_same_shard(chain):
    s = pd.read_csv(chain["out"] / "loadtest" / "summary.csv").set_index(
        ["variant", "tier"]
    )
    tpot = "time_per_output_token_mean_ms"
    for variant, base in (("dt", "base@s0"), ("med", "base@s1")):
        for tier in TIERS:
            want = s.at[(base, tier), tpot] / s.at[(variant, tier), tpot]
            assert s.at[(variant, tier), "tpot_speedup_ratio"] == pytest.approx(want)


def test_acceptance_and_outputs_equal_the_local_run(chain, local_run):
    def rows(path: Path) -> list[tuple]:
        with path.open(newline="") as f:
            return sorted(tuple(r.values()) for r in csv.DictReader(f))

    merged = chain["out"] / "loadtest"
    assert rows(merged / "acceptance.csv") == rows(
        local_run / "loadtest" / "acceptance.csv"
    )
    keys = ["tier", "request_index", "output_token_ids"]
    mine = pd.read_csv(merged / "outputs.csv", dtype=str)
    theirs = pd.read_csv(local_run / "loadtest" / "outputs.csv", dtype=str)
    for variant in ("dt", "med"):
        a = mine[mine["variant"] == variant][keys].sort_values(keys[:2])
        b = theirs[theirs["variant"] == variant][keys].sort_values(keys[:2])
        assert a.to_numpy().tolist() == b.to_numpy().tolist()
    summary = pd.read_csv(merged / "summary.csv").set_index("variant")
    assert (summary.loc[["dt", "med"], "lossless_status"] == "ok").all()
    assert (summary.loc[["dt", "med"], "lossless_match_ratio"] == 1.0).all()


def test_the_report_names_the_shards(chain, slurm_cluster):
    report = (chain["out"] / "report.md").read_text()
    assert "PARTIAL" not in report
    state = json.loads((chain["out"] / "cluster" / "state.json").read_text())
    s1_job = state["submissions"][2]["job_id"]
    node = slurm_cluster.node
    assert f"| s0 | base, dt | {chain['job']}_0 | COMPLETED | {node} |" in report
    assert f"| s1 | base, med | {s1_job}_1 | COMPLETED | {node} |" in report
    doc = json.loads((chain["out"] / "recommendation.json").read_text())
    assert doc["partial"] is False and doc["missing_shards"] == []
    shards = pd.read_csv(chain["out"] / "cluster" / "shards.csv")
    assert list(shards["shard"]) == ["s0", "s1"]
    assert list(shards["variants"]) == ["base;dt", "base;med"]


def test_a_changed_spec_is_refused_for_the_same_run_directory(
    chain, spec_path, tmp_path
):
    changed = tmp_path / "spec.yaml"
    changed.write_text(
        spec_path.read_text().replace("requests_per_tier: 4", "requests_per_tier: 5")
    )
    state = (chain["out"] / "cluster" / "state.json").read_bytes()
    code, _, err = cli(
        ["run", changed, "--executor", "slurm", "--out", chain["out"], *POLL]
    )
    assert code == 2
    assert "spec file changed since its first submission" in err
    assert (chain["out"] / "cluster" / "state.json").read_bytes() == state


def test_sigterm_cancels_every_job_and_exits_143(slurm_cluster, spec_path, tmp_path):
    """Jobs held an hour (``--begin``) stay pending; SIGTERM to the driver cancels them.
    The array asked for one shard at a time: Slurm's record of it says so."""
    out = tmp_path / "run"
    argv = [sys.executable, "-m", "trtbench.cli", "run", str(spec_path)]
    argv += ["--executor", "slurm", "--out", str(out), *POLL]
    argv += ["--sbatch-arg=--begin=now+3600", "--max-running-shards", "1"]
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    state_json = out / "cluster" / "state.json"
    while proc.poll() is None and not state_json.is_file():
        time.sleep(0.2)
    job = json.loads(state_json.read_text())["submissions"][0]["job_id"]
    record = slurm("scontrol", "show", "job", "-o", job)
    assert set(re.findall(r"ArrayTaskThrottle=(\d+)", record)) == {"1"}, record
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert f"cancelled job array(s) {job} (scancel)" in err
    assert slurm("squeue", "-h", "-j", job).strip() == ""
    states = re.findall(r"JobState=(\S+)", slurm("scontrol", "show", "job", "-o", job))
    assert states and set(states) == {"CANCELLED"}
    run = json.loads((out / "run.json").read_text())
    assert run["run"]["interrupted"] is True and run["run"]["stop_signal"] == "SIGTERM"
    assert run["cluster"]["complete"] is False
    assert json.loads(state_json.read_text())["cancelled"] is True


def test_a_spec_without_a_baseline_is_refused_before_submitting(
    slurm_cluster, tiny_models, tmp_path
):
    spec = reference_run_spec(
        "no-baseline",
        tiny_models,
        [{"name": "dt", "mode": "draft_target", "max_draft_len": 3}],
        max_batch_size=2,
        deploy={},
        profile={},
        requests=2,
        output_tokens=4,
    )
    out = tmp_path / "run"
    code, _, err = cli(
        ["run", write_spec(tmp_path, spec), "--executor", "slurm", "--out", out]
    )
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "mode: baseline" in lines[0]
    assert not out.exists()
