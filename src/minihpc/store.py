"""The cluster state in Redis: jobs and nodes, read and changed atomically.

Every multi-key change is one optimistic transaction (WATCH, read, decide with a pure
function, MULTI/EXEC): any process may be killed at any point and the state stays whole.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable

import redis

from . import keys, stats
from .errors import ClusterUnavailable, NotFound
from .models import Job, JobState, NodeStatus, can_transition
from .outcome import NodeResult, Outcome, after_report, starts_failure

ENDED_HISTORY = 10_000
"""How many ended jobs history keeps; older records are deleted."""

EVENTS_MAX = 100
"""The wake-up list is trimmed to this many entries."""


REDIS_ERRORS = (redis.ConnectionError, redis.TimeoutError)
"""What an unreachable or restarting Redis raises; daemons retry through these."""


def connect(url: str) -> redis.Redis:
    """A client for ``url`` that raises ClusterUnavailable with one clear line if unreachable."""
    client = redis.Redis.from_url(url, socket_connect_timeout=3, health_check_interval=30)
    try:
        client.ping()
    except (redis.AuthenticationError, redis.ResponseError) as exc:
        if "@" not in url:
            raise ClusterUnavailable(
                f"Redis at {redact(url)} needs a password: put it in MINIHPC_REDIS_URL "
                "(redis://:PASSWORD@host:port/db)"
            ) from None
        raise ClusterUnavailable(f"Redis at {redact(url)} refused the password ({_short(exc)})") from None
    except (*REDIS_ERRORS, OSError) as exc:
        raise ClusterUnavailable(
            f"cannot reach Redis at {redact(url)} ({_short(exc)}); start a cluster with "
            "'minihpc up --local' or set MINIHPC_REDIS_URL"
        ) from None
    return client


def redact(url: str) -> str:
    """The URL without its password, for messages."""
    if "@" not in url:
        return url
    scheme, _, rest = url.partition("://")
    creds, _, host = rest.rpartition("@")
    user = creds.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}"


def _short(exc: Exception) -> str:
    text = str(exc).strip().rstrip(".")
    return text.split(". ")[-1] if text else type(exc).__name__


def _held_by(pipe, nodes: Iterable[str], job_id: int) -> list[str]:
    """Those of ``nodes`` whose allocation is ``job_id``'s (read in a WATCHed pipeline)."""
    return [n for n in nodes if _text(pipe.get(keys.node_alloc(n))) == str(job_id)]


def _free(pipe, nodes: list[str]) -> None:
    """Release ``nodes`` inside the transaction and wake the master if any were."""
    for n in nodes:
        pipe.delete(keys.node_alloc(n))
    if nodes:
        pipe.rpush(keys.EVENTS, f"freed {','.join(nodes)}")


def _text(value) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


SERIES_KEPT = 5000
"""Progress reports kept per job for plots (about 1.5 MB at most)."""
SERIES_TTL = 7 * 86400
"""Seconds an ended job's progress reports are kept (`minihpc report` needs them)."""


# Ranks report from every node: an attempt's "last" mark keeps the furthest step any reached.
_RAISE_LAST = """
local current = redis.call('HGET', KEYS[1], ARGV[1])
if (not current) or tonumber(cjson.decode(current)['step']) <= tonumber(ARGV[3]) then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
end
"""


