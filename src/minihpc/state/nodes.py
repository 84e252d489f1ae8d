"""The node registry: registration and heartbeats, allocations, draining, and the restart
history the health monitor decides from."""

from __future__ import annotations

import functools
import json
import re
import threading
import time

from minihpc.core import measurements
from minihpc.core.crashes import Crash, applies
from minihpc.core.models import NodeStatus
from minihpc.state import keys, stats
from minihpc.state.atomic import atomic, free, held_by
from minihpc.state.connect import text, texts
from minihpc.state.events import add_incident

RESTARTS_KEPT = 100
"""Restart times kept per node, newest first."""
CRASHES_KEPT = 1000
"""Crash reports kept waiting for the master (it takes them every pass)."""


class NodeRegistry:
    r: object

    def register_node(
        self, name: str, addr: str, cpus: int, memory_bytes: int, ttl: float, metrics: str = "", gpus: int = 0,
        cpu_model: str = "", cpu_limit: float | None = None, gpu_model: str = "", gpu_devices: list[int] | None = None,
        simulated: bool = False,
    ) -> None:
        """Record what the node is made of (each registration says it anew) and that it is up.
        What was measured of it (core.measurements) stays until measured again. ``gpu_devices``:
        the ordinals of its ``gpus`` (default 0..gpus-1)."""
        devices = list(range(gpus)) if gpu_devices is None else list(gpu_devices)
        now = time.time()
        with self.r.pipeline() as pipe:
            pipe.sadd(keys.NODES, name)
            pipe.hset(
                keys.node(name),
                mapping={"name": name, "addr": addr, "cpus": cpus, "memory_bytes": memory_bytes, "gpus": len(devices),
                         "gpu_devices": ",".join(map(str, devices)), "cpu_model": cpu_model, "gpu_model": gpu_model,
                         "metrics": metrics, "registered_at": now, "last_heartbeat": now,
                         "simulated": int(simulated)},
            )
            if cpu_limit is not None:
                pipe.hset(keys.node(name), "cpu_limit", cpu_limit)
            else:
                pipe.hdel(keys.node(name), "cpu_limit")
            pipe.set(keys.node_alive(name), now, px=int(ttl * 1000))
            pipe.incr(keys.NODES_REVISION)
            pipe.rpush(keys.EVENTS, f"node {name}")
            pipe.execute()

    def record_speed(self, name: str, gflops: float, at: float, hardware: str = "") -> None:
        """The speed probe's figure for node ``name`` on ``hardware`` (core.measurements.signature)."""
        with self.r.pipeline() as pipe:
            pipe.hset(keys.node(name), mapping=measurements.probe_fields(gflops, at, hardware))
            pipe.hdel(keys.node(name), measurements.GFLOPS_JOB)
            pipe.incr(keys.NODES_REVISION)
            pipe.execute()

    def node_record(self, name: str) -> dict[str, str]:
        """Node ``name``'s record as stored (text fields; empty when unknown)."""
        return texts(self.r.hgetall(keys.node(name)))

    def record_measures(self, name: str, fields: dict[str, float | int]) -> None:
        """Figures a benchmark job measured on node ``name`` (core.measurements.node_updates)."""
        if fields:
            with self.r.pipeline() as pipe:
                pipe.hset(keys.node(name), mapping=fields)
                pipe.incr(keys.NODES_REVISION)
                pipe.execute()

    def heartbeat(self, name: str, ttl: float) -> None:
        self.heartbeats([name], ttl)

    def heartbeats(self, names: list[str], ttl: float) -> None:
        """Each node's beat, in one round trip (one host of many simulated nodes beats them so)."""
        now = time.time()
        with self.r.pipeline(transaction=False) as pipe:
            for name in names:
                pipe.set(keys.node_alive(name), now, px=int(ttl * 1000))
                pipe.hset(keys.node(name), "last_heartbeat", now)
            pipe.execute()

    def leave(self, name: str) -> None:
        """The node's agent is stopping: it is DOWN from now on, not after its timeout."""
        self.r.delete(keys.node_alive(name))

    def end_crashed(self, crash: Crash) -> bool:
        """A watcher saw node ``crash.node``'s agent end: it is DOWN now, unless a newer agent
        has beaten since (core.crashes.applies). True when this made it DOWN."""
        alive = keys.node_alive(crash.node)

        def body(pipe) -> bool:
            beat = pipe.get(alive)
            if not applies(None if beat is None else float(beat), crash):
                return False
            pipe.multi()
            pipe.delete(alive)
            return True

        return atomic(self.r, [alive], body)

    def report_crash(self, crash: Crash) -> None:
        """Tell the master node ``crash.node``'s agent ended (from another process) and wake it."""
        record = json.dumps({"node": crash.node, "at": crash.at, "cause": crash.cause})
        with self.r.pipeline(transaction=False) as pipe:
            pipe.rpush(keys.CRASHES, record)
            pipe.ltrim(keys.CRASHES, -CRASHES_KEPT, -1)
            pipe.rpush(keys.EVENTS, f"crash {crash.node}")
            pipe.execute()

    def take_crashes(self) -> list[Crash]:
        """The crash reports waiting for the master, oldest first; gone from Redis once taken."""
        with self.r.pipeline() as pipe:
            pipe.lrange(keys.CRASHES, 0, -1)
            pipe.delete(keys.CRASHES)
            records, _ = pipe.execute()
        crashes = []
        for raw in records:
            try:
                record = json.loads(raw)
                crashes.append(Crash(str(record["node"]), float(record["at"]), str(record["cause"])[:200]))
            except (ValueError, KeyError, TypeError):
                continue  # a bad record is dropped; the node's heartbeat still tells
        return crashes

    def node_count(self) -> int:
        """Nodes that ever registered (and were not forgotten): what a job may ask for."""
        return int(self.r.scard(keys.NODES))

    def node_job(self, name: str) -> int | None:
        """The job that holds node ``name``, or None when it is idle."""
        alloc = self.r.get(keys.node_alloc(name))
        return int(alloc) if alloc is not None else None

    def node_statuses(self, cache: NodeCache | None = None) -> list[NodeStatus]:
        """Every registered node, master-node first (node_sort_key). The alive, allocation and
        drain keys of all nodes in one MGET apiece, and each node's record -- with ``cache``
        (a long-lived reader's, the master's), only when one changed (keys.NODES_REVISION):
        a live node's last beat is its alive key's value, a silent one's is read apart."""
        names = sorted((text(n) for n in self.r.smembers(keys.NODES)), key=node_sort_key)
        if not names:
            return []
        with self.r.pipeline(transaction=False) as pipe:
            pipe.get(keys.NODES_REVISION)
            for key in (keys.node_alive, keys.node_alloc, keys.node_drain):
                pipe.mget([key(name) for name in names])
            revision, alive, alloc, drain = pipe.execute()
        if cache is None or not cache.holds(revision, names, time.monotonic()):
            with self.r.pipeline(transaction=False) as pipe:
                for name in names:
                    pipe.hgetall(keys.node(name))
                infos = [texts(info) for info in pipe.execute()]
            if cache is not None:
                cache.keep(revision, names, infos, time.monotonic())
            beats = {}
        else:
            infos = cache.infos
            silent = [name for name, beat in zip(names, alive) if beat is None]
            with self.r.pipeline(transaction=False) as pipe:
                for name in silent:
                    pipe.hget(keys.node(name), "last_heartbeat")
                beats = dict(zip(silent, map(text, pipe.execute() if silent else [])))
        fixed = cache.fixed if cache is not None else [None] * len(names)
        return [_node_status(name, infos[i], alive[i] is not None, alloc[i], drain[i],
                             beat=text(alive[i]) or beats.get(name) or infos[i].get("last_heartbeat"), fixed=fixed[i])
                for i, name in enumerate(names)]

    def node_status(self, name: str) -> NodeStatus | None:
        """Node ``name`` as :meth:`node_statuses` has it, or None when it is not registered."""
        with self.r.pipeline(transaction=False) as pipe:
            pipe.sismember(keys.NODES, name)
            _read_node(pipe, name)
            member, info, *raw = pipe.execute()
        info = texts(info)
        return _node_status(name, info, *raw, beat=info.get("last_heartbeat")) if member else None

    def all_alive(self, names: list[str]) -> bool:
        """Whether every one of these nodes is up (its heartbeat key is there)."""
        return self.r.exists(*map(keys.node_alive, names)) == len(set(names)) if names else True

    def release_node(self, node: str) -> int | None:
        """Clear a node's allocation (an agent that restarted holds nothing). Returns the job."""
        held = self.r.getdel(keys.node_alloc(node))
        if held is not None:
            self.wake(f"freed {node}")
        return int(held) if held is not None else None

    def release_if_held(self, node: str, job_id: int, incident: dict | None = None) -> bool:
        """Clear a node's allocation only if job ``job_id`` still holds it (in one
        transaction, so an allocation made meanwhile is never cleared); ``incident`` (its kind
        and details) is logged in that transaction."""

        def body(pipe):
            if not held_by(pipe, [node], job_id):
                return False
            pipe.multi()
            free(pipe, [node])
            if incident is not None:
                add_incident(pipe, node=node, job=job_id, **incident)
            return True

        return atomic(self.r, [keys.node_alloc(node)], body)

    def waiting_launches(self, launches: list[tuple[str, str]]) -> list[bool]:
        """For each (node, launch task id): whether the task still waits in the node's queue,
        or was dequeued and never started (a worker that hangs right after its dequeue)."""
        with self.r.pipeline(transaction=False) as pipe:
            for node, task in launches:
                for key in _launch_lists(self, node):
                    pipe.lpos(key, task)
            found = pipe.execute()
        return [found[2 * i] is not None or found[2 * i + 1] is not None for i in range(len(launches))]

    def drop_launch(self, node: str, task: str) -> None:
        """Take a launch task out of the node's queue (its job's attempt is over)."""
        with self.r.pipeline() as pipe:
            for key in _launch_lists(self, node):
                pipe.lrem(key, 0, task)
            pipe.execute()

    def lift_drain(self, node: str, reason: str) -> bool:
        """Lift the node's drain only if it is still ``reason`` (an admin's drain made since
        stays), keeping its restart history."""

        def body(pipe):
            if text(pipe.get(keys.node_drain(node))) != reason:
                return False
            pipe.multi()
            pipe.delete(keys.node_drain(node))
            return True

        return atomic(self.r, [keys.node_drain(node)], body)

    def forget_node(self, node: str) -> bool:
        """Remove a DOWN node from the registry (a worker scaled away); False if it is up."""
        if self.r.exists(keys.node_alive(node)):
            return False
        with self.r.pipeline() as pipe:
            pipe.srem(keys.NODES, node)
            pipe.delete(keys.node(node), keys.node_alloc(node), keys.node_drain(node), keys.node_restarts(node))
            pipe.incr(keys.NODES_REVISION)
            pipe.rpush(keys.EVENTS, f"node {node} forgotten")
            pipe.execute()
        return True

    # -- draining and restarts --------------------------------------------------------

    def drain(self, node: str, reason: str, incident: dict | None = None) -> None:
        """Out of service for ``reason``; ``incident`` (add_incident's arguments) in the same transaction."""
        with self.r.pipeline() as pipe:
            pipe.set(keys.node_drain(node), reason)
            if incident is not None:
                add_incident(pipe, **incident)
            pipe.execute()

    def undrain(self, node: str, incident: dict | None = None) -> bool:
        """Back in service, with a clean slate: its old restarts no longer count towards draining it."""
        with self.r.pipeline() as pipe:
            pipe.delete(keys.node_drain(node))
            pipe.delete(keys.node_restarts(node))
            if incident is not None:
                add_incident(pipe, **incident)
            return bool(pipe.execute()[0])

    def record_restart(self, node: str, at: float) -> None:
        with self.r.pipeline() as pipe:
            stats.count(pipe, "node_restarts", node)
            pipe.lpush(keys.node_restarts(node), at)
            pipe.ltrim(keys.node_restarts(node), 0, RESTARTS_KEPT - 1)
            pipe.execute()

    def forget_restart(self, node: str, at: float) -> None:
        """Take back the restart recorded at ``at``: the restarter refused it, so it neither
        spends the node's budget nor starts its boot grace."""
        self.r.lrem(keys.node_restarts(node), 1, at)

    def restarts(self, node: str) -> list[float]:
        return sorted(float(x) for x in self.r.lrange(keys.node_restarts(node), 0, -1))


