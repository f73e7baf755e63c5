"""A server that dies between the cells of an interleaved run: its variant's later cells are
not measured, and every place that reads the run says so (issue: missing evidence never
strengthens the answer).

Two scripted tritonservers (``tests/data/scripted_model``), ``a`` and ``b``, tiers c1 and c2,
3 interleaved rounds. Once ``b``'s first cell has ended, its server's process group gets
SIGKILL. ``a`` goes on and completes every tier; ``b`` has at most one finished round at one
tier, so none of its tiers may read ``complete``: each is ``partial`` (a round finished, the
rest were not measured) or ``failed`` (none); the cells after the death are passes that say
"not measured", the error line names them, and summary.csv has a row for each of ``b``'s
tiers, measured or not. Nothing here is timed: the kill follows the end of a cell.
"""

from __future__ import annotations

import os
import signal

import numpy as np
import pandas as pd
import pytest

from tests.support.scripted_triton import scripted_repo_module
from trtbench.pipeline.loadtest import connect
from trtbench.profiling.loadtest.clients.target import LoadSettings
from trtbench.profiling.loadtest.driver.interleave import Lane, run_interleaved
from trtbench.profiling.loadtest.files.schemas import read_records_csv
from trtbench.profiling.loadtest.records.outcome import NOT_MEASURED, failure_lines
from trtbench.profiling.loadtest.records.record_sink import CsvRecordSink, RecordFiles
from trtbench.profiling.loadtest.stats.trusted_summary import summarize_trusted
from trtbench.profiling.loadtest.workload.design import INTERLEAVED, plan_cells
from trtbench.profiling.loadtest.workload.prompts import synthetic_prompts
from trtbench.profiling.loadtest.workload.schedule import Tier
from trtbench.triton_repo.server import ServerConfig, TritonServer

pytestmark = pytest.mark.integration

TIERS = [Tier(concurrency=1), Tier(concurrency=2)]
SETTINGS = LoadSettings(requests_per_tier=4, warmup_requests=0, repeats=3)
TIMETABLE = {"first_delay_ms": 20, "step_ms": 10, "tokens_per_step": 1}


class KillAfterFirstCell:
    """Progress that SIGKILLs ``victim``'s server group once its first cell has ended."""

    def __init__(self, victim: str, server: TritonServer) -> None:
        self.victim, self.server, self.current, self.done = victim, server, None, False

    def tier_started(self, variant, tier, total) -> None:
        self.current = variant

    def request_done(self, ok: bool) -> None:
        pass

    def tier_ended(self) -> None:
        if self.current == self.victim and not self.done:
            self.done = True
            os.killpg(self.server.process.pid, signal.SIGKILL)
            self.server.process.wait()


@pytest.fixture
def run(tmp_path):
    module = scripted_repo_module()
    servers = {}
    for name in ("a", "b"):
        repo = module.write_scripted_repo(tmp_path / name, {"scripted": TIMETABLE})
        config = ServerConfig(repo, tmp_path / f"{name}.log", models=("scripted",))
        servers[name] = TritonServer(config).start()
    try:
        kill = KillAfterFirstCell("b", servers["b"])
        files = {
            v: RecordFiles(tmp_path / f"{v}.req.csv", tmp_path / f"{v}.resp.csv")
            for v in servers
        }
        sinks = {v: CsvRecordSink(f) for v, f in files.items()}
        lanes = [
            Lane(
                v, connect(s.grpc_url, "scripted"), sinks[v].__enter__(), progress=kill
            )
            for v, s in servers.items()
        ]
        prompts = synthetic_prompts(4, 8, 0.0, 16, 0.0, np.random.default_rng(0), None)
        try:
            results = run_interleaved(
                lanes,
                prompts,
                TIERS,
                SETTINGS,
                plan_cells(INTERLEAVED, ["a", "b"], TIERS, 3, 0),
            )
        finally:
            for sink in sinks.values():
                sink.__exit__(None, None, None)
        req = pd.concat(
            [
                read_records_csv(f.requests)
                for f in files.values()
                if f.requests.is_file()
            ]
        )
        resp = pd.concat(
            [
                read_records_csv(f.responses)
                for f in files.values()
                if f.responses.is_file()
            ]
        )
        yield results, req, resp
    finally:
        for server in servers.values():
            server.stop()


def test_the_dead_variant_is_complete_nowhere_and_says_what_was_not_measured(run):
    results, req, resp = run
    assert [t.status for t in results["a"].tiers] == ["complete", "complete"]
    b = results["b"]
    assert b.server_failure
    assert [t.tier for t in b.tiers] == [
        "c1",
        "c2",
    ]  # a row for each tier, measured or not
    assert all(t.status in ("partial", "failed") for t in b.tiers), b.tiers
    assert any(t.reason.startswith(NOT_MEASURED) for t in b.tiers), b.tiers
    (line,) = failure_lines(results)
    assert line.startswith("variant b") and "not measured after it: " in line, line


def test_summary_has_a_non_complete_row_for_each_of_its_tiers(run):
    results, req, resp = run
    statuses = {
        (v, t.tier): (t.status, t.reason) for v, r in results.items() for t in r.tiers
    }
    summary = summarize_trusted(req, resp, statuses=statuses).summary
    rows = summary.set_index(["variant", "tier"])["tier_status"].to_dict()
    assert rows[("a", "c1")] == rows[("a", "c2")] == "complete"
    assert rows[("b", "c1")] in ("partial", "failed")
    assert rows[("b", "c2")] in ("partial", "failed")
