"""Fault injection against a real tritonserver: what trtbench does when things go wrong.

Every fault is real — a SIGKILLed server, a signal to the ``trtbench`` process, a second
process writing into the same run directory, a damaged file, an unwritable path — and
``trtbench`` runs as a subprocess in its own session, as a user runs it. After each test no
process whose command line names the test's temporary directory (tritonserver, its
``triton_python_backend_stub``, trtbench itself) may be left, within 20 s.

Fault → expected behaviour (the source of docs/reliability.md):

Dead server
    tritonserver SIGKILLed in the middle of a tier of ``trtbench run`` (two variants, each with
    its own server): the tier stops within 1 s on a quiet host (the tests hold 10 s, far
    below a request's timeout; ``scripts/bench_timing.py`` prints the figure); no later tier of that variant runs; the next
    variant is still measured; the command exits 1 with one stderr line
    ``trtbench: error: variant <v>, tier <t>: tritonserver exited with code -9 …``.
    ``loadtest/summary.csv`` has ``tier_status``: finished tiers ``complete``, the stopped one
    ``partial`` (some requests succeeded) or ``failed`` (none did), no row (or not complete)
    for the tiers that never ran. Speedups are computed only between complete tiers: where the
    baseline's tier is not complete ``tpot_speedup_ratio`` is empty and ``speedup_note`` says
    why; no ``inf`` in summary.csv or report.md. report.md says which tier is partial/failed;
    ``run.json`` ``run.variants.<v>.server_failure`` holds the reason. Nothing is orphaned.

Stop signals (SIGTERM, SIGHUP, SIGINT)
    ``trtbench run`` stopped by SIGTERM mid-tier exits 143 without a traceback or "Aborted";
    finished tiers are kept as ``complete``, the running one is ``interrupted``; the server and
    its Python stub are stopped; ``run.json`` has ``run.interrupted`` true and
    ``run.stop_signal`` "SIGTERM". ``trtbench loadtest`` stopped by SIGHUP exits 129 the same
    way. ``trtbench deploy RUN --serve`` stopped by SIGINT exits 130 with every server process
    gone and its ports free again.

One writer per run directory
    A second ``trtbench loadtest --out RUN`` while another writes into RUN exits 2 at once with
    one stderr line naming the holder (``trtbench PID <pid>``); the first one, stopped by
    Ctrl-C afterwards, keeps every finished request; once it ended, a new writer succeeds. ``RUN/server/<variant>.log`` is appended to,
    never truncated: one ``==== trtbench`` header per server start (the dead-server run's
    start and a later ``deploy --serve`` of the same variant).

Records stream to disk
    While a tier runs its records are appended to ``loadtest/parts/<variant>.requests.csv``
    (the file grows during the tier); when the command ends they are merged into
    ``requests.csv`` and the part files are removed. (Bounded memory over a long run:
    ``scripts/soak.py``.)

Damaged files read back
    ``trtbench report RUN`` exits 2 with one stderr line when ``summary.csv`` is cut off
    mid-row (the line names the file and the line), when ``run.json`` has a
    ``schema_version`` newer than this trtbench reads (the line names the version) and when
    ``run.json`` is not JSON (the line names run.json).

Unwritable output
    ``trtbench loadtest --out PATH`` where PATH lies under a regular file exits 2 with one line
    before it connects: no request reaches the server (its ``nv_inference_request_success``
    count is unchanged) and the answer is the same when ``--url`` is a closed port.
"""

from __future__ import annotations

import csv
import json
import re
import shutil
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pandas as pd
import psutil
import pytest

from tests.support.cli import run_cli as run_in_process
from tests.support.faults import (
    Cli,
    can_listen,
    closed_port,
    data_rows,
    describe,
    find_inf,
    log_line,
    log_time,
    metric_total,
    processes_mentioning,
    run_cli,
    stamp_time,
    start_cli,
    still_running,
    wait_for,
    wait_gone,
)
from tests.support.run_specs import reference_run_spec, write_spec
from tests.support.scripted_triton import loadtest_args, scripted_server
from tests.support.timing import report_timing
from trtbench.triton_repo.ports import port_in_use

