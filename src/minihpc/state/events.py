"""Events: the master's wake-ups, and the incident log (node down / restarted / back /
drained, job requeued or stalled) that operators and drills read."""

from __future__ import annotations

import json
import time

from minihpc.state import keys
from minihpc.state.connect import BLOCK_MAX

EVENTS_MAX = 100
"""The wake-up list is trimmed to this many entries."""

INCIDENTS_KEPT = 1000
"""Incidents kept, newest first."""


class Events:
    r: object

    def wake(self, why: str = "") -> None:
        """Tell the master something changed, so it schedules at once."""
        with self.r.pipeline(transaction=False) as pipe:
            pipe.rpush(keys.EVENTS, why or "wake")
            pipe.ltrim(keys.EVENTS, -EVENTS_MAX, -1)
            pipe.execute()

    def wait_event(self, timeout: float) -> bool:
        """Block until a wake-up arrives or ``timeout`` passes (BLOCK_MAX at most, within the
        connection's socket timeout); drain the rest."""
        got = self.r.blpop([keys.EVENTS], timeout=min(BLOCK_MAX, max(0.01, timeout)))  # 0 would block for ever
        if got:
            self.r.delete(keys.EVENTS)
        return bool(got)

    def incident(self, kind: str, node: str | None = None, job: int | None = None, **detail) -> None:
        record = {"at": time.time(), "kind": kind, "node": node, "job": job, **detail}
        with self.r.pipeline() as pipe:
            pipe.lpush(keys.INCIDENTS, json.dumps(record, sort_keys=True))
            pipe.ltrim(keys.INCIDENTS, 0, INCIDENTS_KEPT - 1)
            pipe.execute()

    def incidents(self, limit: int = 100) -> list[dict]:
        """The newest ``limit`` incidents, newest first."""
        return [json.loads(x) for x in self.r.lrange(keys.INCIDENTS, 0, limit - 1)]

    def ping(self) -> bool:
        """Whether Redis answers now (drills wait for a restarted Redis with it)."""
        return bool(self.r.ping())
