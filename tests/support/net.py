"""Network facts of the test machine."""

from __future__ import annotations

import socket


def has_ipv6_loopback() -> bool:
    """True when a TCP socket can bind ``::1`` here."""
    if not socket.has_ipv6:
        return False
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock:
            sock.bind(("::1", 0))
    except OSError:
        return False
    return True