pytestmark = pytest.mark.integration

REQUESTS = 16
OUTPUT_TOKENS = 100  # with REQUESTS, tier c2 lasts seconds: a fault lands inside it
IN_TIER_S = 0.5  # how far into the load test's tier c4 the SIGHUP comes
DETECTION_S = 1.0  # the target on a quiet host (scripts/bench_timing.py prints it)
DETECTION_MARGIN_S = 10.0  # what the tests hold: far below any request timeout
START_TIMEOUT_S = 300  # a server start on a busy machine
STUB = "triton_python_backend_stub"


def bench_spec(models: dict[str, Path]) -> dict:
    """Two reference variants, three closed-loop tiers of a few seconds each, measured one
    variant after the other (``design: sequential``) so that base's tier c2 follows its c1:
    the faults come at a known cell. A dead lane of the interleaved design stops that
    variant's later cells the same way (``profiling/loadtest/driver/interleave.py``)."""
    return reference_run_spec(
        "faults",
        models,
        [
            {"name": "base", "mode": "baseline"},
            {"name": "dt", "mode": "draft_target", "max_draft_len": 3},
        ],
        max_batch_size=4,
        deploy={"ready_timeout_s": 240},
        profile={"memory_interval_ms": 100, "metrics_interval_ms": 500},
        requests=REQUESTS,
        output_tokens=OUTPUT_TOKENS,
        concurrency=(1, 2, 4),
        design="sequential",
    )


@pytest.fixture(autouse=True)
def no_orphans(tmp_path):
    """After each test: nothing whose command line names its tmp dir is left (20 s)."""
    yield
    left = wait_gone(tmp_path)
    assert not left, "processes left behind:\n" + "\n".join(left)


@pytest.fixture(scope="module")
def spec_path(tiny_models, tmp_path_factory) -> Path:
    """The bench spec. No separate ``trtbench build``: ``trtbench run`` runs the build stage
    itself (a reference build writes only build.json), so a prebuilt copy would save
    nothing."""
    return write_spec(tmp_path_factory.mktemp("spec"), bench_spec(tiny_models))


def copy_run(source: Path, dest: Path) -> Path:
    shutil.copytree(source, dest)
    return dest


@dataclass
class Faulted:
    """A ``trtbench run`` that met a fault in tier c2 of its first variant."""

    run: Path
    code: int
    stdout: str
    stderr: str
    fault_wall: float  # time.time() of the fault
    fault_mono_ns: int  # the same moment on CLOCK_MONOTONIC (the records' clock)
    before: list[str]  # the server and stub processes just before the fault
    leftovers: list[str]  # processes of the run still there 20 s after it ended


def server_processes(run: Path, variant: str) -> list[psutil.Process]:
    """The tritonserver serving ``variant`` of ``run`` and its descendants (the stubs)."""
    flag = f"--model-repository={run / 'model_repo' / variant}"
    servers = [p for p in processes_mentioning(run) if flag in p.info["cmdline"]]
    assert len(servers) == 1, [describe(p) for p in processes_mentioning(run)]
    return [servers[0], *servers[0].children(recursive=True)]


def requests_started(metrics_url: str, model: str) -> float:
    """Requests ``model`` took in so far (its ``nv_inference_request_success``). The
    models here are decoupled Python models whose ``execute`` only queues the request: the
    backend counts a request when ``execute`` returns, as it starts, not when it ends."""
    return metric_total(metrics_url, "nv_inference_request_success", model) or 0.0


def server_metrics_url(run: Path, variant: str) -> str:
    """The /metrics URL of the tritonserver serving ``variant`` of ``run`` (its
    ``--metrics-port``; it listens on 127.0.0.1)."""
    argv = server_processes(run, variant)[0].cmdline()
    (port,) = [a.split("=", 1)[1] for a in argv if a.startswith("--metrics-port=")]
    return f"http://127.0.0.1:{port}/metrics"


