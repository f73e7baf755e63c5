"""``trtbench loadtest --workers 2`` against a real tritonserver (the scripted model).

Two client processes share each tier: every request index of the tier is sent exactly
once (the same prompts as with one process), the summary counts what was sent, and a
SIGINT to the parent alone (it runs in its own session, so the workers hear of it only
through the parent) ends the run with exit 130, keeps the finished rows and leaves no
worker process behind.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest

from tests.support.cli import run_cli
from tests.support.faults import data_rows, log_line, start_cli, wait_for
from tests.support.scripted_triton import loadtest_args, scripted_server
from trtbench.triton_repo.server import TritonServer

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def scripted(tmp_path_factory):
    with scripted_server(tmp_path_factory.mktemp("scripted")) as server:
        yield server


def args(server: TritonServer, out: Path, variant: str, *more: str) -> list:
    return loadtest_args(
        server, out, variant, "--workers", "2", *more, output_len=16, warmup=2
    )


def test_two_workers_send_every_index_once(scripted, tmp_path, capsys):
    out = tmp_path / "run"
    code, _, err = run_cli(
        args(scripted, out, "w2", "--concurrency", "4,2", "--requests-per-tier", "21"),
        capsys,
    )
    assert code == 0, err
    requests = pd.read_csv(out / "loadtest" / "requests.csv")
    for tier in ("c4", "c2"):
        rows = requests[requests["tier"] == tier]
        assert sorted(rows["request_index"]) == list(range(21))
        assert rows["error"].isna().all()
    summary = pd.read_csv(out / "loadtest" / "summary.csv").set_index("tier")
    assert summary.loc["c4", "request_count"] == 21
    assert summary.loc["c2", "request_count"] == 21
    assert set(summary["tier_status"]) == {"complete"}
    assert list((out / "loadtest" / "parts").glob("*.w*.csv")) == []  # merged away
    run = json.loads((out / "run.json").read_text())["loadtest"]["w2"]
    assert run["tiers"]["c4"]["requests"] == 21 and run["tiers_done"] == ["c4", "c2"]


def workers_of(pid: int) -> list[psutil.Process]:
    try:
        kids = psutil.Process(pid).children()
    except psutil.NoSuchProcess:
        return []
    # the workers run `spawn_main`; multiprocessing's resource tracker is a child too.
    # A child that has exited but is not reaped yet (a zombie: a short-lived helper
    # process, seen on a busy host) has no command line: it is not a worker.
    return [p for p in kids if "spawn_main" in " ".join(_cmdline(p))]


def _cmdline(p: psutil.Process) -> list[str]:
    try:
        return p.cmdline()
    except (psutil.ZombieProcess, psutil.NoSuchProcess, psutil.AccessDenied):
        return []


def alive_after(pids: list[int], grace_s: float) -> list[int]:
    """Of ``pids``, those still running (not zombies) after up to ``grace_s`` seconds."""
    procs = []
    for pid in pids:
        try:
            procs.append(psutil.Process(pid))
        except psutil.NoSuchProcess:
            continue
    _, alive = psutil.wait_procs(procs, timeout=grace_s)
    return [p.pid for p in alive if p.status() != psutil.STATUS_ZOMBIE]


def test_sigint_to_the_parent_exits_130_keeping_rows_and_no_worker(scripted, tmp_path):
    """SIGINT once tier c2 has rows in a worker's part file (its start is logged before
    the workers pass their barrier; rows come in chunks). c2 may last 300 s: it runs until
    the signal, however slow the host."""
    out = tmp_path / "run"
    more = ("--concurrency", "2,4", "--duration-s", "300")
    cli = start_cli(args(scripted, out, "int", *more), tmp_path, "loadtest")
    try:
        pids = wait_for(
            lambda: (
                [p.pid for p in workers_of(cli.pid)]
                if len(workers_of(cli.pid)) == 2
                else None
            ),
            120,
            "two worker processes",
        )
        assert len(set(pids)) == 2
        cli.running_until(
            lambda: log_line(
                out / "trtbench.log", r" int c2: pass 1 on 2 client processes"
            ),
            120,
            "tier c2 to start",
        )
        parts = [out / "loadtest" / "parts" / f"int.w{k}.requests.csv" for k in (0, 1)]
        cli.running_until(
            lambda: sum(map(data_rows, parts)) > 0, 120, "a row of tier c2 on disk"
        )
        cli.stop_with(signal.SIGINT, 130)
    finally:
        cli.kill()
    assert not alive_after(pids, 5.0)
    requests = pd.read_csv(out / "loadtest" / "requests.csv")
    c2 = requests[requests["tier"] == "c2"]
    assert len(c2) > 0 and c2["error"].isna().all()
    assert c2["request_index"].is_unique
    summary = pd.read_csv(out / "loadtest" / "summary.csv").set_index("tier")
    assert summary.loc["c2", "tier_status"] == "interrupted"
    assert summary.loc["c2", "request_count"] == len(c2)
    assert "c4" not in summary.index or summary.loc["c4", "request_count"] == 0
    assert json.loads((out / "run.json").read_text())["loadtest"]["int"]["interrupted"]


def test_a_death_the_parent_sees_stops_every_worker(scripted, tmp_path):
    """The parent's health check (a managed server's process poll) says the server died
    during the tier: both workers stop, the tier is partial, the reason is kept."""
    import asyncio  # noqa: PLC0415

    from trtbench.profiling.loadtest.clients.grpc_client import probe_model  # noqa: PLC0415
    from trtbench.profiling.loadtest.clients.health import Health  # noqa: PLC0415
    from trtbench.profiling.loadtest.clients.target import LoadSettings, LoadTarget  # noqa: PLC0415
    from trtbench.profiling.loadtest.driver.workers import run_workers  # noqa: PLC0415
    from trtbench.profiling.loadtest.records.record_sink import RecordFiles  # noqa: PLC0415
    from trtbench.profiling.loadtest.workload.prompts import Prompt  # noqa: PLC0415
    from trtbench.profiling.loadtest.workload.schedule import Tier  # noqa: PLC0415

    interface = asyncio.run(probe_model(scripted.grpc_url, "scripted"))
    target = LoadTarget(scripted.grpc_url, interface, "stream")
    files = [
        RecordFiles(tmp_path / f"w{k}.requests.csv", tmp_path / f"w{k}.responses.csv")
        for k in range(2)
    ]

    def health() -> Health:  # dead once worker 0 has flushed its first chunk of rows
        f = files[0].responses
        gone = f.is_file() and f.stat().st_size > 4096
        return (
            Health("tritonserver exited with code -9", fatal=True) if gone else Health()
        )

    t0 = time.monotonic()
    result = run_workers(
        target,
        [Prompt("p", "hello", 1, 16, "words")],
        [Tier(concurrency=2)],
        LoadSettings(requests_per_tier=None, duration_s=300, warmup_requests=0),
        "dead",
        files=files,
        health=health,
    )
    assert time.monotonic() - t0 < 150  # the death ended the tier, not its 300 s
    assert result.server_failure == "tritonserver exited with code -9"
    (tier,) = result.tiers
    assert tier.status == "partial" and tier.requests > 0
    rows = sum(len(pd.read_csv(f.requests)) for f in files)
    assert rows == tier.requests
