"""The master's inbox of crash reports. Watcher threads (a restarter's ``watch``) put what they
saw here and wake the master; other processes (a node unit's ExecStopPost) report through
Redis. Each pass ends the crashed nodes before it reads them, so the health monitor sees them
DOWN in that very pass, with the cause for its incident."""

from __future__ import annotations

import logging
import threading
import time

from minihpc.core.crashes import Crash
from minihpc.state.connect import REDIS_ERRORS
from minihpc.state.store import Store

log = logging.getLogger(__name__)


class CrashInbox:
    def __init__(self, store: Store):
        self.store = store
        self.lock = threading.Lock()
        self.pending: list[Crash] = []

    def report(self, crash: Crash) -> None:
        """Called from a watcher thread: note it and wake the master's loop."""
        with self.lock:
            self.pending.append(crash)
        try:
            self.store.wake(f"crash {crash.node}")
        except REDIS_ERRORS:
            pass  # the master's next pass reads the inbox anyway

    def apply(self) -> dict[str, str]:
        """End every reported node whose agent is still the one that crashed; the causes of
        those this made DOWN, by node. Reports that cannot be applied while Redis is away wait
        for the next pass (those applied already keep their causes); a report that fails for
        any other reason is logged and dropped, never retried forever."""
        with self.lock:
            crashes, self.pending = self.pending, []
        causes: dict[str, str] = {}
        try:
            crashes += self.store.take_crashes()  # those other processes reported (systemd units)
        except REDIS_ERRORS:
            self.put_back(crashes)
            return causes
        for i, crash in enumerate(crashes):
            try:
                ended = self.store.end_crashed(crash)
            except REDIS_ERRORS:
                self.put_back(crashes[i:])
                return causes
            except Exception:  # noqa: BLE001 - one bad report must not stop every pass
                log.exception("node %s: crash report %r not applied", crash.node, crash)
                continue
            if ended:
                causes[crash.node] = crash.cause
                log.info("node %s: %s %.3fs ago", crash.node, crash.cause, time.time() - crash.at)
        return causes

    def put_back(self, crashes: list[Crash]) -> None:
        with self.lock:
            self.pending[:0] = crashes
