"""Bringing Redis (and any other service named) back when it dies: Docker's ``restart:
unless-stopped`` does not restart a container after ``docker kill`` (it counts as a manual
stop), and without Redis the cluster stands still.

The restart proxy, the one process with the Docker socket, runs a :class:`Watchdog` per watched
service: every second it inspects this Compose project's container of that service and
:func:`decide` says whether to start it. Killed, crashed or OOM-killed (a non-zero exit) ->
start it, backing off while it keeps dying; stopped on purpose (``docker stop``/``compose
stop``: redis-server, like ``minihpc master``, exits 0 on SIGTERM) -> leave it; running,
restarting, paused or being created -> nothing.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from enum import Enum

from minihpc.core.restart_policy import backoff  # the health monitor's doubling, same shape
from minihpc.restart.engine import Engine

log = logging.getLogger(__name__)

REDIS_SERVICE = "redis"
"""The Compose service the proxy keeps up unless --watch names others."""


class Revive(str, Enum):
    START = "start"
    WAIT = "wait"  # it should come back, but not yet: just exited, or backing off
    LEAVE = "leave"  # up, on its way up, or stopped on purpose


@dataclass(frozen=True)
class WatchPolicy:
    interval: float = 1.0
    """Seconds between two inspections."""
    settle: float = 1.0
    """Seconds after the exit before the watchdog acts: Docker's own restart policy goes first."""
    backoff_initial: float = 1.0
    """Seconds after a start before a second one within ``window``; doubles with each after."""
    backoff_max: float = 60.0
    window: float = 300.0
    """Starts older than this no longer lengthen the backoff."""


def docker_time(value: str | None) -> float | None:
    """An Engine timestamp (RFC 3339, nanoseconds) as epoch seconds; None for Docker's zero
    time ``0001-01-01T00:00:00Z`` or anything unreadable."""
    match = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)", value or "")
    if not match or match.group(1).startswith("0001-"):
        return None
    base, fraction, zone = match.groups()
    stamp = datetime.fromisoformat(base + (f".{fraction[:6].ljust(6, '0')}" if fraction else "")
                                   + ("+00:00" if zone == "Z" else zone))
    return stamp.timestamp()


def why_it_stopped(state: dict) -> str:
    code = state.get("ExitCode")
    if state.get("OOMKilled"):
        return f"OOM-killed (exit code {code})"
    if code == 137:
        return "killed (exit code 137: SIGKILL, e.g. docker kill)"
    return f"crashed (exit code {code})"


def decide(state: dict | None, now: float, starts: list[float], policy: WatchPolicy) -> tuple[Revive, str]:
    """What to do about the container whose inspect ``State`` is ``state`` (None: there is no
    container), given the times the watchdog started it before."""
    if state is None:
        return Revive.LEAVE, "no container (not created, or removed)"
    status = state.get("Status", "?")
    if state.get("Restarting"):
        return Revive.LEAVE, "restarting (Docker's restart policy)"
    if status not in ("exited", "dead"):
        return Revive.LEAVE, status
    if state.get("ExitCode") == 0 and not state.get("OOMKilled"):
        return Revive.LEAVE, f"{status} with exit code 0: stopped on purpose"
    cause = why_it_stopped(state)
    finished = docker_time(state.get("FinishedAt"))
    if finished is not None and now - finished < policy.settle:
        return Revive.WAIT, f"{cause} {now - finished:.1f}s ago; settling"
    recent = sorted(t for t in starts if now - t < policy.window)
    delay = backoff(len(recent), policy)
    if recent and now - recent[-1] < delay:
        return Revive.WAIT, (f"{cause}; started {len(recent)} times in {policy.window:g}s, "
                             f"backing off {delay:g}s")
    return Revive.START, cause


class Watchdog:
    """The loop around :func:`decide`; ``start()`` runs it in a daemon thread that logs and
    survives every error of its own."""

    def __init__(self, engine: Engine, project: str, service: str = REDIS_SERVICE,
                 policy: WatchPolicy | None = None, clock=time.time):
        self.engine = engine
        self.project = project
        self.service = service
        self.policy = policy or WatchPolicy()
        self.clock = clock
        self.starts: list[float] = []
        self.stop = threading.Event()

    def check(self) -> Revive:
        """One inspection, and a start if :func:`decide` says so."""
        container = self.engine.find(self.project, self.service)
        state = self.engine.inspect(container["Id"])["State"] if container else None
        now = self.clock()
        action, reason = decide(state, now, self.starts, self.policy)
        if action is Revive.START:
            self.starts = [t for t in self.starts if now - t < self.policy.window] + [now]
            log.warning("%s: %s; starting it (start %d in %gs)", self.service, reason, len(self.starts), self.policy.window)
            self.engine.act(container["Id"], "start")
        else:
            log.debug("%s: %s", self.service, reason)
        return action

    def run(self) -> None:
        failing: str | None = None  # the error logged last; the same one again is not repeated
        while not self.stop.wait(self.policy.interval):
            try:
                self.check()
                failing = None
            except Exception as exc:  # noqa: BLE001 - the watchdog must outlive anything it meets
                message = f"{self.service} watchdog: {type(exc).__name__}: {exc}"
                if message != failing:
                    log.error("%s", message, exc_info=log.isEnabledFor(logging.DEBUG))
                failing = message

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.run, name=f"watch-{self.service}", daemon=True)
        thread.start()
        return thread