class Store:
    def __init__(self, client: redis.Redis):
        self.r = client
        self._raise_last = client.register_script(_RAISE_LAST)  # EVALSHA, loaded on first use

    # -- plumbing ---------------------------------------------------------------------

    def _atomic(self, watch: Iterable[str], body: Callable):
        """Run ``body(pipe)`` under WATCH until it commits; it must call pipe.multi() to write."""
        with self.r.pipeline() as pipe:
            while True:
                try:
                    pipe.watch(*watch)
                    result = body(pipe)
                    if pipe.explicit_transaction:
                        pipe.execute()
                    return result
                except redis.WatchError:
                    continue

    def wake(self, why: str = "") -> None:
        """Tell the master something changed, so it schedules at once."""
        with self.r.pipeline(transaction=False) as pipe:
            pipe.rpush(keys.EVENTS, why or "wake")
            pipe.ltrim(keys.EVENTS, -EVENTS_MAX, -1)
            pipe.execute()

    def wait_event(self, timeout: float) -> bool:
        """Block until a wake-up arrives or ``timeout`` passes; drain the rest."""
        got = self.r.blpop([keys.EVENTS], timeout=max(0.01, timeout))  # 0 would block for ever
        if got:
            self.r.delete(keys.EVENTS)
        return bool(got)

    # -- cluster ----------------------------------------------------------------------

    def cluster_info(self) -> dict[str, str]:
        info = {_text(k): _text(v) for k, v in self.r.hgetall(keys.CLUSTER).items()}
        if not info:
            raise ClusterUnavailable(
                "Redis is reachable but holds no minihpc cluster; start one with "
                "'minihpc up --local' or point MINIHPC_REDIS_URL at a running cluster"
            )
        return info

    def set_cluster_info(self, info: dict[str, str]) -> None:
        self.r.hset(keys.CLUSTER, mapping=info)

    # -- jobs -------------------------------------------------------------------------

    def next_job_id(self) -> int:
        return int(self.r.incr(keys.JOB_SEQ))

    def add_job(self, job: Job) -> None:
        with self.r.pipeline() as pipe:
            pipe.hset(keys.job(job.id), mapping=job.to_redis())
            pipe.sadd(keys.JOBS_PENDING, job.id)
            pipe.rpush(keys.EVENTS, f"submit {job.id}")
            pipe.execute()

    def get_job(self, job_id: int) -> Job:
        raw = self.r.hgetall(keys.job(job_id))
        if not raw:
            raise NotFound(f"job {job_id} does not exist")
        return Job.from_redis(raw)

    def get_jobs(self, ids: Iterable[int]) -> list[Job]:
        ids = list(ids)
        with self.r.pipeline(transaction=False) as pipe:
            for job_id in ids:
                pipe.hgetall(keys.job(job_id))
            raws = pipe.execute()
        return [Job.from_redis(raw) for raw in raws if raw]

    def job_states(self, ids: Iterable[int]) -> dict[int, JobState | None]:
        ids = list(ids)
        with self.r.pipeline(transaction=False) as pipe:
            for job_id in ids:
                pipe.hget(keys.job(job_id), "state")
            values = pipe.execute()
        return {i: JobState(_text(v)) if v else None for i, v in zip(ids, values)}

    def pending_jobs(self) -> list[Job]:
        return self.get_jobs(int(i) for i in self.r.smembers(keys.JOBS_PENDING))

    def running_jobs(self) -> list[Job]:
        return self.get_jobs(int(i) for i in self.r.smembers(keys.JOBS_ACTIVE))

    def ended_jobs(self, limit: int = 100) -> list[Job]:
        ids = self.r.zrevrange(keys.JOBS_ENDED, 0, limit - 1)
        return self.get_jobs(int(i) for i in ids)

    def transition(
        self,
        job_id: int,
        new: JobState,
        reason: str,
        *,
        attempt: int | None = None,
        only_from: Iterable[JobState] | None = None,
        **fields,
    ) -> bool:
        """Move a job to ``new`` if that is legal now (and ``attempt`` is still current)."""

        def body(pipe):
            raw = pipe.hgetall(keys.job(job_id))
            if not raw:
                raise NotFound(f"job {job_id} does not exist")
            job = Job.from_redis(raw)
            if attempt is not None and job.attempts != attempt:
                return False
            if only_from is not None and job.state not in set(only_from):
                return False
            if not can_transition(job.state, new):
                return False
            # Nodes whose ranks already reported are free once the job ends; the others are
            # freed by their own report (or, for a dead node, by its agent's restart).
            results_key = keys.job_results(job.id, job.attempts)
            pipe.watch(results_key)
            done = [_text(n) for n in pipe.hkeys(results_key)] if new.terminal else []
            free = _held_by(pipe, done, job.id)
            pipe.multi()
            self._write_transition(pipe, job, new, reason, fields)
            _free(pipe, free)
            return True

        return self._atomic([keys.job(job_id)], body)

    def _write_transition(self, pipe, job: Job, new: JobState, reason: str, fields: dict) -> None:
        now = time.time()
        update = {"state": new.value, "reason": reason}
        update.update({k: "" if v is None else str(v) for k, v in fields.items()})
        if new.terminal:
            update["ended_at"] = str(now)
            stats.count(pipe, "jobs_ended", new.value)
            pipe.expire(keys.job_series(job.id), SERIES_TTL)
            if job.started_at is not None and job.state is JobState.RUNNING:
                stats.observe(pipe, "job_run_seconds", now - job.started_at)
            pipe.srem(keys.JOBS_PENDING, job.id)
            pipe.srem(keys.JOBS_ACTIVE, job.id)
            pipe.zadd(keys.JOBS_ENDED, {job.id: now})
        if new is JobState.NODE_FAIL:
            pipe.sadd(keys.JOBS_NODE_FAILED, job.id)
        pipe.hset(keys.job(job.id), mapping=update)
        pipe.rpush(keys.EVENTS, f"{new.value} {job.id}")

    def end_held_failure(self, job: Job, outcome: Outcome) -> bool:
        """FAILED for a job whose held failure was its own (same attempt, still RUNNING)."""
        return self.transition(
            job.id,
            outcome.state,
            "NonZeroExitCode",
            attempt=job.attempts,
            only_from=[JobState.RUNNING],
            exit_code=outcome.exit_code,
            signal=outcome.signal,
            failed_node=outcome.failed_node,
        )

    def record_progress(self, job_id: int, attempt: int, node: str, report: dict) -> None:
        data = {"attempt": attempt, "node": node, **report}
        mark = json.dumps({"step": report.get("step"), "at": report.get("at")})
        with self.r.pipeline() as pipe:
            pipe.hset(keys.job_progress(job_id), mapping={k: str(v) for k, v in data.items()})
            pipe.hsetnx(keys.job_steps(job_id), f"{attempt}:first", mark)
            self._raise_last(keys=[keys.job_steps(job_id)], args=[f"{attempt}:last", mark, int(report.get("step") or 0)],
                             client=pipe)
            pipe.rpush(keys.job_series(job_id), json.dumps(data))
            pipe.ltrim(keys.job_series(job_id), -SERIES_KEPT, -1)
            pipe.execute()

    def series(self, job_id: int) -> list[dict]:
        """Every progress report kept for the job, oldest first (see keys.JOB_SERIES)."""
        return [json.loads(x) for x in self.r.lrange(keys.job_series(job_id), 0, -1)]

    def attempt_steps(self, job_id: int) -> dict[int, dict[str, dict]]:
        """{attempt: {"first": {step, at}, "last": {step, at}}} from the job's progress reports."""
        out: dict[int, dict[str, dict]] = {}
        for field, value in self.r.hgetall(keys.job_steps(job_id)).items():
            attempt, _, which = _text(field).partition(":")
            out.setdefault(int(attempt), {})[which] = json.loads(value)
        return out

    def progress(self, job_ids: Iterable[int]) -> dict[int, dict]:
        """The newest progress report of each job that has one: {id: {attempt, step, at, ...}}."""
        ids = list(job_ids)
        with self.r.pipeline(transaction=False) as pipe:
            for job_id in ids:
                pipe.hgetall(keys.job_progress(job_id))
            raws = pipe.execute()
        out = {}
        for job_id, raw in zip(ids, raws):
            if raw:
                data = {_text(k): _text(v) for k, v in raw.items()}
                out[job_id] = {k: (v if k == "node" else float(v)) for k, v in data.items()}
        return out

    def reconcile(self) -> dict[int, str]:
        """Make every job's set membership agree with its state (after a crash or a restore):
        PENDING in the pending set only, RUNNING in the active set only, ended states in the
        ended set only. Returns {job id: what was fixed}."""
        last = int(self.r.get(keys.JOB_SEQ) or 0)
        fixed: dict[int, str] = {}
        pending = {int(i) for i in self.r.smembers(keys.JOBS_PENDING)}
        active = {int(i) for i in self.r.smembers(keys.JOBS_ACTIVE)}
        ended = {int(i) for i in self.r.zrange(keys.JOBS_ENDED, 0, -1)}
        states = self.job_states(range(1, last + 1))
        with self.r.pipeline() as pipe:
            for job_id, state in states.items():
                want = None if state is None else (
                    "pending" if state is JobState.PENDING else "active" if state is JobState.RUNNING else "ended"
                )
                have = {n for n, members in (("pending", pending), ("active", active), ("ended", ended)) if job_id in members}
                if have == ({want} if want else set()):
                    continue
                pipe.srem(keys.JOBS_PENDING, job_id)
                pipe.srem(keys.JOBS_ACTIVE, job_id)
                pipe.zrem(keys.JOBS_ENDED, job_id)
                if want == "pending":
                    pipe.sadd(keys.JOBS_PENDING, job_id)
                elif want == "active":
                    pipe.sadd(keys.JOBS_ACTIVE, job_id)
                elif want == "ended":
                    pipe.zadd(keys.JOBS_ENDED, {job_id: time.time()})
                fixed[job_id] = f"{state.value if state else 'no record'}: in {sorted(have) or 'no set'}, now {want or 'none'}"
            pipe.execute()
        return fixed

    def node_failed_jobs(self) -> list[Job]:
        """Jobs that became NODE_FAIL since the master last looked (requeue candidates)."""
        return self.get_jobs(sorted(int(i) for i in self.r.smembers(keys.JOBS_NODE_FAILED)))

    def requeue(self, job_id: int, attempt: int, reason: str) -> bool:
        """NODE_FAIL -> PENDING for the same attempt that failed; it keeps its id, counts the
        requeue, and is served before new jobs of its priority."""

        def body(pipe):
            raw = pipe.hgetall(keys.job(job_id))
            if not raw:
                return False
            job = Job.from_redis(raw)
            if job.attempts != attempt or not can_transition(job.state, JobState.PENDING):
                return False
            pipe.multi()
            pipe.hset(
                keys.job(job_id),
                mapping={
                    "state": JobState.PENDING.value,
                    "reason": reason,
                    "requeues": str(job.requeues + 1),
                    "ended_at": "",
                },
            )
            pipe.zrem(keys.JOBS_ENDED, job_id)
            pipe.sadd(keys.JOBS_PENDING, job_id)
            pipe.srem(keys.JOBS_NODE_FAILED, job_id)
            stats.count(pipe, "job_requeues")
            pipe.persist(keys.job_series(job_id))
            pipe.rpush(keys.EVENTS, f"requeued {job_id}")
            return True

        return self._atomic([keys.job(job_id)], body)

    def requeue_undecided(self, job_id: int) -> bool:
        """True while a NODE_FAIL job waits for the master's requeue decision."""
        return bool(self.r.sismember(keys.JOBS_NODE_FAILED, job_id))

    def settle_node_failure(self, job_id: int) -> None:
        """The master has decided about this NODE_FAIL job (it stays failed)."""
        self.r.srem(keys.JOBS_NODE_FAILED, job_id)

    def set_reasons(self, reasons: dict[int, str]) -> None:
        """Record why pending jobs wait (only for jobs still pending)."""
        if not reasons:
            return
        with self.r.pipeline(transaction=False) as pipe:
            for job_id, reason in reasons.items():
                pipe.hget(keys.job(job_id), "state")
            states = pipe.execute()
            for (job_id, reason), state in zip(reasons.items(), states):
                if _text(state) == JobState.PENDING.value:
                    pipe.hset(keys.job(job_id), "reason", reason)
            pipe.execute()

    def start(self, job_id: int, nodes: list[str], dispatch: Callable) -> Job | None:
        """Reserve every node of the job and dispatch its launch tasks, in one transaction.

        ``dispatch(pipe, job)`` queues the per-node launch tasks on the same pipeline, so a
        job is either RUNNING with all its nodes held and all launches queued, or untouched.
        """
        watch = [keys.job(job_id)] + [keys.node_alloc(n) for n in nodes]

        def body(pipe):
            raw = pipe.hgetall(keys.job(job_id))
            if not raw:
                return None
            job = Job.from_redis(raw)
            if job.state is not JobState.PENDING:
                return None
            if any(pipe.exists(keys.node_alloc(n)) for n in nodes):
                return None
            waited = time.time() - job.submitted_at if job.attempts == 0 else None
            job.state = JobState.RUNNING
            job.reason = "None"
            job.nodes = list(nodes)
            job.attempts += 1
            job.started_at = time.time()
            job.ended_at = None
            job.exit_code = None
            job.signal = None
            job.failed_node = None
            job.first_failure = None
            job.failing_since = None
            pipe.multi()
            for n in nodes:
                pipe.set(keys.node_alloc(n), job.id)
            pipe.hset(keys.job(job.id), mapping=job.to_redis())
            pipe.srem(keys.JOBS_PENDING, job.id)
            pipe.sadd(keys.JOBS_ACTIVE, job.id)
            if waited is not None:
                stats.observe(pipe, "job_wait_seconds", waited)
            dispatch(pipe, job)
            return job

        return self._atomic(watch, body)

    def report(self, job_id: int, attempt: int, node: str, result: NodeResult) -> Outcome | None:
        """A node's ranks are gone: record their result, end the job if that decides it, and
        release the node (and any peers already done) once the job is over."""
        results_key = keys.job_results(job_id, attempt)

        def body(pipe):
            raw = pipe.hgetall(keys.job(job_id))
            if not raw:
                return None
            job = Job.from_redis(raw)
            pipe.watch(results_key, *[keys.node_alloc(n) for n in job.nodes])
            results = {
                _text(k): NodeResult.from_dict(json.loads(v))
                for k, v in pipe.hgetall(results_key).items()
            }
            results[node] = result
            current = attempt == job.attempts
            outcome = after_report(job, results, node) if current else None
            if current:
                # Not RUNNING any more (ended, or already requeued): this attempt is over.
                ended = outcome is not None or job.state is not JobState.RUNNING
                candidates = list(results) if ended else []
            else:
                # A stale attempt frees its node unless the current attempt holds it again.
                reused = job.state is JobState.RUNNING and node in job.nodes
                candidates = [] if reused else [node]
            releasable = _held_by(pipe, candidates, job_id)
            pipe.multi()
            pipe.hset(results_key, node, json.dumps(result.to_dict()))
            if current and outcome is None and starts_failure(job, result):
                pipe.hset(keys.job(job_id), mapping={"first_failure": node, "failing_since": str(time.time())})
                pipe.rpush(keys.EVENTS, f"failing {job_id}")
            if outcome is not None:
                self._write_transition(
                    pipe,
                    job,
                    outcome.state,
                    "None" if outcome.state is JobState.COMPLETED else "NonZeroExitCode",
                    {
                        "exit_code": outcome.exit_code,
                        "signal": outcome.signal,
                        "failed_node": outcome.failed_node,
                    },
                )
            _free(pipe, releasable)
            return outcome

        return self._atomic([keys.job(job_id)], body)

    # -- health ---------------------------------------------------------------------

    INCIDENTS_KEPT = 1000

    def observe(self, name: str, value: float) -> None:
        with self.r.pipeline() as pipe:
            stats.observe(pipe, name, value)
            pipe.execute()

    def incident(self, kind: str, node: str | None = None, job: int | None = None, **detail) -> None:
        record = {"at": time.time(), "kind": kind, "node": node, "job": job, **detail}
        with self.r.pipeline() as pipe:
            pipe.lpush(keys.INCIDENTS, json.dumps(record, sort_keys=True))
            pipe.ltrim(keys.INCIDENTS, 0, self.INCIDENTS_KEPT - 1)
            pipe.execute()

    def incidents(self, limit: int = 100) -> list[dict]:
        return [json.loads(x) for x in self.r.lrange(keys.INCIDENTS, 0, limit - 1)]

    def record_restart(self, node: str, at: float) -> None:
        with self.r.pipeline() as pipe:
            stats.count(pipe, "node_restarts", node)
            pipe.lpush(keys.node_restarts(node), at)
            pipe.ltrim(keys.node_restarts(node), 0, 99)
            pipe.execute()

    def restarts(self, node: str) -> list[float]:
        return sorted(float(x) for x in self.r.lrange(keys.node_restarts(node), 0, -1))

    def drain(self, node: str, reason: str) -> None:
        self.r.set(keys.node_drain(node), reason)

    def undrain(self, node: str) -> bool:
        """Back in service, with a clean slate: its old restarts no longer count towards draining it."""
        with self.r.pipeline() as pipe:
            pipe.delete(keys.node_drain(node))
            pipe.delete(keys.node_restarts(node))
            return bool(pipe.execute()[0])

    def forget_node(self, node: str) -> bool:
        """Remove a DOWN node from the registry (a worker scaled away); False if it is up."""
        if self.r.exists(keys.node_alive(node)):
            return False
        with self.r.pipeline() as pipe:
            pipe.srem(keys.NODES, node)
            pipe.delete(keys.node(node), keys.node_alloc(node), keys.node_drain(node), keys.node_restarts(node))
            pipe.rpush(keys.EVENTS, f"node {node} forgotten")
            pipe.execute()
        return True

    def release_node(self, node: str) -> int | None:
        """Clear a node's allocation (an agent that restarted holds nothing). Returns the job."""
        held = self.r.getdel(keys.node_alloc(node))
        if held is not None:
            self.wake(f"freed {node}")
        return int(held) if held is not None else None

    def job_results(self, job_id: int, attempt: int) -> dict[str, NodeResult]:
        raw = self.r.hgetall(keys.job_results(job_id, attempt))
        return {_text(k): NodeResult.from_dict(json.loads(v)) for k, v in raw.items()}

    def prune_history(self) -> None:
        """Forget the oldest ended jobs beyond ENDED_HISTORY."""
        extra = self.r.zcard(keys.JOBS_ENDED) - ENDED_HISTORY
        if extra <= 0:
            return
        old = [int(i) for i in self.r.zrange(keys.JOBS_ENDED, 0, extra - 1)]
        with self.r.pipeline() as pipe:
            for job_id in old:
                pipe.delete(keys.job(job_id), keys.job_progress(job_id), keys.job_steps(job_id),
                            keys.job_series(job_id))
            pipe.zrem(keys.JOBS_ENDED, *old)
            pipe.execute()

    # -- nodes ------------------------------------------------------------------------

    def register_node(
        self, name: str, addr: str, cpus: int, memory_bytes: int, ttl: float, metrics: str = ""
    ) -> None:
        now = time.time()
        with self.r.pipeline() as pipe:
            pipe.sadd(keys.NODES, name)
            pipe.hset(
                keys.node(name),
                mapping={
                    "name": name,
                    "addr": addr,
                    "cpus": cpus,
                    "memory_bytes": memory_bytes,
                    "metrics": metrics,
                    "registered_at": now,
                    "last_heartbeat": now,
                },
            )
            pipe.set(keys.node_alive(name), now, px=int(ttl * 1000))
            pipe.rpush(keys.EVENTS, f"node {name}")
            pipe.execute()

    def heartbeat(self, name: str, ttl: float) -> None:
        now = time.time()
        with self.r.pipeline(transaction=False) as pipe:
            pipe.set(keys.node_alive(name), now, px=int(ttl * 1000))
            pipe.hset(keys.node(name), "last_heartbeat", now)
            pipe.execute()

    def node_statuses(self) -> list[NodeStatus]:
        names = sorted(_text(n) for n in self.r.smembers(keys.NODES))
        with self.r.pipeline(transaction=False) as pipe:
            for name in names:
                pipe.hgetall(keys.node(name))
                pipe.exists(keys.node_alive(name))
                pipe.get(keys.node_alloc(name))
                pipe.get(keys.node_drain(name))
            raw = pipe.execute()
        out = []
        for i, name in enumerate(names):
            info, alive, alloc, drain = raw[4 * i : 4 * i + 4]
            info = {_text(k): _text(v) for k, v in info.items()}
            out.append(
                NodeStatus(
                    name=name,
                    addr=info.get("addr", name),
                    alive=bool(alive),
                    job=int(alloc) if alloc is not None else None,
                    drain_reason=_text(drain),
                    cpus=int(info.get("cpus") or 0),
                    memory_bytes=int(info.get("memory_bytes") or 0),
                    last_heartbeat=float(info["last_heartbeat"]) if info.get("last_heartbeat") else None,
                    metrics=info.get("metrics") or None,
                )
            )
        return sorted(out, key=lambda n: node_sort_key(n.name))

    def schedulable_count(self) -> int:
        return sum(1 for n in self.node_statuses() if n.schedulable)


def node_sort_key(name: str) -> tuple:
    """master-node first, then workers in numeric order (worker-node-2 before worker-node-10)."""
    parts = re.split(r"(\d+)", name)
    return (0 if name.startswith("master") else 1, [int(p) if p.isdigit() else p for p in parts])
