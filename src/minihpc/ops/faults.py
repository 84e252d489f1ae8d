"""Fault injection for drills: one fault of a kind, into one node of a running cluster.

- :class:`ComposeFaults` acts on the Compose project's containers with the ``docker`` CLI, run
  by the operator on the host (never from inside the cluster, which has no Docker access);
- :class:`LocalFaults` acts on the processes of a local-mode cluster (``minihpc up --local``).

``inject`` returns as soon as the fault is in place. Faults with a duration (pause, disconnect)
are undone by :meth:`undo` once it has passed; undoing a fault that the health monitor has
already cleared (it restarts a paused container, for one) is not an error.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import psutil

from minihpc.core.errors import UsageError
from minihpc.machine.local_state import LocalState
from minihpc.machine.processes import process_tree, send

KINDS = ("stop", "kill", "pause", "disconnect", "redis-restart")
TIMED = ("pause", "disconnect")
"""Kinds that last ``duration`` seconds and are then undone."""


def check_kind(kind: str) -> str:
    if kind not in KINDS:
        raise UsageError(f"unknown drill {kind!r}: expected one of {', '.join(KINDS)}")
    return kind


class ComposeFaults:
    def __init__(self, project: str, docker: str = "docker"):
        self.project = project
        self.docker = docker
        self._network: tuple[str, list[str]] | None = None

    def _run(self, *args: str, check: bool = True) -> str:
        proc = subprocess.run([self.docker, *args], capture_output=True, text=True, timeout=120)
        if check and proc.returncode != 0:
            raise RuntimeError(f"docker {' '.join(args)}: {proc.stderr.strip()[:300]}")
        return proc.stdout

    def container(self, service: str) -> str:
        ids = self._run(
            "ps", "-aq", "--filter", f"label=com.docker.compose.project={self.project}",
            "--filter", f"label=com.docker.compose.service={service}",
        ).split()
        if not ids:
            raise UsageError(f"no container for node {service!r} in Compose project {self.project!r}")
        return ids[0]

    def inject(self, kind: str, node: str) -> None:
        if kind == "redis-restart":
            self._run("restart", "-t", "0", self.container("redis"))
            return
        cid = self.container(node)
        if kind == "stop":
            # `docker stop` waits for the container to exit; the fault starts at the SIGTERM.
            subprocess.Popen([self.docker, "stop", cid], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        elif kind == "kill":
            self._run("kill", cid)
        elif kind == "pause":
            self._run("pause", cid)
        elif kind == "disconnect":
            networks = json.loads(self._run("inspect", "-f", "{{json .NetworkSettings.Networks}}", cid))
            name, info = next(iter(networks.items()))
            aliases = [a for a in info.get("Aliases") or [] if not cid.startswith(a)]
            self._network = (name, aliases)
            self._run("network", "disconnect", "--force", name, cid)

    def undo(self, kind: str, node: str) -> str:
        cid = self.container(node)
        if kind == "pause":
            state = self._run("inspect", "-f", "{{.State.Status}}", cid).strip()
            if state != "paused":
                return f"{node} was no longer paused ({state}): the health monitor had restarted it"
            self._run("unpause", cid)
            return f"{node} unpaused"
        if kind == "disconnect" and self._network:
            name, aliases = self._network
            alias_args = [arg for alias in aliases for arg in ("--alias", alias)]
            self._run("network", "connect", *alias_args, name, cid)
            return f"{node} reconnected to {name}"
        return ""


class LocalFaults:
    """Local mode: a node is its agent's process tree, Redis a process of its own."""

    def __init__(self, state_dir: str | Path):
        self.state = LocalState(state_dir)
        self._paused: list[psutil.Process] = []

    def tree(self, node: str) -> list[psutil.Process]:
        if not self.state.exists():
            raise UsageError(f"no local cluster in {self.state.root} (start one with: minihpc up --local)")
        pid = self.state.pids().get(node)
        if pid is None:
            raise UsageError(f"no node {node!r} in the local cluster")
        procs = process_tree(pid)
        if not procs:
            raise UsageError(f"node {node!r} is not running (pid {pid} is gone)")
        return procs

    def inject(self, kind: str, node: str) -> None:
        if kind == "disconnect":
            raise UsageError("drill disconnect needs the Compose cluster: local nodes share one network stack")
        if kind == "redis-restart":
            from minihpc.ops import local

            local.restart_redis(self.state.root)
            return
        procs = self.tree(node)
        if kind == "stop":
            send(procs[:1], signal.SIGTERM)  # the agent tears its ranks down itself
        elif kind == "kill":
            send(procs, signal.SIGKILL)  # like a container dying: everything at once
        elif kind == "pause":
            send(procs, signal.SIGSTOP)
            self._paused = procs

    def undo(self, kind: str, node: str) -> str:
        if kind != "pause":
            return ""
        alive = [p for p in self._paused if p.is_running() and p.status() == psutil.STATUS_STOPPED]
        send(alive, signal.SIGCONT)
        if not alive:
            return f"{node} was no longer paused: the health monitor had restarted it"
        return f"{node} resumed ({len(alive)} processes)"


def wait_undo(faults, kind: str, node: str, duration: float) -> str:
    """Hold a timed fault for ``duration`` seconds, then undo it."""
    if kind not in TIMED:
        return ""
    time.sleep(max(0.0, duration))
    return faults.undo(kind, node)