def _launch_lists(store, node: str) -> tuple[str, str]:
    """rq's lists a launch task waits in on ``node``: its queue, and the intermediate list a
    dequeue moves it to until the worker starts it (rq names both; node.agent reads them so)."""
    from minihpc.state.queues import node_queue  # rq: only the master asks, not every CLI call

    queue = node_queue(store, node)
    return queue.key, queue.intermediate_queue_key


class RecentNodes:
    """The cluster record and the nodes as read at most ``max_age`` seconds ago, for a
    long-lived reader that checks many requests against them (the API's submits: each read of
    a thousand nodes took longer than the rest of a submit). Only for checks whose refusal is
    then made on a fresh read (client.submit.checked): a stale read may let through a job that
    then waits, never refuse one. Threads may share it."""

    def __init__(self, max_age: float = 2.0, clock=time.monotonic):
        self.max_age, self.clock = max_age, clock
        self._read: tuple[float, dict[str, str], list[NodeStatus]] | None = None
        self._lock = threading.Lock()

    def read(self, store) -> tuple[dict[str, str], list[NodeStatus]]:
        """(the cluster record, the nodes)."""
        with self._lock:
            now = self.clock()
            if self._read is None or now - self._read[0] > self.max_age:
                self._read = (now, store.cluster_info(), store.node_statuses())
            return self._read[1], self._read[2]


