"""TCP ports on this machine."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A TCP port free on this host right now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("", 0))
        return sock.getsockname()[1]


def in_use(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something listens on ``host:port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        return sock.connect_ex((host, port)) == 0
