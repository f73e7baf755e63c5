"""A real tritonserver listens on loopback only, unless told otherwise; its health is watchable;
its log keeps every start.

The run directory holds one reference variant built from the small real models. The server is
started the way a user starts it (``trtbench deploy RUN --serve`` in its own process) for the
socket checks, and through :func:`trtbench.pipeline.deploy.serve` for ``health()`` and the log.
Every listening socket of the server's process tree is read with psutil (what ``ss -ltnp``
shows for those processes).
"""

from __future__ import annotations

import ipaddress
import os
import re
import signal
import threading
import time

import psutil
import pytest

from tests.support.faults import wait_for
from tests.support.net import has_ipv6_loopback
from tests.support.run_specs import deployed_reference_run
from tests.support.serving import serve_cli, stop_cli
from tests.support.timing import report_timing
from trtbench.core.run_dir import RunDir
from trtbench.pipeline.deploy import serve
from trtbench.spec.bench import DeploySpec, VariantSpec

pytestmark = pytest.mark.integration
HOST_MARGIN_S = 10.0
"""Slack for a wait on a saturated host; the quiet-host figures go to report_timing."""

VARIANT = "baseline"
HEADER = re.compile(r"^==== trtbench \S+: tritonserver start \S+Z \(attempt (\d+)\): ")


@pytest.fixture(scope="module")
def run_dir(tiny_models, tmp_path_factory) -> RunDir:
    """A built and deployed run with one baseline variant."""
    return deployed_reference_run(
        tmp_path_factory.mktemp("loopback") / "run",
        "loopback-it",
        tiny_models,
        [
            VariantSpec(
                name=VARIANT,
                mode="baseline",
                max_batch_size=2,
                max_input_len=64,
                max_seq_len=128,
            )
        ],
    )


def listening(pid: int) -> list[tuple[str, int]]:
    """(ip, port) of every TCP socket in LISTEN of ``pid`` and its descendants."""
    procs = [psutil.Process(pid)]
    procs += procs[0].children(recursive=True)
    found = []
    for proc in procs:
        try:
            conns = proc.net_connections(kind="inet")
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        found += [
            (c.laddr.ip, c.laddr.port) for c in conns if c.status == psutil.CONN_LISTEN
        ]
    return found


def plain_ip(ip: str) -> str:
    """``::ffff:127.0.0.1`` (gRPC's dual-stack socket bound to an IPv4 address) as 127.0.0.1."""
    address = ipaddress.ip_address(ip)
    mapped = getattr(address, "ipv4_mapped", None)
    return str(mapped or address)


def endpoint_ports(line: str) -> set[int]:
    return {int(p) for p in re.findall(r"127\.0\.0\.1:(\d+)", line)}


def listening_on(pid: int, ports: set[int]) -> list[tuple[str, int]]:
    """:func:`listening` once every port of ``ports`` is among its sockets. Ready means
    HTTP ready, and tritonserver opens its metrics port after its HTTP one: on a busy
    host the metrics socket may come a moment after the endpoint line."""
    return wait_for(
        lambda: (found := listening(pid)) and ports <= {p for _, p in found} and found,
        60,
        f"a listening socket on each of {sorted(ports)}",
    )


def test_serve_listens_on_loopback_only(run_dir):
    proc, line = serve_cli(run_dir.root, VARIANT)
    try:
        assert line.startswith(f"{VARIANT}: grpc 127.0.0.1:"), line
        assert "http http://127.0.0.1:" in line and "metrics http://127.0.0.1:" in line
        assert "localhost" not in line
        ports = endpoint_ports(line)
        assert len(ports) == 3
        sockets = listening_on(proc.pid, ports)
    finally:
        err = stop_cli(proc)
    assert ports <= {port for _, port in sockets}, (line, sockets)
    # `ss -ltn` for the server's processes shows 127.0.0.1 and nothing else
    assert {plain_ip(ip) for ip, _ in sockets} == {"127.0.0.1"}, sockets
    assert "warning" not in err.lower(), err