def run_into_tier_c2(spec: Path, run: Path) -> Cli:
    """Start ``trtbench run``; return once base's tier c1 ended and c2's first request
    reached the server. The end of c1 is logged before c2 begins: on a busy host a fault
    would come between the two tiers if only that line were waited for. No wait after
    that: c2 lasts about 2 s, all of it left for the fault to land in."""
    cli = start_cli(["run", spec, "--out", run], run.parent, "run")
    try:
        cli.running_until(
            lambda: log_line(run / "trtbench.log", r" base c1: \d+ requests"),
            START_TIMEOUT_S,
            "base tier c1 to end",
        )
        assert "complete" in log_line(run / "trtbench.log", r" base c1: ")
        metrics = server_metrics_url(run, "base")
        before = requests_started(metrics, "ensemble")  # every request of c1 ended
        cli.running_until(
            lambda: requests_started(metrics, "ensemble") > before,
            START_TIMEOUT_S,
            "base tier c2's first request at the server",
        )
    except BaseException:
        cli.kill()
        raise
    return cli


def fault_run(
    spec: Path, run: Path, fault: Literal["kill-server", "sigterm"]
) -> Faulted:
    """Run into base's tier c2, then SIGKILL its tritonserver or SIGTERM trtbench."""
    cli = run_into_tier_c2(spec, run)
    try:
        procs = server_processes(run, "base")
        before = [describe(p) for p in procs]
        wall, mono = time.time(), time.monotonic_ns()
        if fault == "kill-server":
            procs[0].send_signal(signal.SIGKILL)
        else:
            cli.proc.send_signal(signal.SIGTERM)
        code = cli.wait(600)
    finally:
        cli.kill()
    # the server and stubs seen before the fault by PID, and anything naming the tmp dir
    leftovers = wait_gone(run.parent) + still_running(procs)
    return Faulted(run, code, cli.stdout(), cli.stderr(), wall, mono, before, leftovers)


@pytest.fixture(scope="module")
def killed(spec_path, tmp_path_factory) -> Faulted:
    """``trtbench run`` with base's tritonserver SIGKILLed in tier c2."""
    run = tmp_path_factory.mktemp("killed") / "run"
    return fault_run(spec_path, run, "kill-server")


@pytest.fixture(scope="module")
def terminated(spec_path, tmp_path_factory) -> Faulted:
    """``trtbench run`` sent SIGTERM in base's tier c2."""
    run = tmp_path_factory.mktemp("sigterm") / "run"
    return fault_run(spec_path, run, "sigterm")


def summary_of(run: Path) -> pd.DataFrame:
    return pd.read_csv(run / "loadtest" / "summary.csv")


def raw_summary(run: Path) -> dict[tuple[str, str], dict[str, str]]:
    """summary.csv as text cells, by (variant, tier) (an empty cell is '')."""
    with (run / "loadtest" / "summary.csv").open(newline="") as f:
        return {(r["variant"], r["tier"]): r for r in csv.DictReader(f)}


def statuses(run: Path) -> dict[tuple[str, str], str]:
    return {k: r["tier_status"] for k, r in raw_summary(run).items()}


def assert_server_and_stub_were_there(before: list[str]) -> None:
    assert any("tritonserver" in p for p in before), before
    assert any(STUB in p for p in before), before


# --- dead server --------------------------------------------------------------------


def test_killed_server_stops_its_tier_long_before_a_request_timeout(killed):
    line = log_line(killed.run / "trtbench.log", r" base c2: \d+ requests")
    assert line is not None, "no end-of-tier line for base c2 in trtbench.log"
    assert re.search(r"(partial|failed) \(tritonserver exited", line), line
    detected = log_time(line) - killed.fault_wall  # the log's clock is in ms
    report_timing(
        "faults: killed server's tier ended after", detected, DETECTION_S, "s"
    )
    assert -0.002 <= detected < DETECTION_MARGIN_S, (detected, line)
    requests = pd.read_csv(killed.run / "loadtest" / "requests.csv")
    base = requests[requests["variant"] == "base"]
    c2 = base[base["tier"] == "c2"]
    # every record of the tier ended soon after the kill (none waited for its timeout)
    late = c2[c2["end_ns"] > killed.fault_mono_ns + DETECTION_MARGIN_S * 1e9]
    assert late.empty, late[["request_id", "end_ns", "error"]]
    # no later tier of the killed variant ran
    assert set(base["tier"]) <= {"c1", "c2"}
    memory = pd.read_csv(killed.run / "memory.csv")
    assert "tier:c4" not in set(memory.loc[memory["variant"] == "base", "phase"])


