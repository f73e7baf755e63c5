"""``loadtest.restart_every``: the interleaved design on fresh servers every k rounds, end to
end on the small real models (``trtbench run``, two variants, two rounds, k = 1).

What must hold (docs/measurement.md, "Server instances"): each round runs on its own set of
server processes (two starts in each server's log, two distinct pids), the records of the
first block survive the second's start (requests.csv holds both rounds), rounds.csv has both
rounds of every cell, run.json's design records the term and the starts
(``design.instance``, ``server_starts`` = variants × blocks), and the first block's servers,
stopped while the second's load, had exited before the second block's first cell began (no
cell measured beside a server that is not its own).
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from datetime import datetime

import pandas as pd
import pytest

from tests.support.run_specs import reference_run_spec, write_spec
from trtbench.cli import main

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def restarted_run(tiny_models, tmp_path_factory):
    root = tmp_path_factory.mktemp("restart")
    spec = reference_run_spec(
        "restart-test",
        tiny_models,
        [
            {"name": "base", "mode": "baseline"},
            {"name": "ng", "mode": "ngram", "max_draft_len": 3},
        ],
        max_batch_size=2,
        deploy={"ready_timeout_s": 120},
        profile={"memory_interval_ms": 200},
        concurrency=(1,),
        requests=3,
        output_tokens=8,
        repeats=2,
        design="interleaved",
        restart_every=1,
        instance_sd=0.02,
    )
    out = root / "out"
    stdout = io.StringIO()
    try:
        with (
            contextlib.redirect_stdout(stdout),
            contextlib.redirect_stderr(io.StringIO()),
        ):
            main(["run", str(write_spec(root, spec)), "--out", str(out)])
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    return out, code


def test_each_round_runs_on_fresh_servers(restarted_run):
    out, code = restarted_run
    assert code == 0, (out / "trtbench.log").read_text()[-3000:]
    for name in ("base", "ng"):
        log = (out / "server" / f"{name}.log").read_text()
        assert len(re.findall(r"^==== .* start ", log, re.M)) == 2
    pids = re.findall(r"tritonserver pid (\d+)", (out / "trtbench.log").read_text())
    assert len(set(pids)) == 4


def test_records_of_both_blocks_are_kept(restarted_run):
    out, _ = restarted_run
    req = pd.read_csv(out / "loadtest" / "requests.csv")
    for name in ("base", "ng"):
        mine = req[req["variant"] == name]
        assert sorted(mine["repeat"].unique()) == [0, 1]
    rounds = pd.read_csv(out / "loadtest" / "rounds.csv")
    assert sorted(rounds.groupby(["variant", "tier"])["round"].nunique().unique()) == [
        2
    ]


def test_run_json_records_the_instance_term_and_the_starts(restarted_run):
    out, _ = restarted_run
    design = json.loads((out / "run.json").read_text())["design"]
    assert design["instance"] == {"sd": 0.02, "restart_every": 1}
    assert len(design["order"]) == 4  # 2 rounds x 2 variants x 1 tier
    assert design["server_starts"] == 4  # 2 variants x 2 blocks


def test_a_blocks_servers_have_exited_before_the_next_block_measures(restarted_run):
    out, _ = restarted_run
    log = (out / "trtbench.log").read_text()
    stamp = r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) "

    def when(text: str) -> datetime:  # the log's local time, as an aware datetime
        return datetime.strptime(text, "%Y-%m-%d %H:%M:%S,%f").astimezone()

    started = [int(p) for p in re.findall(r"tritonserver pid (\d+), log", log)]
    exited = {
        int(pid): when(t)
        for t, pid in re.findall(stamp + r".*tritonserver pid (\d+) exited", log, re.M)
    }
    assert set(exited) == set(started)  # every server's exit is logged once it is gone
    first_block = started[:2]  # the first two starts are the first block's
    rounds = pd.read_csv(out / "loadtest" / "rounds.csv")
    second = min(
        datetime.fromisoformat(t)
        for t in rounds.loc[rounds["round"] == 1, "started_at"]
    )
    assert max(exited[p] for p in first_block) < second
