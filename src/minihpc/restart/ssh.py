"""Hosts provisioned by Ansible: a node is the ``minihpc-node.service`` systemd unit on its own
host, restarted over SSH with ``sudo -n systemctl restart UNIT``.

Ansible writes the SSH config file: one ``Host <node name>`` block per node with its HostName,
User, IdentityFile, UserKnownHostsFile and ``StrictHostKeyChecking yes``, so the node's name is
the only thing this module puts on the command line, and it is checked first. ssh runs without
a shell and in batch mode: it never asks for a password or a host key, it fails instead.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Mapping

from minihpc.core.errors import UsageError

DEFAULT_UNIT = "minihpc-node.service"
"""The systemd unit the Ansible role installs on every node's host."""

UNIT_ENV = "MINIHPC_RESTART_UNIT"
"""Names another unit to restart instead of :data:`DEFAULT_UNIT`."""

TIMEOUT = 30.0
"""Seconds one restart over SSH may take, connection included."""

CONNECT_TIMEOUT = 5
"""Seconds ssh waits for the host's SSH port before giving up (exit 255)."""

SSH_FAILED = 255
"""ssh's own exit status when it cannot connect or authenticate; the remote command's otherwise."""

NODE_NAME = re.compile(r"[A-Za-z0-9._-]+")
UNIT_NAME = re.compile(r"[A-Za-z0-9:._@-]+")
STDERR_CHARS = 200
"""How much of ssh's last stderr line a failure message quotes."""


def check_name(what: str, value: str, pattern: re.Pattern[str], allowed: str) -> str:
    """``value`` if it can go on ssh's command line as one plain word; ValueError otherwise.
    A leading '-' would be read as an option, anything else as shell syntax on the host."""
    if not value:
        raise ValueError(f"{what} is empty; expected a name of {allowed}")
    if value.startswith("-"):
        raise ValueError(f"{what} {value!r} starts with '-'; expected a name, not an option")
    if not pattern.fullmatch(value):
        raise ValueError(f"{what} {value!r} has characters outside {allowed}")
    return value


def check_unit(unit: str) -> str:
    return check_name("systemd unit", unit, UNIT_NAME, "A-Z a-z 0-9 : . _ @ -")


def ssh_argv(config_file: str, node: str, unit: str = DEFAULT_UNIT) -> list[str]:
    """The command that restarts ``unit`` on ``node``'s host, the host alias in ``config_file``."""
    check_name("node name", node, NODE_NAME, "A-Z a-z 0-9 . _ -")
    check_unit(unit)
    return ["ssh", "-F", config_file, "-o", "BatchMode=yes", "-o", f"ConnectTimeout={CONNECT_TIMEOUT}",
            "--", node, *remote_command(unit)]


def remote_command(unit: str) -> list[str]:
    return ["sudo", "-n", "systemctl", "restart", unit]


def last_line(stderr: str) -> str:
    """The last non-empty line of ``stderr``, stripped and cut to :data:`STDERR_CHARS`."""
    lines = [line.strip() for line in (stderr or "").splitlines() if line.strip()]
    return lines[-1][:STDERR_CHARS] if lines else ""


def failure(node: str, returncode: int, stderr: str, unit: str = DEFAULT_UNIT) -> str | None:
    """None when the restart worked; else one line saying what failed: the host's SSH (exit
    255) or the command on the host (any other status), with ssh's last stderr line."""
    if returncode == 0:
        return None
    said = last_line(stderr)
    detail = f" ({said})" if said else ""
    if returncode == SSH_FAILED:
        return f"node {node}: its host does not answer SSH{detail}"
    return f"node {node}: {' '.join(remote_command(unit))!r} over SSH exited {returncode}{detail}"


def no_answer(node: str, timeout: float) -> str:
    return f"node {node}: no answer over SSH within {timeout:g}s"


def no_client(node: str, exc: OSError) -> str:
    """ssh could not be started: not installed (no ``ssh`` on PATH), or not runnable."""
    if isinstance(exc, FileNotFoundError):
        return f"node {node}: the ssh client is not installed (no ssh on the master's PATH); expected OpenSSH's client"
    return f"node {node}: cannot run ssh ({exc.strerror or exc})"


def readable_config(path: str) -> str:
    """``path`` if it is a file this process can read; UsageError naming it otherwise, so a bad
    ``--restarter ssh:...`` stops the master at start rather than failing every restart."""
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise UsageError(f"SSH config file {path} cannot be read ({exc.strerror or exc}); "
                         "expected the file Ansible writes with one Host block per node") from None
    return path


class SshRestarter:
    def __init__(self, config_file: str, unit: str = DEFAULT_UNIT, timeout: float = TIMEOUT):
        self.config_file = config_file
        self.unit = unit
        self.timeout = timeout

    def restart(self, node: str) -> None:
        """Restart ``node``'s unit; RuntimeError with one line on any failure."""
        try:
            argv = ssh_argv(self.config_file, node, self.unit)
        except ValueError as exc:
            raise RuntimeError(str(exc)) from None
        try:
            done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                  errors="replace", timeout=self.timeout, check=False)
        except subprocess.TimeoutExpired:
            raise RuntimeError(no_answer(node, self.timeout)) from None
        except OSError as exc:
            raise RuntimeError(no_client(node, exc)) from None
        message = failure(node, done.returncode, done.stderr, self.unit)
        if message:
            raise RuntimeError(message)


def from_config(config_file: str, env: Mapping[str, str]) -> SshRestarter:
    """The restarter ``ssh:CONFIG_FILE`` names, its unit from :data:`UNIT_ENV` in ``env``;
    UsageError now for an unreadable file or a bad unit name."""
    unit = (env.get(UNIT_ENV) or "").strip() or DEFAULT_UNIT
    try:
        check_unit(unit)
    except ValueError as exc:
        raise UsageError(f"{UNIT_ENV}: {exc}") from None
    return SshRestarter(readable_config(config_file), unit)
