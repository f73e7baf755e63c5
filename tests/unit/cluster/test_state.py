"""state.json written and read back; a damaged one is named."""

from __future__ import annotations

import pytest

from trtbench.cluster.shards import Shard
from trtbench.cluster.state import (
    ClusterState,
    Submission,
    read_state,
    state_path,
    write_state,
)
from trtbench.core.errors import DataFileError
from trtbench.core.run_dir import RunDir


def test_round_trip_and_the_latest_submission_per_shard(tmp_path):
    rd = RunDir(tmp_path)
    assert read_state(rd) is None
    state = ClusterState(
        "/s/spec.yaml",
        "ab" * 32,
        "base",
        (Shard(0, ("base", "dt")), Shard(1, ("base", "med"))),
        {"partition": "gpu"},
        (
            Submission("s0", "10", 0, "t0"),
            Submission("s1", "10", 1, "t0"),
            Submission("s1", "12", 1, "t1"),
        ),
    )
    write_state(rd, state)
    back = read_state(rd)
    assert back == state
    assert back.current() == {"s0": state.submissions[0], "s1": state.submissions[2]}


def test_a_state_without_its_shards_is_named(tmp_path):
    rd = RunDir(tmp_path)
    state_path(rd).parent.mkdir(parents=True)
    state_path(rd).write_text('{"schema_version": 1, "spec": "/s"}')
    with pytest.raises(DataFileError, match="state.json: KeyError"):
        read_state(rd)
