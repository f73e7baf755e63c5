"""A drift of the host between two identical variants: the sequential design reads it as a
difference between them, the interleaved design does not.

Two twin tritonservers of the scripted model (``tests/data/scripted_model``: first token 20 ms
after the request arrives, then one token every 10 ms: 170 ms for 16 tokens; identical
timetables). Each design runs the same six cells (twins ``a`` and ``b`` × tier c1 × 3
rounds, 4 requests of 16 tokens each) through :func:`run_interleaved` in the design's order
(:func:`plan_cells`). When three of the six cells have ended, the test creates the servers'
``slow_file``: every later request runs twice as slow (340 ms), a drift of the host.

* sequential (a's three passes, then b's): a is measured fast, b slow, so every round's
  output tok/s ratio b / a is about 170 / 340 = 0.5 and its 95 % interval over the rounds
  lies far below 1: the twins read "significantly" different.
* interleaved: the flip falls inside round 1 (cells 0-1 are round 0, 2-3 round 1, 4-5 round
  2): rounds 0 and 2 see both twins at one speed (ratio about 1), round 1 reads about 0.5 or
  2, so the interval over the rounds holds 1: no difference is claimed.

The timetable is sleeps on the server; a busy host adds its own delay to both sides of a
ratio (pulling it towards 1), so the bounds below hold the claim itself with margin: a
sequential ratio between 0.35 and 0.8 whose interval lies below 1 (significant), an
interleaved interval that holds 1.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.support.scripted_triton import scripted_repo_module
from trtbench.pipeline.loadtest import connect
from trtbench.profiling.loadtest.clients.target import LoadSettings
from trtbench.profiling.loadtest.driver.interleave import Lane, run_interleaved
from trtbench.profiling.loadtest.files.rounds_table import rounds_table
from trtbench.profiling.loadtest.files.schemas import read_records_csv
from trtbench.profiling.loadtest.records.record_sink import CsvRecordSink, RecordFiles
from trtbench.profiling.loadtest.stats.trusted_summary import summarize_trusted
from trtbench.profiling.loadtest.workload.design import (
    INTERLEAVED,
    SEQUENTIAL,
    plan_cells,
)
from trtbench.profiling.loadtest.workload.prompts import synthetic_prompts
from trtbench.profiling.loadtest.workload.schedule import Tier
from trtbench.profiling.report.paired import paired_ratio
from trtbench.triton_repo.server import ServerConfig, TritonServer

pytestmark = pytest.mark.integration

TIMETABLE = {"first_delay_ms": 20, "step_ms": 10, "tokens_per_step": 1}
TIERS = [Tier(concurrency=1)]
SETTINGS = LoadSettings(requests_per_tier=4, warmup_requests=0, repeats=3)


@pytest.fixture(scope="module")
def twins(tmp_path_factory):
    """Two scripted servers, ``a`` and ``b``, sharing one slow_file (absent at first)."""
    root = tmp_path_factory.mktemp("twins")
    slow = root / "slow"
    module = scripted_repo_module()
    servers = {}
    for name in ("a", "b"):
        repo = module.write_scripted_repo(
            root / name, {"scripted": {**TIMETABLE, "slow_file": str(slow)}}
        )
        config = ServerConfig(repo, root / f"{name}.log", models=("scripted",))
        servers[name] = TritonServer(config).start()
    try:
        yield servers, slow
    finally:
        for server in servers.values():
            server.stop()


class FlipAfter:
    """Progress that creates ``slow`` once ``cells`` cells (of any twin) have ended."""

    def __init__(self, slow: Path, cells: int) -> None:
        self.slow, self.cells, self.ended = slow, cells, 0

    def tier_started(self, variant, tier, total) -> None:
        pass

    def request_done(self, ok: bool) -> None:
        pass

    def tier_ended(self) -> None:
        self.ended += 1
        if self.ended == self.cells:
            self.slow.touch()


def ratio_b_over_a(twins, tmp_path, design):
    servers, slow = twins
    slow.unlink(missing_ok=True)
    flip = FlipAfter(slow, 3)
    prompts = synthetic_prompts(4, 8, 0.0, 16, 0.0, np.random.default_rng(0), None)
    cells = plan_cells(design, ["a", "b"], TIERS, 3, seed=0)
    files = {
        v: RecordFiles(tmp_path / f"{v}.req.csv", tmp_path / f"{v}.resp.csv")
        for v in servers
    }
    sinks = {v: CsvRecordSink(f) for v, f in files.items()}
    lanes = []
    for v, server in servers.items():
        target = connect(server.grpc_url, "scripted")
        lanes.append(Lane(v, target, sinks[v].__enter__(), progress=flip))
    try:
        run_interleaved(lanes, prompts, TIERS, SETTINGS, cells)
    finally:
        for sink in sinks.values():
            sink.__exit__(None, None, None)
        slow.unlink(missing_ok=True)
    req = pd.concat([read_records_csv(f.requests) for f in files.values()])
    resp = pd.concat([read_records_csv(f.responses) for f in files.values()])
    passes = summarize_trusted(req, resp).passes
    rounds = rounds_table(passes, [])
    return paired_ratio(rounds, "b", "a", "c1", "output_tokens_per_s")


def test_sequential_reads_the_drift_as_a_difference(twins, tmp_path):
    got = ratio_b_over_a(twins, tmp_path, SEQUENTIAL)
    assert got.rounds == 3
    # 170 ms / 340 ms per request; what a busy host adds to both sides pulls it up (seen
    # under a CPU burner: 0.61 [0.45, 0.81])
    assert 0.35 < got.ratio < 0.8
    assert got.high is not None and got.high < 1.0  # "significantly" slower: wrong


def test_interleaved_does_not(twins, tmp_path):
    got = ratio_b_over_a(twins, tmp_path, INTERLEAVED)
    assert got.rounds == 3
    assert got.low is not None and got.low < 1.0 < got.high  # no difference claimed