def test_killed_server_exits_1_naming_variant_tier_and_reason(killed):
    assert killed.code == 1, killed.stderr
    errors = [
        ln for ln in killed.stderr.splitlines() if ln.startswith("trtbench: error:")
    ]
    assert len(errors) == 1, killed.stderr
    assert errors[0].startswith(
        "trtbench: error: variant base, tier c2: tritonserver exited with code -9"
    ), errors[0]
    assert "Traceback" not in killed.stderr


def test_killed_server_next_variant_is_still_measured(killed):
    rows = statuses(killed.run)
    assert [rows.get(("dt", t)) for t in ("c1", "c2", "c4")] == ["complete"] * 3, rows
    summary = summary_of(killed.run)
    dt = summary[summary["variant"] == "dt"]
    assert (dt["request_count"] == REQUESTS).all()
    assert (dt["error_count"] == 0).all()
    run = json.loads((killed.run / "run.json").read_text())["run"]
    assert run["variants"]["dt"]["tiers_done"] == ["c1", "c2", "c4"]
    assert run["variants"]["dt"]["server_failure"] is None


def test_killed_server_summary_marks_tiers_and_withholds_speedups(killed):
    rows = raw_summary(killed.run)
    assert rows[("base", "c1")]["tier_status"] == "complete"
    assert rows[("base", "c2")]["tier_status"] in ("partial", "failed")
    assert "tritonserver exited" in rows[("base", "c2")]["tier_status_reason"]
    never_ran = rows.get(("base", "c4"))
    assert never_ran is None or never_ran["tier_status"] != "complete", never_ran
    # the baseline's c1 is complete: dt has its speedup there
    assert rows[("dt", "c1")]["tpot_speedup_ratio"] != ""
    assert rows[("dt", "c1")]["speedup_note"] == ""
    for tier in ("c2", "c4"):  # the baseline is not complete there: no speedup, a note
        assert rows[("dt", tier)]["tpot_speedup_ratio"] == "", rows[("dt", tier)]
        assert rows[("dt", tier)]["output_token_throughput_speedup_ratio"] == ""
        assert rows[("dt", tier)]["speedup_note"] != "", rows[("dt", tier)]
    text = (killed.run / "loadtest" / "summary.csv").read_text()
    assert find_inf(text) == []


def test_killed_server_report_and_run_json_say_so(killed):
    report = (killed.run / "report.md").read_text()
    status = raw_summary(killed.run)[("base", "c2")]["tier_status"]
    assert f"`base` c2 is **{status}**" in report
    assert find_inf(report) == []
    run = json.loads((killed.run / "run.json").read_text())["run"]
    base = run["variants"]["base"]
    assert base["server_failure"], base
    assert base["server_failure"].startswith("tritonserver exited with code -9")
    assert base["tiers"]["c2"]["status"] == status
    assert base["tiers_done"] == ["c1"]
    assert run["interrupted"] is False


def test_killed_server_leaves_no_process(killed):
    assert_server_and_stub_were_there(killed.before)
    assert killed.leftovers == []


# --- stop signals -------------------------------------------------------------------


def test_sigterm_run_exits_143_keeping_finished_tiers(terminated):
    assert terminated.code == 143, terminated.stderr
    assert "Traceback" not in terminated.stderr
    assert "Aborted" not in terminated.stderr
    rows = statuses(terminated.run)
    assert rows[("base", "c1")] == "complete", rows
    assert rows[("base", "c2")] == "interrupted", rows
    run = json.loads((terminated.run / "run.json").read_text())["run"]
    assert run["interrupted"] is True
    assert run["stop_signal"] == "SIGTERM"
    report = (terminated.run / "report.md").read_text()
    assert "**The run was stopped by SIGTERM**; never measured: `dt`" in report
    assert "kept every finished request; the stopped tier is marked interrupted" in (
        terminated.stderr
    )


def test_sigterm_run_stops_server_and_stub(terminated):
    assert_server_and_stub_were_there(terminated.before)
    assert terminated.leftovers == []


