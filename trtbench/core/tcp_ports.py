"""TCP ports and bind addresses on this host: an address literal parsed, whether it is
loopback, the host a local client dials, a port probed or picked free.

Ports are probed on the address the server will bind, with the matching address family
(``AF_INET6`` for an IPv6 literal), so a port taken only on another interface does not count
as taken, and one taken on the wildcard address does. Used by every managed server
(tritonserver, vLLM); ``trtbench.triton_repo.ports`` adds tritonserver's three ports.
"""

from __future__ import annotations

import ipaddress
import socket

from trtbench.core.errors import ServerStartError

DEFAULT_BIND_ADDRESS = "127.0.0.1"


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
