"""A shard as Slurm and its directory say it is: hand-built directories and task states."""

from __future__ import annotations

from pathlib import Path

from trtbench.cluster.shards import Shard
from trtbench.cluster.slurm import TaskState
from trtbench.cluster.state import Submission
from trtbench.cluster.watch import cells_done, status_line, view_of
from trtbench.core.run_dir import RunDir

S1 = Shard(1, ("base", "med"))
SUB = Submission("s1", "40", 1, "2026-01-01T00:00:00+00:00")


def _shard(tmp_path: Path, exit_code: str | None, summary: bool) -> RunDir:
    rd = RunDir(tmp_path / "run")
    d = rd.root / "shards" / "s1"
    d.mkdir(parents=True)
    if exit_code is not None:
        (d / "exit_code").write_text(exit_code + "\n")
    if summary:
        (d / "loadtest").mkdir()
        (d / "loadtest" / "summary.csv").write_text("variant,tier\n")
    return rd


def test_completed_with_exit_0_and_a_summary_is_done(tmp_path):
    rd = _shard(tmp_path, "0", True)
    v = view_of(rd, S1, SUB, TaskState("40", 1, "COMPLETED", node="gpu-3"), 8)
    assert (v.state, v.phase, v.done, v.job, v.host.node) == (
        "COMPLETED",
        "done",
        True,
        "40_1",
        "gpu-3",
    )


def test_completed_without_a_summary_is_a_failure(tmp_path):
    rd = _shard(tmp_path, "0", False)
    v = view_of(rd, S1, SUB, TaskState("40", 1, "COMPLETED"), 8)
    assert v.phase == "failed" and not v.done and "no results" in v.state


def test_files_lagging_behind_slurm_are_waited_for_when_asked(tmp_path):
    rd = _shard(tmp_path, None, False)  # nothing visible here yet
    task = TaskState("40", 1, "COMPLETED", exit_code="0:0")
    waiting = view_of(rd, S1, SUB, task, 8, wait_for_files=True)
    assert (waiting.phase, waiting.done) == ("running", False)
    assert view_of(rd, S1, SUB, task, 8).phase == "failed"
    # A failed task is never waited for.
    failed = TaskState("40", 1, "FAILED", exit_code="1:0")
    assert view_of(rd, S1, SUB, failed, 8, wait_for_files=True).phase == "failed"


def test_forgotten_by_slurm_the_exit_code_decides(tmp_path):
    ok = view_of(_shard(tmp_path / "a", "0", True), S1, SUB, None, 8)
    assert (ok.state, ok.done) == ("COMPLETED", True)
    bad = view_of(_shard(tmp_path / "b", "3", True), S1, SUB, None, 8)
    assert (bad.state, bad.phase, bad.done) == ("FAILED (exit 3)", "failed", False)
    lost = view_of(_shard(tmp_path / "c", None, False), S1, SUB, None, 8)
    assert (lost.state, lost.phase) == ("UNKNOWN", "failed")


def test_a_failed_shard_carries_its_log_tail(tmp_path):
    rd = _shard(tmp_path, "1", False)
    logs = rd.root / "cluster" / "logs"
    logs.mkdir(parents=True)
    (logs / "40_1.log").write_text("starting\ntrtbench: error: boom\n")
    v = view_of(rd, S1, SUB, TaskState("40", 1, "FAILED"), 8)
    assert v.tail == ("starting", "trtbench: error: boom")


def test_never_submitted(tmp_path):
    v = view_of(RunDir(tmp_path), S1, None, None, 8)
    assert (v.state, v.phase, v.job, v.log) == ("NOT SUBMITTED", "failed", "", None)


def test_cells_are_counted_from_the_tier_pass_lines(tmp_path):
    (tmp_path / "trtbench.log").write_text(
        "x INFO trtbench.profiling.loadtest.driver.tier_pass: base c1: 4 requests, 0 failed, complete\n"
        "x INFO trtbench.pipeline.run: something else\n"
        "x INFO trtbench.profiling.loadtest.driver.tier_pass: med c1: 4 requests, 1 failed, partial\n"
        "x INFO trtbench.profiling.loadtest.driver.tier_pass: med c4 (round 1): 16 requests, 0 failed, complete\n"
    )
    assert cells_done(tmp_path) == 3
    assert cells_done(tmp_path / "none") == 0


def test_status_line(tmp_path):
    rd = _shard(tmp_path, None, False)
    (rd.root / "shards" / "s1" / "trtbench.log").write_text(
        "tier_pass: base c1: 4 requests, 0 failed\n"
    )
    running = view_of(rd, S1, SUB, TaskState("40", 1, "RUNNING", node="vm"), 4)
    unsent = view_of(
        rd, Shard(0, ("base", "dt")), None, None, 4
    )  # never submitted: failed
    assert status_line([running]) == "shards: s1 running 1/4 cells on vm"
    assert status_line([unsent]).startswith("shards: s0 failed 0/4 cells")