@pytest.fixture(scope="module")
def scripted(tmp_path_factory):
    """A tritonserver serving the scripted model (no torch) for the load-test-only cases."""
    root = tmp_path_factory.mktemp("scripted")
    with scripted_server(root) as server:
        yield server
    left = wait_gone(root)
    assert not left, left


def test_sighup_loadtest_exits_129_keeping_finished_tier(scripted, tmp_path):
    """SIGHUP once tier c4's first request reached the server (c1's end is logged before
    c4 begins). c4's workers 1-3 wait out a ramp-up far beyond pytest's timeout (``k ·
    1200 / 4`` s): c4 cannot end on its own before the signal, however slow the host; c1,
    one worker, starts at once and lasts its 3 s."""
    out = tmp_path / "run"
    more = ("--concurrency", "1,4", "--duration-s", "3", "--ramp-up-s", "1200")
    # The server is shared by the module's tests: what it took in before this run, then
    # c1's requests (from its log line; no warmup). Not a count read once c1 has ended:
    # c4's worker 0 sends only during its 3 s, and a count read after them (seen once, on
    # a busy host) would never be passed.
    before = requests_started(scripted.metrics_url, "scripted")
    cli = start_cli(loadtest_args(scripted, out, "hup", *more), tmp_path, "loadtest")
    try:
        line = cli.running_until(
            lambda: log_line(out / "trtbench.log", r" hup c1: \d+ requests"),
            120,
            "tier c1 to end",
        )
        c1 = int(re.search(r" hup c1: (\d+) requests", line).group(1))
        cli.running_until(
            lambda: requests_started(scripted.metrics_url, "scripted") > before + c1,
            120,
            "tier c4's first request at the server",
        )
        time.sleep(IN_TIER_S)
        cli.stop_with(signal.SIGHUP, 129)
    finally:
        cli.kill()
    rows = raw_summary(out)
    assert rows[("hup", "c1")]["tier_status"] == "complete"
    assert rows[("hup", "c4")]["tier_status"] == "interrupted"
    requests = pd.read_csv(out / "loadtest" / "requests.csv")
    c1 = requests[requests["tier"] == "c1"]
    assert len(c1) == int(rows[("hup", "c1")]["request_count"]) > 0
    assert c1["error"].isna().all()
    loadtest = json.loads((out / "run.json").read_text())["loadtest"]["hup"]
    assert loadtest["interrupted"] is True
    assert loadtest["tiers_done"] == ["c1"]


def test_sigint_deploy_serve_frees_processes_and_ports_and_appends_the_log(
    killed, tmp_path
):
    """``deploy --serve`` in a copy of the dead-server run: base's server starts a second
    time there, so its log holds the killed start and this one."""
    run = copy_run(killed.run, tmp_path / "run")
    log = run / "server" / "base.log"
    before = log.read_text()
    cli = start_cli(["deploy", run, "--variant", "base", "--serve"], tmp_path, "serve")
    try:
        line = cli.running_until(
            lambda: next(
                (ln for ln in cli.stdout().splitlines() if " grpc " in ln), None
            ),
            START_TIMEOUT_S,
            "the endpoint line of deploy --serve",
        )
        ports = [int(p) for p in re.findall(r"127\.0\.0\.1:(\d+)", line)]
        assert len(ports) == 3, line
        # ready means HTTP ready; tritonserver opens its metrics port after its HTTP one
        wait_for(
            lambda: all(port_in_use(p) for p in ports), 60, f"every port of {line!r}"
        )
        serving = server_processes(run, "base")
        assert_server_and_stub_were_there([describe(p) for p in serving])
        cli.stop_with(signal.SIGINT, 130)
    finally:
        cli.kill()
    assert wait_gone(run) + still_running(serving) == []
    # the ports are free again: a new server can listen on each (the HTTP port may keep
    # TIME_WAIT connections of the readiness checks for a minute: they do not stop it),
    # and trtbench's own check finds the gRPC port free
    assert [p for p in ports if not can_listen(p)] == [], line
    assert not port_in_use(ports[0]), line
    text = log.read_text()
    assert text.startswith(before)  # appended, never truncated
    headers = [ln for ln in text.splitlines() if ln.startswith("==== trtbench")]
    assert len(headers) == 2, headers
    assert f"GRPCInferenceService at 127.0.0.1:{ports[0]}" in text[len(before) :]


