"""Restarters: how the health monitor brings a DOWN node back, one per kind of cluster.

- local: respawn the node's agent process (local mode keeps each node's command line);
- docker: ask the cluster's restart proxy (``minihpc restart-proxy``), the only holder of the
  Docker socket, to restart the node's container;
- later, systemd over SSH for hosts provisioned by Ansible: the same one-method interface.
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Protocol

import psutil

from . import files
from .errors import UsageError


class Restarter(Protocol):
    def restart(self, node: str) -> None:
        """Bring ``node`` back or raise; may take seconds (the monitor calls it off-loop)."""


class LocalRestarter:
    """Local mode: the node's agent is a process whose command line ``up`` recorded."""

    def __init__(self, state_dir: str | Path):
        self.state_dir = Path(state_dir)
        self.spawned: dict[str, subprocess.Popen] = {}

    def restart(self, node: str) -> None:
        spec = json.loads((self.state_dir / "run" / "nodes.json").read_text())[node]
        pids_file = self.state_dir / "pids.json"
        pids = json.loads(pids_file.read_text())
        for proc in self.spawned.values():
            proc.poll()  # reap agents we respawned earlier that have died since
        old = pids.get(node)
        if old and _running(old):
            _make_room(psutil.Process(old))
        with open(spec["log"], "ab") as out:
            proc = subprocess.Popen(
                spec["argv"], stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=dict(os.environ, **spec.get("env", {})), start_new_session=True,
            )
        self.spawned[node] = proc
        pids[node] = proc.pid
        files.replace(pids_file, json.dumps(pids).encode())


def _make_room(old: psutil.Process, grace: float = 5.0) -> None:
    """The old agent is still there: stopping (let it finish tearing its job down, which
    may save a checkpoint) or hung, e.g. paused (kill it and everything it started)."""
    try:
        procs = [old, *old.children(recursive=True)]
        if old.status() != psutil.STATUS_STOPPED:
            old.terminate()
            if not psutil.wait_procs([old], timeout=grace)[1]:
                procs = [p for p in procs if p.is_running()]
    except psutil.NoSuchProcess:
        return
    for p in procs:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(procs, timeout=5)


def _running(pid: int) -> bool:
    """Alive and not a zombie (a dead child nobody reaped yet holds its pid)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


class DockerRestarter:
    """Compose: POST /restart/<node> to the restart proxy, which restarts that node's container
    of this Compose project and nothing else."""

    def __init__(self, url: str, timeout: float = 60.0):
        self.url = url.rstrip("/")
        self.timeout = timeout

    def restart(self, node: str) -> None:
        request = urllib.request.Request(f"{self.url}/restart/{node}", method="POST", data=b"")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as resp:
                resp.read()
        except urllib.error.HTTPError as exc:
            raise RuntimeError(f"restart proxy refused {node}: {exc.code} {exc.read().decode()[:200]}") from None


def from_spec(spec: str | None) -> Restarter | None:
    """``local:STATE_DIR``, ``docker:URL`` or None (no restarts)."""
    if not spec or spec == "none":
        return None
    kind, _, arg = spec.partition(":")
    if kind == "local" and arg:
        return LocalRestarter(arg)
    if kind == "docker" and arg:
        return DockerRestarter(arg)
    raise UsageError(f"invalid --restarter {spec!r}: expected local:STATE_DIR, docker:URL or none")
