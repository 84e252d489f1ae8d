"""Jobs kept off Redis's port (issue 33): on a node that owns its host (a container, an Ansible
host) and runs jobs as their users, the agent adds a firewall chain so that only the daemons'
uids may open a connection to Redis; a job's ``connect()`` is refused at once (a TCP reset).
A job then cannot use up Redis's ``maxclients`` with thousands of idle connections, nor try
passwords against it.

Only new connections (``--syn``) are judged, by the owner of the socket that opens them.
Decisions only: :mod:`minihpc.node.firewall` runs the commands.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

CHAIN = "MINIHPC-JOBS"
"""The chain the agent owns: flushed and refilled each time, jumped to from OUTPUT."""


def redis_endpoint(url: str) -> tuple[str, int] | None:
    """(host, port) of a ``redis://`` URL; None for a Unix socket (``unix://``), which the
    file's mode guards instead."""
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss") or not parts.hostname:
        return None
    return parts.hostname, parts.port or 6379


LOOPBACK = ("127.0.0.1", "::1")


def guarded(addresses: list[str], local: set[str]) -> list[str]:
    """The addresses to keep jobs off: Redis's, and loopback too when Redis is on this machine
    (a control host that is also a node: Redis listens on 127.0.0.1 as well)."""
    return sorted({*addresses, *(LOOPBACK if set(addresses) & local else ())})


def commands(addresses: list[str], port: int, allowed_uids: list[int],
             allowed_gids: list[int] = ()) -> list[list[str]]:
    """The iptables/ip6tables argv (tool first) that refuse a new TCP connection to ``port`` on
    ``addresses`` to every process but those of ``allowed_uids`` or with one of
    ``allowed_gids`` among its groups (the daemons' group: an operator's CLI on a host that is
    also a node; jobs run with no group but their own): the chain emptied, then its rules. The
    caller makes the chain first (``-N``) and adds the jump from OUTPUT where it is missing."""
    out: list[list[str]] = []
    for tool, family in (("iptables", 4), ("ip6tables", 6)):
        mine = sorted({a for a in addresses if ipaddress.ip_address(a).version == family})
        if not mine:
            continue
        out.append([tool, "-w", "5", "-F", CHAIN])
        for address in mine:
            match = ["-p", "tcp", "--syn", "-d", address, "--dport", str(port)]
            out += [[tool, "-w", "5", "-A", CHAIN, *match, "-m", "owner", "--uid-owner", str(uid), "-j", "RETURN"]
                    for uid in sorted(set(allowed_uids))]
            out += [[tool, "-w", "5", "-A", CHAIN, *match, "-m", "owner", "--gid-owner", str(gid), "--suppl-groups",
                     "-j", "RETURN"] for gid in sorted(set(allowed_gids))]
            out.append([tool, "-w", "5", "-A", CHAIN, *match, "-j", "REJECT", "--reject-with", "tcp-reset"])
    return out


def make_chain(tool: str) -> list[str]:
    """The argv that makes the chain (it fails harmlessly where the chain is there)."""
    return [tool, "-w", "5", "-N", CHAIN]


def jump(tool: str, check: bool) -> list[str]:
    """The argv that checks for (``check``) or adds, first in OUTPUT, the jump to the chain."""
    return [tool, "-w", "5", "-C" if check else "-I", "OUTPUT", *([] if check else ["1"]), "-j", CHAIN]