# --- one writer per run dir, streamed records ---------------------------------------


@dataclass
class Writers:
    """A load test writing into ``out``, a second one started into it meanwhile, and the
    first stopped with Ctrl-C once the second has ended."""

    out: Path
    logs: Path
    first: Cli
    first_code: int
    seen: list[int]  # data rows of first's part file, polled while its tier ran
    second: Cli
    second_took: float  # s from the end of the second's imports to its exit
    first_alive_after_second: bool
    leftovers: list[str]


@pytest.fixture(scope="module")
def writers(scripted, tmp_path_factory) -> Writers:
    """``loadtest --out RUN`` (variant ``first``, c4, a tier of up to 300 s), its part file
    polled every 50 ms; once it has rows, a second ``loadtest --out RUN`` (variant
    ``second``); once the second has exited and the part file has grown twice (rows come
    in chunks: however slow the host, the tier has streamed), the first gets SIGINT
    (Ctrl-C). The first's tier outlasts the second's imports on any host, and the fixture
    costs what the second takes, not a fixed tier length."""
    logs = tmp_path_factory.mktemp("writers")
    out = logs / "run"
    part = out / "loadtest" / "parts" / "first.requests.csv"
    first = start_cli(
        loadtest_args(
            scripted, out, "first", "--concurrency", "4", "--duration-s", "300"
        ),
        logs,
        "first",
    )
    seen: list[int] = []
    second: Cli | None = None
    ended: float | None = None  # when the second writer was seen to exit
    alive = False  # whether the first still ran then
    deadline = time.monotonic() + 240
    try:
        while first.proc.poll() is None and time.monotonic() < deadline:
            seen.append(data_rows(part))
            if second is None and seen[-1] > 0:
                second = start_cli(
                    loadtest_args(
                        scripted,
                        out,
                        "second",
                        "--concurrency",
                        "1",
                        "--requests-per-tier",
                        "2",
                    ),
                    logs,
                    "second",
                    stamp=logs / "second.imported",
                )
            if ended is None and second is not None and second.proc.poll() is not None:
                ended, alive = time.monotonic(), first.proc.poll() is None
            if ended is not None and len({n for n in seen if n > 0}) >= 2:
                break
            time.sleep(0.05)
        assert second is not None, f"the first writer never wrote a record: {seen}"
        assert ended is not None, "the second writer did not exit in 240 s"
        if alive:
            first.proc.send_signal(signal.SIGINT)
        first_code = first.wait(120)
    finally:
        first.kill()
        if second is not None:
            second.kill()
    took = ended - stamp_time(logs / "second.imported")
    return Writers(
        out, logs, first, first_code, seen, second, took, alive, wait_gone(logs)
    )


def test_second_writer_is_refused_at_once_naming_the_holder(writers, scripted):
    second = writers.second
    assert second.proc.returncode == 2, second.stderr()
    err = second.stderr().strip().splitlines()
    assert len(err) == 1, err
    assert f"trtbench PID {writers.first.pid}" in err[0], err[0]
    # at once: it did not wait for the holder (the time after its imports, which take
    # seconds on a busy machine and are not what the lock does)
    assert writers.first_alive_after_second  # it did not wait for the holder
    report_timing(
        "run lock: second CLI writer refused after", writers.second_took, 5.0, "s"
    )
    # the first writer's results are intact: Ctrl-C kept every finished request
    out = writers.out
    assert writers.first_code == 130, writers.first.stderr()
    rows = raw_summary(out)
    assert list(rows) == [("first", "c4")], list(rows)
    assert rows[("first", "c4")]["tier_status"] == "interrupted"
    requests = pd.read_csv(out / "loadtest" / "requests.csv")
    assert set(requests["variant"]) == {"first"}
    assert requests["error"].isna().all()
    assert len(requests) == int(rows[("first", "c4")]["request_count"]) > 0
    assert list(json.loads((out / "run.json").read_text())["loadtest"]) == ["first"]
    assert writers.leftovers == []
    # once it ended, a new writer succeeds and keeps the first one's rows
    after = run_cli(
        loadtest_args(
            scripted, out, "after", "--concurrency", "1", "--requests-per-tier", "4"
        ),
        writers.logs,
        "after",
    )
    assert after.proc.returncode == 0, after.stderr()
    again = raw_summary(out)
    assert set(again) == {("first", "c4"), ("after", "c1")}
    assert again[("first", "c4")] == rows[("first", "c4")]
    assert wait_gone(writers.logs) == []


