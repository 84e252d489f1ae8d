"""The heartbeats of a host of simulated nodes (node.simulated), from a process of their own.

A thousand simulated nodes are a thousand rq worker threads in one Python process. When a
thousand short jobs start at once, all of them want the interpreter's lock, and a heartbeat
thread among them waited its turn for seconds: every node timed out together, and the master
requeued their jobs (seen in ``make bench-scale``). A real node has a process, and a core, of its
own; so the beats come from a child that shares no lock with the workers. They stand for the
host: the child beats only while the host runs -- it dies with it (``PR_SET_PDEATHSIG``) and
skips a beat while the host is stopped (SIGSTOP: a silence, as a stopped agent's). It beats at
once, says so with a line on its standard output (the host beats until then), and stops beating
a node the host names on its standard input (a node whose agent stopped leaves for good).

    python -m minihpc.node.sim_beats HOST_PID NODE [NODE ...]   (the settings from the environment)
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import sys
import threading

from minihpc.core.config import load_settings
from minihpc.state.connect import REDIS_ERRORS, connect
from minihpc.state.store import Store

log = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1


def host_running(pid: int) -> bool | None:
    """Whether process ``pid`` runs (True), is stopped (False), or is gone (None)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            state = stat.read().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return None
    return None if state in ("Z", "X") else state not in ("T", "t")


def beat(host: int, names: list[str]) -> int:
    try:  # die with the host at once (Linux); the check below catches the rest
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass
    settings = load_settings(None)
    store = Store(connect(settings.redis_url))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    beating = set(names)
    threading.Thread(target=_left, args=(beating,), daemon=True).start()
    announced, pause = False, 0.0  # the first beat at once
    while not stop.wait(pause):
        pause = settings.heartbeat_interval
        running = host_running(host)
        if running is None or os.getppid() != host:
            return 0
        if not running:
            continue
        try:
            store.heartbeats(sorted(beating), settings.node_timeout)
        except REDIS_ERRORS as exc:
            log.warning("simulated nodes: heartbeat failed: %s", exc)
            continue
        if not announced:
            print("beating", flush=True)
            announced = True
    return 0


def _left(beating: set[str]) -> None:
    """Stop beating each node the host names on standard input, a line each."""
    for line in sys.stdin:
        beating.discard(line.strip())


if __name__ == "__main__":
    sys.exit(beat(int(sys.argv[1]), sys.argv[2:]))
