"""Local mode's crash watcher: the master holds a pidfd on every node agent's process (those
``up`` started and those it respawned) and reports the moment one ends, instead of waiting
for its heartbeat to lapse. A pidfd follows that very process: a pid reused later is not it.
"""

from __future__ import annotations

import errno
import logging
import os
import select
import threading
import time
from collections.abc import Callable

import psutil

from minihpc.core.crashes import Crash, exit_phrase
from minihpc.machine.local_state import LocalState

log = logging.getLogger(__name__)

RESCAN = 0.25
"""Seconds between looks at the cluster's pid file for agents started since (respawns)."""


def is_agent(pid: int, node: str) -> bool:
    """Whether ``pid`` runs node ``node``'s agent (and not a process that took a freed pid)."""
    try:
        argv = _cmdline(psutil.Process(pid))
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False
    return "agent" in argv and any(a == "--name" and b == node for a, b in zip(argv, argv[1:]))


def _cmdline(proc, wait: float = 1.0) -> list[str]:
    """The process's argv. A process its parent has just started can show an empty one for a
    moment: the parent's Popen returns once exec() has closed its error pipe, before the kernel
    has set up the new program's arguments. Look again until they appear (or ``wait`` ends)."""
    deadline = time.monotonic() + wait
    while True:
        argv = proc.cmdline()
        if argv or time.monotonic() >= deadline or proc.status() == psutil.STATUS_ZOMBIE:
            return argv
        time.sleep(0.005)


class ExitWatcher:
    """``returncode(node, pid)``: the exit status when the watcher's owner knows it (a child it
    respawned), else None."""

    def __init__(self, state: LocalState, report: Callable[[Crash], None], stop: threading.Event,
                 returncode: Callable[[str, int], int | None] = lambda node, pid: None):
        self.state = state
        self.report = report
        self.stop = stop
        self.returncode = returncode
        self.fds: dict[int, tuple[str, int]] = {}  # pidfd -> (node, pid)
        self.poller = select.poll()

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.run, name="exit-watcher", daemon=True)
        thread.start()
        return thread

    def run(self) -> None:
        failing = False
        try:
            while not self.stop.is_set():
                try:
                    self.track(self.state.node_commands(), self.state.pids())
                    ready = self.poller.poll(RESCAN * 1000)
                    at = time.time()
                    for fd, _ in ready:
                        self.ended(fd, at)
                    failing = False
                except OSError as exc:
                    if exc.errno == errno.ENOSYS:
                        log.warning("exit watcher: this kernel has no pidfds; heartbeats alone tell crashes")
                        return
                    if not failing:
                        log.warning("exit watcher: %s; retrying", exc)
                    failing = True
                    self.stop.wait(RESCAN)
                except Exception:  # noqa: BLE001 - the watcher must outlive a bad look
                    log.exception("exit watcher: a look failed; retrying")
                    self.stop.wait(RESCAN)
        finally:
            for fd in list(self.fds):
                os.close(fd)
            self.fds.clear()

    def track(self, nodes: dict, pids: dict[str, int]) -> None:
        """Open a pidfd on each node agent not watched yet."""
        watched = {pid for _, pid in self.fds.values()}
        for node in nodes:
            pid = pids.get(node)
            if not pid or pid in watched or not is_agent(pid, node):
                continue
            try:
                fd = os.pidfd_open(pid)
            except ProcessLookupError:
                continue  # gone already: its heartbeat tells
            self.fds[fd] = (node, pid)
            self.poller.register(fd, select.POLLIN)

    def ended(self, fd: int, at: float) -> None:
        node, pid = self.fds.pop(fd)
        self.poller.unregister(fd)
        os.close(fd)
        self.report(Crash(node, at, exit_phrase(self.returncode(node, pid))))