def test_records_stream_to_parts_while_the_tier_runs(writers):
    seen = writers.seen
    growth = sorted(set(n for n in seen if n > 0))
    assert len(growth) >= 2, f"the part file did not grow during the tier: {growth}"
    assert seen == sorted(seen)  # appended, never rewritten
    # merged into requests.csv, the parts removed
    parts = writers.out / "loadtest" / "parts"
    assert not parts.exists() or list(parts.iterdir()) == []
    requests = pd.read_csv(writers.out / "loadtest" / "requests.csv")
    first = requests[requests["variant"] == "first"]
    assert len(first) >= growth[-1]


# --- damaged files read back --------------------------------------------------------


@pytest.fixture
def finished_copy(killed, tmp_path) -> Path:
    """A copy of the finished (dead-server) run to damage."""
    return copy_run(killed.run, tmp_path / "run")


def report_error(run: Path, capsys) -> tuple[int, list[str]]:
    code, _, err = run_in_process(["report", run], capsys)
    return code, err.strip().splitlines()


def test_truncated_summary_csv_names_file_and_line(finished_copy, capsys):
    summary = finished_copy / "loadtest" / "summary.csv"
    lines = summary.read_text().splitlines(keepends=True)
    cut_line = len(lines)  # the last row, cut in the middle
    summary.write_text("".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])
    code, err = report_error(finished_copy, capsys)
    assert code == 2, err
    assert len(err) == 1, err
    assert str(summary) in err[0], err[0]
    assert f"line {cut_line}" in err[0], err[0]


def test_run_json_of_a_newer_schema_names_the_version(finished_copy, capsys):
    path = finished_copy / "run.json"
    doc = json.loads(path.read_text())
    path.write_text(json.dumps({**doc, "schema_version": 99}))
    code, err = report_error(finished_copy, capsys)
    assert code == 2, err
    assert len(err) == 1, err
    assert "run.json" in err[0] and "99" in err[0], err[0]


def test_garbage_run_json_names_it(finished_copy, capsys):
    path = finished_copy / "run.json"
    path.write_text('{"schema_version": 1, "run": {garbage\n')
    code, err = report_error(finished_copy, capsys)
    assert code == 2, err
    assert len(err) == 1, err
    assert str(path) in err[0], err[0]


# --- unwritable output --------------------------------------------------------------


def test_unwritable_out_fails_before_sending(scripted, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("a regular file\n")
    out = blocker / "run"
    family = "nv_inference_request_success"
    before = metric_total(scripted.metrics_url, family, "scripted")
    assert before is not None, f"no {family} sample for the scripted model"
    args = [
        "loadtest",
        "--model",
        "scripted",
        "--concurrency",
        "1",
        "--requests-per-tier",
        "2",
        "--warmup-requests",
        "1",
        "--out",
        out,
    ]
    live = run_cli([*args, "--url", scripted.grpc_url], tmp_path, "live", timeout=120)
    closed = run_cli(
        [*args, "--url", f"127.0.0.1:{closed_port()}"], tmp_path, "closed", timeout=120
    )
    after = metric_total(scripted.metrics_url, family, "scripted")
    assert live.proc.returncode == 2, live.stderr()
    err = live.stderr().strip().splitlines()
    assert len(err) == 1, err
    assert str(blocker) in err[0], err[0]
    # it failed before connecting: the same answer with nothing listening
    assert closed.proc.returncode == 2, closed.stderr()
    assert closed.stderr() == live.stderr()
    assert after == before
    assert blocker.read_text() == "a regular file\n"
