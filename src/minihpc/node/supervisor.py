"""One node's daemons as one process tree: the node agent, plus the master on the master node.

This is what a container (or a systemd unit on a real host) runs. If either daemon exits, the
other is stopped and ``minihpc node`` exits with the first one's status, so the container's
restart policy brings the node back whole. SIGTERM and SIGINT are passed on to both.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import time

import psutil

from minihpc.core.outcome import from_returncode
from minihpc.machine import processes

log = logging.getLogger(__name__)

STOP_WAIT = 20.0
"""Seconds the daemons get to stop after a signal (the agent tears its running job down)."""


def commands(
    name: str,
    master: bool,
    shared_dir: str | None = None,
    metrics_port: int | None = None,
    addr: str | None = None,
    restarter: str | None = None,
    cluster_metrics_port: int | None = None,
) -> list[list[str]]:
    """The daemons of node ``name``: the master's command first when it runs here."""
    python = [sys.executable, "-m", "minihpc.cli"]
    out = []
    if master:
        out.append(
            python + ["master"]
            + (["--shared-dir", shared_dir] if shared_dir else [])
            + (["--restarter", restarter] if restarter else [])
            + (["--metrics-port", str(cluster_metrics_port)] if cluster_metrics_port is not None else [])
            + (["--addr", addr] if addr and cluster_metrics_port is not None else [])
        )
    agent = python + ["agent", "--name", name]
    if addr:
        agent += ["--addr", addr]
    if metrics_port is not None:
        agent += ["--metrics-port", str(metrics_port)]
    out.append(agent)
    return out


def exit_status(returncode: int) -> int:
    """The node's exit status after one of its daemons ended on its own: the daemon's, with a
    signal as 128 + n (as a shell reports it: the container's exit code then names it), and 1
    for a daemon that ended with 0 (it was not asked to)."""
    return from_returncode(returncode)[0] or 1


def supervise(argvs: list[list[str]], poll: float = 0.2) -> int:
    procs = [subprocess.Popen(argv) for argv in argvs]
    stopping = False

    def forward(signum, _frame):
        nonlocal stopping
        stopping = True
        for p in procs:
            if p.poll() is None:
                p.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    try:
        while all(p.poll() is None for p in procs):
            time.sleep(poll)
        first = next(p for p in procs if p.returncode is not None)
        if not stopping:
            log.error("node: %s exited with %s; stopping the others", " ".join(first.args[2:4]), first.returncode)
        processes.terminate([psutil.Process(p.pid) for p in procs if p.poll() is None], STOP_WAIT)
        return 0 if stopping else exit_status(first.returncode)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