class NodeCache:
    """The nodes' records as a long-lived reader (the master, each pass) last read them: read
    again when a record changed (keys.NODES_REVISION), the nodes are others, or REREAD_AFTER
    seconds passed. A thousand nodes' records cost a pass 40 ms of reading (issue 38)."""

    REREAD_AFTER = 30.0

    def __init__(self):
        self.revision, self.names, self.infos, self.read_at = None, [], [], 0.0
        self.fixed: list[dict] = []  # _fixed of each record, parsed once

    def holds(self, revision, names: list[str], now: float) -> bool:
        return (self.revision is not None and revision == self.revision and names == self.names
                and now - self.read_at < self.REREAD_AFTER)

    def keep(self, revision, names: list[str], infos: list[dict[str, str]], now: float) -> None:
        self.revision, self.names, self.infos, self.read_at = revision, list(names), infos, now
        self.fixed = [_fixed(name, info) for name, info in zip(names, infos)]


def _read_node(pipe, name: str) -> None:
    """Queue the four reads :func:`_node_status` takes, in its order."""
    pipe.hgetall(keys.node(name))
    pipe.exists(keys.node_alive(name))
    pipe.get(keys.node_alloc(name))
    pipe.get(keys.node_drain(name))


def _node_status(name: str, info: dict[str, str], alive, alloc, drain, beat: str | None,
                 fixed: dict | None = None) -> NodeStatus:
    """A NodeStatus of a node's record (decoded), its alive, allocation and drain keys, and its
    last beat (``beat``: its alive key's value while it beats, else its record's). ``fixed``:
    :func:`_fixed` of ``info``, kept by a long-lived reader; the status is then filled in
    without the frozen dataclass's constructor (a thousand nodes each pass)."""
    status = object.__new__(NodeStatus)
    fields = status.__dict__
    fields.update(fixed if fixed is not None else _fixed(name, info))
    fields["gpu_devices"] = list(fields["gpu_devices"])  # each status its own list
    fields["alive"] = bool(alive)
    fields["job"] = int(alloc) if alloc is not None else None
    fields["drain_reason"] = text(drain)
    fields["last_heartbeat"] = float(beat) if beat else None
    return status


