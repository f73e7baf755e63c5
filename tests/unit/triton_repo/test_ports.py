"""Ports and bind address: probes on the address actually bound (IPv4 and IPv6), equal ports
refused (by ``choose_ports`` and by the spec), the host clients dial.

Every probe uses real sockets on this machine; the IPv6 tests are skipped where the machine
has no IPv6 loopback.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator

import pytest

from tests.support.net import has_ipv6_loopback
from trtbench.core.errors import ConfigError, ServerStartError
from trtbench.spec.bench import DeploySpec, parse_spec
from trtbench.triton_repo.ports import (
    bind_flag_values,
    choose_ports,
    dial_host,
    free_port,
    is_loopback,
    port_in_use,
)

needs_ipv6 = pytest.mark.skipif(
    not has_ipv6_loopback(), reason="this machine has no IPv6 loopback (::1)"
)


@contextlib.contextmanager
def listening(host: str, port: int = 0) -> Iterator[int]:
    """A socket listening on ``host`` (its family) for the block; yields its port."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind((host, port))
        sock.listen()
        yield sock.getsockname()[1]


def test_given_port_in_use_names_the_option():
    message = "metrics_port {} is already in use on 127.0.0.1.*--metrics-port"
    with (
        listening("127.0.0.1") as taken,
        pytest.raises(ServerStartError, match=message.format(taken)),
    ):
        choose_ports(None, None, taken)


def test_picked_ports_are_distinct_and_free_on_the_host():
    ports = choose_ports(None, None, None)
    assert len({ports.grpc, ports.http, ports.metrics}) == 3
    assert not any(port_in_use(p) for p in (ports.grpc, ports.http, ports.metrics))


def test_picked_ports_avoid_a_given_one():
    given = free_port()
    for _ in range(20):
        ports = choose_ports(given, None, None)
        assert ports.grpc == given and given not in (ports.http, ports.metrics)


@pytest.mark.parametrize(
    ("grpc", "http", "metrics", "names"),
    [
        (8001, 8001, None, ("grpc_port", "http_port")),
        (None, 8002, 8002, ("http_port", "metrics_port")),
        (8003, None, 8003, ("grpc_port", "metrics_port")),
    ],
)
def test_equal_given_ports_are_refused_naming_both_options(grpc, http, metrics, names):
    a, b = names
    opt_a, opt_b = (f"--{n.replace('_', '-')}" for n in names)
    with pytest.raises(ServerStartError) as err:
        choose_ports(grpc, http, metrics)
    text = str(err.value)
    assert f"{a} and {b} are both" in text and opt_a in text and opt_b in text


def test_equal_ports_are_refused_before_any_probe():
    # taken and equal: the equality is the error (nothing was probed or bound)
    with listening("127.0.0.1") as taken, pytest.raises(ServerStartError, match="both"):
        choose_ports(taken, taken, None)


def test_probe_on_loopback_sees_a_wildcard_listener():
    with listening("0.0.0.0") as port:
        assert port_in_use(port, "127.0.0.1")
        assert port_in_use(port, "0.0.0.0")


def test_probe_on_the_wildcard_sees_a_loopback_listener():
    with listening("127.0.0.1") as port:
        assert port_in_use(port, "0.0.0.0")
        assert port_in_use(port)  # default host: 127.0.0.1


def test_a_port_taken_on_another_address_is_free_on_loopback():
    with listening("127.0.0.2") as port:
        assert port_in_use(port, "127.0.0.2")
        assert not port_in_use(port, "127.0.0.1")
        assert choose_ports(port, None, None, host="127.0.0.1").grpc == port


@needs_ipv6
def test_ipv6_probe_uses_an_ipv6_socket():
    with listening("::1") as port:
        assert port_in_use(port, "::1")
        assert port_in_use(port, "::")
        assert not port_in_use(port, "127.0.0.1")  # another family, another socket
        with pytest.raises(ServerStartError, match=f"{port} is already in use on ::1"):
            choose_ports(None, port, None, host="::1")


@needs_ipv6
def test_ipv6_free_ports_are_free_on_ipv6_loopback():
    ports = choose_ports(None, None, None, host="::1")
    assert not any(
        port_in_use(p, "::1") for p in (ports.grpc, ports.http, ports.metrics)
    )
    with listening("::1", free_port("::1")) as port:
        assert port_in_use(port, "::1")


def test_a_host_name_is_not_a_bind_address():
    with pytest.raises(ServerStartError, match="'localhost' is not an IP address"):
        choose_ports(None, None, None, host="localhost")


@pytest.mark.parametrize(
    ("address", "host", "loopback"),
    [
        ("127.0.0.1", "127.0.0.1", True),
        ("0.0.0.0", "127.0.0.1", False),
        ("::1", "[::1]", True),
        ("::", "[::1]", False),
        ("127.0.0.5", "127.0.0.5", True),
        ("10.1.2.3", "10.1.2.3", False),
        ("fd00::2", "[fd00::2]", False),
    ],
)
def test_dial_host_and_loopback(address, host, loopback):
    assert dial_host(address) == host
    assert is_loopback(address) is loopback


def test_flag_values_per_service():
    assert bind_flag_values("127.0.0.1") == ("127.0.0.1", "127.0.0.1")
    assert bind_flag_values("::1") == ("[::1]", "ipv6:::1")


def test_spec_defaults_to_loopback():
    assert DeploySpec().bind_address == "127.0.0.1"
    assert DeploySpec(bind_address="0:0::1").bind_address == "::1"  # normalized


def test_spec_refuses_a_host_name_as_bind_address():
    text = "models: {target: /m}\nvariants: [{name: a, mode: baseline}]\n"
    with pytest.raises(
        ConfigError, match=r"deploy\.bind_address: 'localhost' does not"
    ):
        parse_spec(text + "deploy: {bind_address: localhost}", "s.yaml")


@pytest.mark.parametrize(
    "ports",
    ["{grpc_port: 8001, http_port: 8001}", "{http_port: 9000, metrics_port: 9000}"],
)
def test_spec_with_equal_ports_is_a_config_error_at_load_time(ports):
    text = "models: {target: /m}\nvariants: [{name: a, mode: baseline}]\n"
    with pytest.raises(ConfigError, match="s.yaml: deploy: .*must differ"):
        parse_spec(f"{text}deploy: {ports}", "s.yaml")


def test_a_port_left_in_time_wait_by_a_stopped_server_is_free():
    """tritonserver's listeners set SO_REUSEADDR, so their TIME-WAIT leftovers do not stop
    a new server from binding the port; the probe must agree (a live listener is in use)."""
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    assert port_in_use(port)
    client = socket.create_connection(("127.0.0.1", port))
    accepted, _ = server.accept()
    accepted.close()  # the server side closes first: its end goes to TIME-WAIT
    time.sleep(0.05)
    client.close()
    server.close()
    time.sleep(0.1)
    assert not port_in_use(port)
