"""Where a tritonserver listens: its TCP ports (given ones checked free, the rest picked free)
and its bind address (loopback ``127.0.0.1`` unless widened), in the forms tritonserver's
flags and its clients need.

The probes (:func:`port_in_use`, :func:`free_port`) and the address helpers are
:mod:`trtbench.core.tcp_ports`, named here too; ports are probed on the address the server will
bind, with the matching address family.
"""

from __future__ import annotations

from dataclasses import dataclass

from trtbench.core.errors import ServerStartError
from trtbench.core.tcp_ports import (
    DEFAULT_BIND_ADDRESS,
    dial_host,
    free_port,
    is_loopback,
    parse_address,
    port_in_use,
)

# Probing, parsing and dialling live in the core (shared with the vLLM server); their old
# names here stay for the callers that import them from this module.
__all__ = [
    "DEFAULT_BIND_ADDRESS",
    "PORT_OPTIONS",
    "Ports",
    "bind_flag_values",
    "check_distinct",
    "choose_ports",
    "dial_host",
    "free_port",
    "is_loopback",
    "parse_address",
    "port_in_use",
]

PORT_OPTIONS = ("grpc_port", "http_port", "metrics_port")


@dataclass(frozen=True)
class Ports:
    """gRPC, HTTP and metrics ports of one server."""

    grpc: int
    http: int
    metrics: int


def bind_flag_values(address: str) -> tuple[str, str]:
    """``(gRPC, HTTP)`` values of ``--grpc-address`` and ``--http-address`` / ``--metrics-address``.

    tritonserver 2.5x hands the gRPC address to gRPC (IPv6 in brackets: ``[::1]``) and the HTTP
    and metrics addresses to libevhtp (IPv6 with an ``ipv6:`` prefix: ``ipv6:::1``; a bracketed
    or bare IPv6 address there silently binds 255.255.255.255 or fails). IPv4 is the literal
    for all three.

    Raises:
        ServerStartError: ``address`` is not an IP address literal.
    """
    ip = parse_address(address)
    if ip.version == 4:
        return str(ip), str(ip)
    return f"[{ip}]", f"ipv6:{ip}"


def check_distinct(ports: dict[str, int | None]) -> None:
    """Refuse two options given the same port (``{"grpc_port": 8001, "http_port": 8001}``).

    Raises:
        ServerStartError: two given ports are equal; the message names both options.
    """
    given = [(name, port) for name, port in ports.items() if port is not None]
    for i, (name, port) in enumerate(given):
        for other, other_port in given[i + 1 :]:
            if port == other_port:
                raise ServerStartError(
                    f"{name} and {other} are both {port}; tritonserver needs a separate "
                    f"port for each (--{name.replace('_', '-')}, "
                    f"--{other.replace('_', '-')} or deploy.{name}, deploy.{other})"
                )


def choose_ports(
    grpc: int | None,
    http: int | None,
    metrics: int | None,
    host: str = DEFAULT_BIND_ADDRESS,
) -> Ports:
    """Use the given ports (checked free on ``host``) and pick free ones for the rest.

    Args:
        grpc, http, metrics: TCP ports, or None to pick a free one.
        host: the bind address the server will listen on (an IP literal; ``0.0.0.0`` and
            ``::`` are probed as such).

    Raises:
        ServerStartError: two given ports are equal (names both options), a given port is
            already in use on ``host`` (names the option), or ``host`` is not an IP literal.
    """
    requested = dict(zip(PORT_OPTIONS, (grpc, http, metrics), strict=True))
    check_distinct(requested)
    chosen: dict[str, int] = {}
    for name, port in requested.items():
        if port is None:
            port = free_port(host)
            while port in chosen.values() or port in requested.values():
                port = free_port(host)
        elif port_in_use(port, host):
            raise ServerStartError(
                f"{name} {port} is already in use on {host}; stop what listens there or "
                f"choose another port (--{name.replace('_', '-')} or deploy.{name})"
            )
        chosen[name] = port
    return Ports(chosen["grpc_port"], chosen["http_port"], chosen["metrics_port"])
