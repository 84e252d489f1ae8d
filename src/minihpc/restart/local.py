"""Local mode's restarter: a node is its agent process, whose command line ``up`` recorded
in the cluster's state directory (:class:`minihpc.machine.local_state.LocalState`)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import psutil

from minihpc.machine.local_state import LocalState
from minihpc.machine.processes import process_tree, running, terminate
from minihpc.restart.exits import ExitWatcher

STOP_GRACE = 5.0
"""Seconds a stopping agent gets to tear its job down (which may save a checkpoint)."""


class LocalRestarter:
    def __init__(self, state_dir: str | Path):
        self.state = LocalState(state_dir)
        self.spawned: dict[str, subprocess.Popen] = {}

    def restart(self, node: str) -> None:
        spec = self.state.node_commands().get(node)
        if spec is None:  # a simulated node (core.simulation): its process hosts many; restart that
            raise RuntimeError(f"node {node} has no command of its own here (a simulated node?)")
        for proc in self.spawned.values():
            proc.poll()  # reap agents we respawned earlier that have died since
        old = self.state.pids().get(node)
        if old and running(old):
            _make_room(old)
        with open(spec["log"], "ab") as out:
            proc = subprocess.Popen(
                spec["argv"], stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=dict(os.environ, **spec.get("env", {})), start_new_session=True,
            )
        self.spawned[node] = proc
        self.state.set_pid(node, proc.pid)

    def watch(self, report, stop) -> None:
        """Report each agent's end the moment it happens (:mod:`minihpc.restart.exits`)."""
        if not hasattr(os, "pidfd_open"):
            return  # not Linux: heartbeats alone
        ExitWatcher(self.state, report, stop, self.returncode).start()

    def returncode(self, node: str, pid: int) -> int | None:
        """The exit status of an agent this restarter respawned; None for those ``up`` started."""
        proc = self.spawned.get(node)
        return proc.wait() if proc is not None and proc.pid == pid else None


def _make_room(pid: int) -> None:
    """The old agent is still there: stopping (let it finish tearing its job down) or hung,
    e.g. paused (kill it and everything it started at once)."""
    tree = process_tree(pid)
    if not tree:
        return
    try:
        stopped = tree[0].status() == psutil.STATUS_STOPPED
    except psutil.NoSuchProcess:
        stopped = False
    terminate(tree, STOP_GRACE, term=[] if stopped else tree[:1])
