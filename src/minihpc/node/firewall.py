"""The node's firewall rule that keeps jobs off Redis (core.firewall decides it): applied when
the agent starts and again whenever Redis's address changes (a recreated container gets a new
one), checked before each launch. Where it cannot be set (no ``iptables``, no ``NET_ADMIN``, a
kernel without the owner match) the agent says so once and runs on: jobs still hold no password."""

from __future__ import annotations

import logging
import pwd
import shutil
import socket
import subprocess

import psutil

from minihpc.core import firewall

log = logging.getLogger(__name__)


class JobFirewall:
    def __init__(self, redis_url: str, service_user: str, on_failure=None):
        self.endpoint = firewall.redis_endpoint(redis_url)
        service = _account(service_user)
        self.allowed = [0, *(entry.pw_uid for entry in service)]
        self.allowed_gids = [entry.pw_gid for entry in service]
        self.applied: list[str] | None = None
        self.failed: str | None = None
        self.on_failure = on_failure

    def ensure(self) -> None:
        """Apply the rules if Redis's addresses changed since they were last applied."""
        if self.endpoint is None:
            return
        host, port = self.endpoint
        try:
            addresses = sorted({info[4][0] for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)})
        except OSError as exc:
            log.warning("job firewall: cannot resolve %s: %s (rules kept as they were)", host, exc)
            return
        addresses = firewall.guarded(addresses, _local_addresses())
        if addresses == self.applied:
            return
        problem = _apply(firewall.commands(addresses, port, self.allowed, self.allowed_gids))
        if problem is None:
            self.applied = addresses
            log.info("job firewall: only uids %s and gids %s may connect to Redis at %s port %s",
                     ",".join(map(str, self.allowed)), ",".join(map(str, self.allowed_gids)) or "-",
                     ",".join(addresses), port)
        elif problem != self.failed:
            self.failed = problem
            log.warning("job firewall not set, so jobs can open connections to Redis's port: %s", problem)
            if self.on_failure is not None:
                self.on_failure(problem)


def _apply(argvs: list[list[str]]) -> str | None:
    """Run the commands; one line saying why not, else None."""
    tools = {argv[0] for argv in argvs}
    missing = [t for t in sorted(tools) if shutil.which(t) is None]
    if missing:
        return f"no {' or '.join(missing)} on this node"
    for tool in sorted(tools):
        _run(firewall.make_chain(tool))  # fails where it is there; a real failure shows in -F next
    for argv in argvs:
        error = _run(argv)
        if error is not None:
            return f"{' '.join(argv)}: {error}"
    for tool in sorted(tools):
        if _run(firewall.jump(tool, check=True)) is not None:
            error = _run(firewall.jump(tool, check=False))
            if error is not None:
                return f"{' '.join(firewall.jump(tool, check=False))}: {error}"
    return None


def _run(argv: list[str]) -> str | None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc)
    return None if done.returncode == 0 else (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]


def _local_addresses() -> set[str]:
    """This machine's own addresses (its network namespace's, in a container)."""
    return {a.address.split("%")[0] for addrs in psutil.net_if_addrs().values() for a in addrs
            if a.family in (socket.AF_INET, socket.AF_INET6)}


def _account(user: str) -> list[pwd.struct_passwd]:
    try:
        return [pwd.getpwnam(user)]
    except KeyError:
        return []
