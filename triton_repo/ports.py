"""TCP ports of a tritonserver: given ones checked free, the rest picked free."""

from __future__ import annotations

import socket
from dataclasses import dataclass

from trtbench.errors import ServerStartError


@dataclass(frozen=True)
class Ports:
    """gRPC, HTTP and metrics ports of one server."""

    grpc: int
    http: int
    metrics: int


def port_in_use(port: int, host: str = "0.0.0.0") -> bool:  # noqa: S104 - as tritonserver binds
    """True when ``port`` cannot be bound on ``host`` (tritonserver binds 0.0.0.0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


def free_port() -> int:
    """A TCP port the OS reports free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("0.0.0.0", 0))  # noqa: S104 - probe only
        return int(sock.getsockname()[1])


def choose_ports(grpc: int | None, http: int | None, metrics: int | None) -> Ports:
    """Use the given ports (checked free) and pick free ones for the rest.

    Raises:
        ServerStartError: a given port is already in use (the message names the option).
    """
    chosen: dict[str, int] = {}
    for name, port in (
        ("grpc_port", grpc),
        ("http_port", http),
        ("metrics_port", metrics),
    ):
        if port is None:
            port = free_port()
            while port in chosen.values():
                port = free_port()
        elif port_in_use(port):
            raise ServerStartError(
                f"{name} {port} is already in use; stop what listens there or choose "
                f"another port (--{name.replace('_', '-')} or deploy.{name})"
            )
        chosen[name] = port
    return Ports(chosen["grpc_port"], chosen["http_port"], chosen["metrics_port"])
