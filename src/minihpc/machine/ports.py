"""TCP ports on this machine."""

from __future__ import annotations

import random
import socket

import psutil


def free_port() -> int:
    """A TCP port free on this host right now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("", 0))
        return sock.getsockname()[1]


def in_use(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something listens on ``host:port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        return sock.connect_ex((host, port)) == 0


def listens(pid: int, port: int) -> bool:
    """Whether process ``pid`` itself (alive, not a zombie) listens on TCP ``port``: a port
    found in use may be another process's, which took it before ``pid`` could bind it."""
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        sockets = (getattr(process, "net_connections", None) or process.connections)(kind="tcp")
    except psutil.Error:
        return False
    return any(s.status == psutil.CONN_LISTEN and s.laddr and s.laddr.port == port for s in sockets)


def _ephemeral() -> tuple[int, int]:
    """The kernel's range for the local ports of outgoing connections."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as fh:
            low, high = map(int, fh.read().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999


def free_listen_port(tries: int = 50) -> int:
    """A TCP port free now, for a server that starts listening on it a while later: outside
    the kernel's range for outgoing connections, so no connection takes it meanwhile."""
    low, _ = _ephemeral()
    for _ in range(tries if low > 11000 else 0):
        port = random.randrange(10000, low)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("", port))
            except OSError:
                continue
            return port
    return free_port()
