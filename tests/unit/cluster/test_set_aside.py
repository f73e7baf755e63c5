"""An earlier attempt's shard directory is set aside before a resubmission: moved, never
deleted, and nothing happens for a shard whose attempt never made its directory."""

from __future__ import annotations

from trtbench.cluster.driver import set_aside_attempts
from trtbench.cluster.shards import Shard
from trtbench.cluster.state import Submission
from trtbench.core.run_dir import RunDir

S0 = Shard(0, ("base", "dt"))
S1 = Shard(1, ("base", "med"))
S2 = Shard(2, ("base", "ng"))


def test_a_started_attempt_is_moved_under_its_job_and_task(tmp_path):
    rd = RunDir(tmp_path)
    (tmp_path / "shards" / "s1").mkdir(parents=True)
    (tmp_path / "shards" / "s1" / "run.json").write_text("{}")
    moved = set_aside_attempts(rd, [S1], {"s1": Submission("s1", "41", 1, "t0")})
    aside = tmp_path / "shards" / "s1.attempt-41_1"
    assert moved == {"s1": aside}
    assert (aside / "run.json").read_text() == "{}"
    assert not (tmp_path / "shards" / "s1").exists()


def test_an_attempt_cancelled_before_it_started_has_nothing_to_set_aside(tmp_path):
    """The task was cancelled (or failed) before its ``trtbench run`` made ``s1``."""
    rd = RunDir(tmp_path)
    (tmp_path / "shards").mkdir()
    moved = set_aside_attempts(rd, [S1], {"s1": Submission("s1", "41", 1, "t0")})
    assert moved == {}
    assert list((tmp_path / "shards").iterdir()) == []


def test_a_never_submitted_shard_is_tagged_unsubmitted_and_others_untouched(tmp_path):
    rd = RunDir(tmp_path)
    for name in ("s0", "s2"):
        (tmp_path / "shards" / name).mkdir(parents=True)
    moved = set_aside_attempts(rd, [S2], {"s0": Submission("s0", "41", 0, "t0")})
    assert moved == {"s2": tmp_path / "shards" / "s2.attempt-unsubmitted"}
    assert sorted(p.name for p in (tmp_path / "shards").iterdir()) == [
        "s0",
        "s2.attempt-unsubmitted",
    ]
