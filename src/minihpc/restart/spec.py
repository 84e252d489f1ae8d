"""Restarters: how the health monitor brings a DOWN node back, one per kind of cluster.

- ``local:STATE_DIR`` -- respawn the node's agent process (:mod:`minihpc.restart.local`);
- ``docker:URL`` -- ask the cluster's restart proxy, the only holder of the Docker socket, to
  restart the node's container (:mod:`minihpc.restart.docker`, :mod:`minihpc.restart.proxy`),
  with the restart token from MINIHPC_RESTART_TOKEN_FILE or MINIHPC_RESTART_TOKEN
  (:mod:`minihpc.restart.token`);
- ``ssh:CONFIG_FILE`` -- on hosts provisioned by Ansible, ``sudo -n systemctl restart`` the
  node's unit (``minihpc-node.service``, or MINIHPC_RESTART_UNIT) over SSH, the node's name being
  its host alias in the SSH config file Ansible writes (:mod:`minihpc.restart.ssh`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from typing import Protocol, runtime_checkable

from minihpc.core.crashes import Crash
from minihpc.core.errors import UsageError


class RestartRefused(RuntimeError):
    """The restarter will not restart the node yet (the restart proxy's rate limits) and says
    when it may: ``retry_after`` seconds from its answer, or None when it did not say."""

    def __init__(self, message: str, retry_after: float | None):
        super().__init__(message)
        self.retry_after = retry_after


class Restarter(Protocol):
    def restart(self, node: str) -> None:
        """Bring ``node`` back or raise; may take seconds (the monitor calls it off-loop)."""


@runtime_checkable
class CrashWatcher(Protocol):
    """A restarter that also sees its nodes' agents end (local: pidfds; docker: the proxy's
    Docker events). The ssh one does not: a node unit's ExecStopPost reports through Redis."""

    def watch(self, report: Callable[[Crash], None], stop: threading.Event) -> None:
        """Start reporting each agent's end to ``report``, in a thread, until ``stop`` is set."""


def from_spec(spec: str | None, env: Mapping[str, str] | None = None) -> Restarter | None:
    """``local:STATE_DIR``, ``docker:URL``, ``ssh:CONFIG_FILE`` or None (no restarts). A docker
    restarter without a token in ``env`` (default: this process's), or an ssh one whose config
    file cannot be read, is a UsageError now, not a failure at each restart."""
    if not spec or spec == "none":
        return None
    kind, _, arg = spec.partition(":")
    if kind == "local" and arg:
        from minihpc.restart.local import LocalRestarter

        return LocalRestarter(arg)
    if kind == "docker" and arg:
        from minihpc.restart.docker import DockerRestarter
        from minihpc.restart.token import load_token

        return DockerRestarter(arg, load_token(os.environ if env is None else env))
    if kind == "ssh" and arg:
        from minihpc.restart.ssh import from_config

        return from_config(arg, os.environ if env is None else env)
    raise UsageError(f"invalid --restarter {spec!r}: expected local:STATE_DIR, docker:URL, ssh:CONFIG_FILE or none")