def test_wide_bind_address_warns_and_is_used(run_dir):
    proc, line = serve_cli(run_dir.root, VARIANT, "--bind-address", "0.0.0.0")
    ports = endpoint_ports(line)
    try:
        sockets = listening_on(proc.pid, ports)
    finally:
        err = stop_cli(proc)
    # clients on this host still dial the loopback address
    assert line.startswith(f"{VARIANT}: grpc 127.0.0.1:"), line
    wide = {port for ip, port in sockets if ipaddress.ip_address(ip).is_unspecified}
    assert len(ports) == 3 and ports <= wide, (line, sockets)
    warning = [w for w in err.splitlines() if w.startswith("warning:")]
    assert warning, err
    assert "0.0.0.0" in warning[0]
    assert "anyone who can reach this host" in warning[0]


def test_health_is_none_while_serving_and_names_the_exit_after_sigkill(run_dir):
    log_path = run_dir.server_log(VARIANT)
    stale = "E1129 08:00:00.000001 1 model.cc:1] \"failed to load 'stale' (old run)\"\n"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("a") as log:  # an earlier start's failure stays in the log
        log.write(stale)
    with serve(run_dir, VARIANT) as server:
        assert server.health() is None
        answers: list[str | None] = []
        threads = [
            threading.Thread(target=lambda: answers.append(server.health()))
            for _ in range(4)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        assert answers == [None] * 4
        # a stopped (not dead) server does not answer: not ready, within the timeout
        os.kill(server.process.pid, signal.SIGSTOP)
        try:
            # the stop lands asynchronously: a thread of a busy server can still answer
            stopped = psutil.Process(server.process.pid)
            wait_for(
                lambda: stopped.status() == psutil.STATUS_STOPPED,
                60,
                "the SIGSTOP to stop the server",
            )
            began = time.monotonic()
            reason = server.health(timeout_s=0.3)
            waited = time.monotonic() - began
            report_timing(
                "loopback: health() of a stopped server took", waited, 1.0, "s"
            )
            assert waited < 0.3 + HOST_MARGIN_S  # the timeout bounds the wait
        finally:
            os.kill(server.process.pid, signal.SIGCONT)
        assert reason is not None and reason.startswith(
            "tritonserver is not ready ("
        ), reason
        os.kill(server.process.pid, signal.SIGKILL)
        killed = time.monotonic()
        reason = server.health()
        # The socket may refuse connections a moment before the process can be reaped:
        # "not ready" first is fine, the exit must be named within the second.
        while (
            "exited" not in (reason or "") and time.monotonic() - killed < HOST_MARGIN_S
        ):
            time.sleep(0.05)
            reason = server.health()
        noticed = time.monotonic() - killed
        log_reason = server.log_reason()
    assert reason is not None
    report_timing("loopback: SIGKILLed server named as exited after", noticed, 1.0, "s")
    assert reason.startswith("tritonserver exited with code -9 (signal SIGKILL): "), (
        reason
    )
    assert str(log_path) in reason
    assert "\n" not in reason
    assert (
        "stale" not in reason and "stale" not in log_reason
    )  # since the latest start only


def test_log_appends_a_header_per_start(run_dir):
    log_path = run_dir.server_log(VARIANT)
    before = log_path.read_bytes() if log_path.exists() else b""
    for _ in range(2):
        with serve(run_dir, VARIANT) as server:
            assert server.health() is None
    text = log_path.read_bytes()
    assert text.startswith(before)  # appended, never truncated
    new = text[len(before) :].decode()
    headers = [m for m in map(HEADER.match, new.splitlines()) if m]
    assert [m.group(1) for m in headers] == ["1", "1"]
    # each start's output follows its own header
    starts = new.split("==== trtbench ")[1:]
    assert len(starts) == 2
    for chunk in starts:
        assert "--grpc-address=127.0.0.1" in chunk.splitlines()[0]
        assert "Started GRPCInferenceService at 127.0.0.1:" in chunk


@pytest.mark.skipif(not has_ipv6_loopback(), reason="no IPv6 loopback (::1) here")
def test_ipv6_loopback_serves_on_ipv6_only(run_dir):
    deploy = DeploySpec(ready_timeout_s=120, reference_device="cpu", bind_address="::1")
    with serve(run_dir, VARIANT, deploy) as server:
        assert server.grpc_url.startswith("[::1]:")
        assert server.http_url.startswith("http://[::1]:")
        assert server.health() is None
        ports = server.ports
        wanted = {ports.grpc, ports.http, ports.metrics}
        sockets = listening_on(server.process.pid, wanted)
    assert wanted <= {port for _, port in sockets}, sockets
    assert {ip for ip, _ in sockets} == {"::1"}, sockets
