"""Where a tritonserver listens: its TCP ports (given ones checked free, the rest picked free)
and its bind address (loopback ``127.0.0.1`` unless widened), in the forms tritonserver's
flags and its clients need.

Ports are probed on the address the server will bind, with the matching address family
(``AF_INET6`` for an IPv6 literal), so a port taken only on another interface does not count
as taken, and one taken on the wildcard address does.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass

from trtbench.errors import ServerStartError

DEFAULT_BIND_ADDRESS = "127.0.0.1"
PORT_OPTIONS = ("grpc_port", "http_port", "metrics_port")


@dataclass(frozen=True)
class Ports:
    """gRPC, HTTP and metrics ports of one server."""

    grpc: int
    http: int
    metrics: int


def parse_address(address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """The IP address literal ``address`` (``127.0.0.1``, ``0.0.0.0``, ``::1``, ``::``).

    Raises:
        ServerStartError: ``address`` is not an IP address literal (a host name such as
            ``localhost`` is refused: it may resolve to another address than the one probed).
    """
    try:
        return ipaddress.ip_address(address)
    except ValueError:
        raise ServerStartError(
            f"bind address {address!r} is not an IP address; use 127.0.0.1 (this host "
            "only), ::1, 0.0.0.0 or :: (--bind-address or deploy.bind_address)"
        ) from None


def is_loopback(address: str) -> bool:
    """True when ``address`` only accepts connections from this host (127.0.0.0/8, ::1).

    Raises:
        ServerStartError: ``address`` is not an IP address literal.
    """
    return parse_address(address).is_loopback


def dial_host(address: str) -> str:
    """The host part of a URL a client on this machine uses for a server bound to ``address``.

    ``127.0.0.1`` for ``127.0.0.1`` and ``0.0.0.0``; ``[::1]`` for ``::1`` and ``::``; the
    literal otherwise (IPv6 in brackets). Never ``localhost``, which may resolve to the other
    address family than the one bound.

    Raises:
        ServerStartError: ``address`` is not an IP address literal.
    """
    ip = parse_address(address)
    if ip.is_unspecified:
        return "127.0.0.1" if ip.version == 4 else "[::1]"
    return str(ip) if ip.version == 4 else f"[{ip}]"


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


def _socket_for(host: str) -> socket.socket:
    family = socket.AF_INET6 if parse_address(host).version == 6 else socket.AF_INET
    return socket.socket(family, socket.SOCK_STREAM)


def port_in_use(port: int, host: str = DEFAULT_BIND_ADDRESS) -> bool:
    """True when ``port`` cannot be bound on ``host`` (an IP literal; the server's bind address).

    The probe sets ``SO_REUSEADDR`` as tritonserver's gRPC and HTTP listeners do, so a port
    whose last connections linger in TIME-WAIT (a server stopped a moment ago) counts as
    free, while a port something listens on does not.

    Raises:
        ServerStartError: ``host`` is not an IP address literal.
    """
    with _socket_for(host) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


def free_port(host: str = DEFAULT_BIND_ADDRESS) -> int:
    """A TCP port the OS reports free on ``host`` right now.

    Raises:
        ServerStartError: ``host`` is not an IP address literal.
    """
    with _socket_for(host) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


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
