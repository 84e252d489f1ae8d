"""Events: the master's wake-ups, the incident log (node down / restarted / back / drained, job
requeued or stalled) that operators and drills read, the live channel the REST API streams
from, and the master's own heartbeat."""

from __future__ import annotations

import json
import time

from minihpc.core.models import JobState
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
        with self.r.pipeline() as pipe:
            add_incident(pipe, kind, node, job, **detail)
            pipe.execute()

    def incidents(self, limit: int = 100) -> list[dict]:
        """The newest ``limit`` incidents, newest first."""
        return [json.loads(x) for x in self.r.lrange(keys.INCIDENTS, 0, limit - 1)]

    def master_beat(self, ttl: float) -> None:
        """The master's loop is alive (for ``ttl`` seconds)."""
        self.r.set(keys.MASTER_ALIVE, str(time.time()), px=max(1, int(ttl * 1000)))

    def master_alive(self) -> bool:
        return bool(self.r.exists(keys.MASTER_ALIVE))

    def ping(self) -> bool:
        """Whether Redis answers now (drills wait for a restarted Redis with it)."""
        return bool(self.r.ping())


def add_incident(pipe, kind: str, node: str | None = None, job: int | None = None, **detail) -> None:
    """Queue an incident on ``pipe``: in the transaction of the change it reports, a reader never
    sees the change without it."""
    record = {"at": time.time(), "kind": kind, "node": node, "job": job, **detail}
    pipe.lpush(keys.INCIDENTS, json.dumps(record, sort_keys=True))
    pipe.ltrim(keys.INCIDENTS, 0, INCIDENTS_KEPT - 1)
    publish(pipe, dict(record, type="incident"))


def publish(pipe, event: dict) -> None:
    """Queue ``event`` on the live channel within the caller's pipeline or transaction, so it
    goes out with the change it tells of."""
    pipe.publish(keys.LIVE, json.dumps(event, sort_keys=True))


def job_event(job_id: int, state: str) -> dict:
    return {"type": "job", "id": int(job_id), "state": state, "state_code": JobState(state).code}
