"""The master's inbox of crash reports: watcher threads (a restarter's ``watch``) put what they
saw here and wake the master, other processes (a node unit's ExecStopPost) through Redis; each pass ends the crashed nodes before it reads them, so the
health monitor sees them DOWN in the same pass, with the cause for its incident."""

from __future__ import annotations

import logging
import threading
import time

from minihpc.core.crashes import Crash
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
        except Exception:  # noqa: BLE001 - the next pass reads the inbox anyway
            pass

    def apply(self) -> dict[str, str]:
        """End every reported node whose agent is still the one that crashed; the causes of
        those that this made DOWN, by node. A report that cannot be applied now (Redis away)
        waits for the next pass."""
        with self.lock:
            crashes, self.pending = self.pending, []
        crashes += self.store.take_crashes()  # those other processes reported (systemd units)
        causes: dict[str, str] = {}
        for i, crash in enumerate(crashes):
            try:
                if self.store.end_crashed(crash):
                    causes[crash.node] = crash.cause
                    log.info("node %s: %s %.3fs ago", crash.node, crash.cause, time.time() - crash.at)
            except Exception:
                with self.lock:
                    self.pending[:0] = crashes[i:]
                raise
        return causes