def _fixed(name: str, info: dict[str, str]) -> dict:
    """The fields of a node's status its record alone gives (every one but alive, job,
    drain_reason and last_heartbeat)."""
    return dict(
        name=name,
        addr=info.get("addr", name),
        cpus=int(info.get("cpus") or 0),
        memory_bytes=int(info.get("memory_bytes") or 0),
        gpus=int(info.get("gpus") or 0),
        gpu_devices=_devices(info),
        registered_at=float(info["registered_at"]) if info.get("registered_at") else None,
        metrics=info.get("metrics") or None,
        cpu_model=info.get("cpu_model", ""),
        cpu_limit=measurements.number(info.get("cpu_limit")),
        gpu_model=info.get("gpu_model", ""),
        gflops=measurements.number(info.get(measurements.GFLOPS)),
        allreduce_gbps=measurements.number(info.get(measurements.ALLREDUCE)),
        simulated=info.get("simulated") == "1",
    )


def _devices(info: dict) -> list[int]:
    """A node's GPU ordinals as registered (0..gpus-1 for a registration that named none)."""
    if "gpu_devices" not in info:
        return list(range(int(info.get("gpus") or 0)))
    return [int(d) for d in info["gpu_devices"].split(",") if d.strip().isdigit()]


@functools.lru_cache(maxsize=8192)
def node_sort_key(name: str) -> tuple:
    """master-node first, then workers in numeric order (worker-node-2 before worker-node-10)."""
    parts = re.split(r"(\d+)", name)
    return (0 if name.startswith("master") else 1, tuple(int(p) if p.isdigit() else p for p in parts))
