"""The live streams: one subscription to Redis's live channel per server, fanned out to every
client (the ``/events`` stream, and each log stream's wake-up when its job changes), and a
job's log files followed by byte offset.

Nothing here polls Redis per client: job changes arrive pushed from the live channel, node
state changes come from one look at the registry per second for the whole server, and a log
stream reads Redis again only when its job changed (or every RECHECK seconds, in case a
message was lost while Redis was away).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator

import anyio
import redis
import redis.asyncio

from minihpc.api import sse
from minihpc.client.logs import SETTLE, LogFollower, settled
from minihpc.core.errors import NotFound
from minihpc.core.models import Job
from minihpc.core.outcome import format_exit
from minihpc.state import keys
from minihpc.state.connect import REDIS_ERRORS
from minihpc.state.store import Store

log = logging.getLogger(__name__)

POLL = 0.2
"""Seconds between looks at a followed job's log files (a stat each; no Redis)."""
RECHECK = 5.0
"""Seconds between a log stream's own looks at its job, besides the pushed changes."""
KEEPALIVE_EVERY = 15.0
NODE_LOOK = 1.0
"""Seconds between the server's looks at the node registry (node up/down has no message)."""
QUEUE_MAX = 1000


class Hub:
    """The server's one subscriber to the live channel; each client gets a queue of events."""

    def __init__(self, url: str, store: Store):
        self.url, self.store = url, store
        self.queues: set[asyncio.Queue] = set()
        self.nodes: dict[str, str] = {}

    @contextlib.contextmanager
    def subscribe(self):
        queue: asyncio.Queue = asyncio.Queue(QUEUE_MAX)
        self.queues.add(queue)
        try:
            yield queue
        finally:
            self.queues.discard(queue)

    def broadcast(self, event: dict) -> None:
        """A copy of ``event`` to every client (each may change its own)."""
        for queue in list(self.queues):
            if queue.full():  # a client too slow to read: it loses the oldest, not the server
                queue.get_nowait()
            queue.put_nowait(dict(event))

    async def run(self) -> None:
        await asyncio.gather(self._listen(), self._watch_nodes())

    async def _listen(self) -> None:
        while True:
            client = redis.asyncio.Redis.from_url(self.url, socket_keepalive=True, health_check_interval=30)
            try:
                async with client.pubsub() as pubsub:
                    await pubsub.subscribe(keys.LIVE)
                    async for message in pubsub.listen():
                        if message.get("type") != "message":
                            continue
                        try:
                            event = json.loads(message["data"])
                        except (TypeError, ValueError):
                            event = None
                        if isinstance(event, dict) and isinstance(event.get("type"), str):
                            self.broadcast(event)
                        else:
                            log.warning("api: skipped a live message that is not a JSON event")
            except (redis.RedisError, OSError) as exc:
                log.warning("api: live channel lost (%s); resubscribing", exc)
                self.broadcast({"type": "resync"})  # streams re-read what they show
            finally:
                with contextlib.suppress(Exception):
                    await client.aclose()
            await asyncio.sleep(1.0)

    async def _watch_nodes(self) -> None:
        while True:
            try:
                statuses = await anyio.to_thread.run_sync(self.store.node_statuses)
                now = {n.name: n.state.value for n in statuses}
                for name, state in now.items():
                    if self.nodes.get(name) != state:
                        self.broadcast({"type": "node", "name": name, "state": state})
                for name in set(self.nodes) - set(now):
                    self.broadcast({"type": "node", "name": name, "state": None})
                self.nodes = now
            except REDIS_ERRORS:
                pass
            await asyncio.sleep(NODE_LOOK)


async def events(hub: Hub) -> AsyncIterator[bytes]:
    """The ``/events`` stream: job state changes, incidents, node state changes."""
    with hub.subscribe() as queue:
        yield b"retry: 2000\n\n"
        while True:
            try:
                event = await asyncio.wait_for(queue.get(), KEEPALIVE_EVERY)
            except asyncio.TimeoutError:
                yield sse.KEEPALIVE
                continue
            kind = event.pop("type", "job")
            yield sse.frame(kind, event)


def job_state(job: Job) -> dict:
    return {"state": job.state.value, "state_code": job.state.code, "attempts": job.queue_attempts,
            "exit": format_exit(job.exit_code, job.signal), "reason": job.reason}


async def job_log(store: Store, hub: Hub, job: Job, node: str | None, cursor: dict[str, int]) -> AsyncIterator[bytes]:
    """The ``/jobs/{id}/logs/stream`` stream: every line of every node's log as it is written,
    a ``state`` event when the job changes, and ``end`` with its final state. File reads and
    Redis calls run in worker threads: a slow disk or Redis never stalls the other streams."""
    follower = await anyio.to_thread.run_sync(LogFollower, store, job, node, cursor)
    shown = job_state(job)
    with hub.subscribe() as queue:
        yield b"retry: 1000\n\n"
        yield sse.frame("state", shown)
        last_look, last_sent = 0.0, time.monotonic()  # look at once: it may have ended meanwhile
        while True:
            for name, line, offsets in await anyio.to_thread.run_sync(follower.read):
                yield sse.frame("line", {"node": name, "line": line}, sse.encode_cursor(offsets))
                last_sent = time.monotonic()
            changed = False
            while not queue.empty():
                event = queue.get_nowait()
                changed |= event.get("type") == "resync" or (event.get("type") == "job" and event.get("id") == job.id)
            over = False
            if changed or time.monotonic() - last_look >= RECHECK:
                last_look = time.monotonic()
                try:
                    job, over = await anyio.to_thread.run_sync(_look, store, follower, job.id)
                except REDIS_ERRORS:
                    pass  # Redis is away: keep streaming the files, look again later
                except NotFound:  # the job was deleted meanwhile
                    yield sse.frame("end", dict(shown, reason="deleted"))
                    return
                else:
                    if job_state(job) != shown:
                        shown = job_state(job)
                        yield sse.frame("state", shown)
            if over:
                await _settle(store, job)
                while batch := await anyio.to_thread.run_sync(follower.read, True):  # to every log's end
                    for name, line, offsets in batch:
                        yield sse.frame("line", {"node": name, "line": line}, sse.encode_cursor(offsets))
                yield sse.frame("end", shown)
                return
            if time.monotonic() - last_sent >= KEEPALIVE_EVERY:
                yield sse.KEEPALIVE
                last_sent = time.monotonic()
            await asyncio.sleep(POLL)


def _look(store: Store, follower: LogFollower, job_id: int) -> tuple[Job, bool]:
    """The job as it is now and whether it has ended for good; the follower learns its nodes."""
    job, over = store.job_settled(job_id)
    follower.refresh(job)
    return job, over


async def _settle(store: Store, job: Job) -> None:
    """client.logs.settle without holding a worker thread while it waits."""
    deadline = time.monotonic() + SETTLE
    while time.monotonic() < deadline:
        try:
            if settled(job, set(await anyio.to_thread.run_sync(store.job_results, job.id, job.attempts))):
                return
        except REDIS_ERRORS:
            return
        await asyncio.sleep(0.1)
