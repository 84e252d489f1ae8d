"""How a job's state changes: start, node results, the end, requeue, and a user's requests
(``scontrol`` hold, release, update, requeue) -- each one atomic.

Every change is one optimistic transaction (:func:`minihpc.state.atomic.atomic`) that reads the
job, decides with a pure function of :mod:`minihpc.core`, and writes the job, the job sets, the
node allocations, the counters and a wake-up for the master together.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable, Iterable

from minihpc.core import job_control
from minihpc.core.errors import NotFound
from minihpc.core.job_control import Update
from minihpc.core.models import Job, JobState, can_transition
from minihpc.core.outcome import NodeResult, Outcome, after_report, starts_failure
from minihpc.state import keys, stats
from minihpc.state.atomic import atomic, free, held_by
from minihpc.state.connect import BLOCK_MAX, text, texts
from minihpc.state.events import add_incident, job_event, publish
from minihpc.state.jobs import write_job

log = logging.getLogger(__name__)

SERIES_TTL = 7 * 86400
"""Seconds an ended job's progress reports are kept (`minihpc report` needs them)."""

RENDEZVOUS_TTL = 3600
"""Seconds the master port a job's node rank 0 chose stays readable."""


class JobLifecycle:
    r: object

    def transition(
        self,
        job_id: int,
        new: JobState,
        reason: str,
        *,
        attempt: int | None = None,
        only_from: Iterable[JobState] | None = None,
        incident: dict | None = None,
        **fields,
    ) -> bool:
        """Move a job to ``new`` if that is legal now (and ``attempt`` is still current);
        ``incident`` (add_incident's arguments) is written in the same transaction, so the
        change is never seen without it, nor it without the change."""

        def body(pipe):
            raw = pipe.hgetall(keys.job(job_id))
            if not raw:
                raise NotFound(f"job {job_id} does not exist")
            job = Job.from_record(texts(raw))
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
            done = [text(n) for n in pipe.hkeys(results_key)] if new.terminal else []
            releasable = held_by(pipe, done, job.id)
            pipe.multi()
            _write_transition(pipe, job, new, reason, fields)
            free(pipe, releasable)
            if incident is not None:
                add_incident(pipe, **incident)
            return True

        return atomic(self.r, [keys.job(job_id)], body)

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

    def start(self, job_id: int, nodes: list[str], dispatch: Callable) -> Job | None:
        """Reserve every node of the job and dispatch its launch tasks, in one transaction.

        ``dispatch(pipe, job)`` queues the per-node launch tasks on the same pipeline, so a
        job is either RUNNING with all its nodes held and all launches queued, or untouched.
        """
        started = self.start_many([(job_id, nodes)], dispatch)
        return started[0] if started else None

    def start_many(self, starts: list[tuple[int, list[str]]], dispatch: Callable) -> list[Job]:
        """:meth:`start` for several jobs (on disjoint nodes) in one transaction, so a pass that
        starts hundreds of short jobs waits for one append-only-file sync, not one a job. A job
        no longer pending, held, or whose nodes were taken meanwhile is left as it is; the jobs
        started are returned."""
        watch = [key for job_id, nodes in starts for key in (keys.job(job_id), *map(keys.node_alloc, nodes))]

        def body(pipe):
            ready, taken = [], set()
            for job_id, nodes in starts:
                raw = pipe.hgetall(keys.job(job_id))
                job = Job.from_record(texts(raw)) if raw else None
                if job is None or job.state is not JobState.PENDING or job.held or taken.intersection(nodes):
                    continue
                if not any(pipe.exists(keys.node_alloc(n)) for n in nodes):
                    ready.append((job, nodes))
                    taken.update(nodes)  # two starts given one node: the first only, as one at a time
            pipe.multi()
            now = time.time()
            for job, nodes in ready:
                waited = now - job.submitted_at if job.attempts == 0 else None
                before = dataclasses.replace(job)
                job.begin_attempt(nodes, now)
                for n in nodes:
                    pipe.set(keys.node_alloc(n), job.id)
                # What changed only: a compact record (Job.to_record) stays so.
                write_job(pipe, job.id, job_control.changed_fields(before, job))
                pipe.hset(keys.job_starts(job.id), str(job.attempts), str(job.started_at))
                pipe.srem(keys.JOBS_PENDING, job.id)
                pipe.sadd(keys.JOBS_ACTIVE, job.id)
                publish(pipe, job_event(job.id, JobState.RUNNING.value))
                stats.count(pipe, "jobs_started")
                if waited is not None:
                    stats.observe(pipe, "job_wait_seconds", waited)
                dispatch(pipe, job)
            return [job for job, _ in ready]

        return atomic(self.r, watch, body)

    def resize(self, job_id: int, attempt: int, nodes: list[str], dispatch: Callable) -> Job | None:
        """An elastic job's gang launched again on ``nodes`` (core.elastic: fewer when a node
        left, more when it grows), in one transaction, if it is still RUNNING at ``attempt`` and
        every node it gains is free: the new nodes are taken, the launches queued, and the
        nodes it leaves that already reported freed (the others by their own report, as after
        a node failure). Its ranks on the nodes it keeps see their attempt is over and end; the
        new launch waits for that in each node's queue. The job as written, or None."""

        def body(pipe):
            raw = pipe.hgetall(keys.job(job_id))
            job = Job.from_record(texts(raw)) if raw else None
            if job is None or job.state is not JobState.RUNNING or job.attempts != attempt or not nodes:
                return None
            gained = [n for n in nodes if n not in job.nodes]
            results_key = keys.job_results(job.id, job.attempts)
            pipe.watch(results_key, *map(keys.node_alloc, [*gained, *job.nodes]))
            if any(pipe.exists(keys.node_alloc(n)) for n in gained):
                return None
            done = {text(n) for n in pipe.hkeys(results_key)}
            releasable = held_by(pipe, [n for n in job.nodes if n not in nodes and n in done], job.id)
            pipe.multi()
            before = dataclasses.replace(job)
            job.resize(nodes, time.time())
            for n in gained:
                pipe.set(keys.node_alloc(n), job.id)
            write_job(pipe, job.id, job_control.changed_fields(before, job))
            pipe.hset(keys.job_starts(job.id), str(job.attempts), str(job.resized_at))
            free(pipe, releasable)
            pipe.rpush(keys.EVENTS, f"resized {job.id}")
            publish(pipe, job_event(job.id, JobState.RUNNING.value))
            stats.count(pipe, "job_resizes")
            dispatch(pipe, job)
            return job

        return atomic(self.r, [keys.job(job_id)], body)

    def record_result(self, job_id: int, attempt: int, node: str, result: NodeResult) -> Outcome | None:
        """A node's ranks are gone: record their result, end the job if that decides it, and
        release the node (and any peers already done) once the job is over."""
        results_key = keys.job_results(job_id, attempt)

        def body(pipe):
            raw = pipe.hgetall(keys.job(job_id))
            if not raw:
                return None
            job = Job.from_record(texts(raw))
            pipe.watch(results_key, *[keys.node_alloc(n) for n in job.nodes])
            results = {text(k): NodeResult.from_dict(json.loads(v)) for k, v in pipe.hgetall(results_key).items()}
            results[node] = result
            current = attempt == job.attempts
            outcome = after_report(job, results, node) if current else None
            releasable = held_by(pipe, _releasable(job, results, node, current, outcome), job_id)
            pipe.multi()
            pipe.hset(results_key, node, json.dumps(result.to_dict()))
            if current and outcome is None and starts_failure(job, result):
                write_job(pipe, job_id, {"first_failure": node, "failing_since": str(time.time())})
                pipe.rpush(keys.EVENTS, f"failing {job_id}")
            if outcome is not None:
                _write_transition(
                    pipe, job, outcome.state,
                    "None" if outcome.state is JobState.COMPLETED else "NonZeroExitCode",
                    {"exit_code": outcome.exit_code, "signal": outcome.signal, "failed_node": outcome.failed_node},
                )
            free(pipe, releasable)
            return outcome

        return atomic(self.r, [keys.job(job_id)], body)

    def requeue(self, job_id: int, attempt: int, reason: str, incident: dict | None = None) -> bool:
        """NODE_FAIL -> PENDING for the same attempt that failed; it keeps its id, counts the
        requeue, and is served before new jobs of its priority. ``incident``: as transition's."""

        def body(pipe):
            raw = pipe.hgetall(keys.job(job_id))
            if not raw:
                return False
            job = Job.from_record(texts(raw))
            if job.attempts != attempt or not can_transition(job.state, JobState.PENDING):
                return False
            pipe.multi()
            write_job(pipe, job_id, {"state": JobState.PENDING.value, "reason": reason,
                                     "requeues": str(job.requeues + 1), "ended_at": ""})
            pipe.zrem(keys.JOBS_ENDED, job_id)
            pipe.sadd(keys.JOBS_PENDING, job_id)
            pipe.srem(keys.JOBS_NODE_FAILED, job_id)
            stats.count(pipe, "job_requeues")
            pipe.persist(keys.job_series(job_id))
            pipe.rpush(keys.EVENTS, f"requeued {job_id}")
            publish(pipe, job_event(job_id, JobState.PENDING.value))
            if incident is not None:
                add_incident(pipe, **incident)
            return True

        return atomic(self.r, [keys.job(job_id)], body)

    # -- a user's requests (scontrol), decided by minihpc.core.job_control ------------------

    def hold(self, job_id: int, user: str) -> Job:
        """A PENDING job held by ``user``: the scheduler skips it until released."""
        return self._control(job_id, "held", lambda job: job_control.hold(job, user))

    def release(self, job_id: int) -> Job:
        """A held PENDING job back to the scheduler."""
        return self._control(job_id, "released", job_control.release)

    def update_job(self, job_id: int, update: Update, admin: bool, capacity: int) -> Job:
        """TimeLimit / Priority / NumNodes changed together, if the job's state allows all."""
        return self._control(job_id, "updated", lambda job: job_control.apply_update(job, update, admin, capacity))

    def _control(self, job_id: int, what: str, decide: Callable[[Job], Job]) -> Job:
        """Read the job, let ``decide`` (pure) say how it is to be, write the fields that differ
        and wake the master -- one transaction; the job as written."""

        def body(pipe):
            job = _read(pipe, job_id)
            after = decide(job)
            fields = job_control.changed_fields(job, after)
            if fields:
                pipe.multi()
                write_job(pipe, job_id, fields)
                pipe.rpush(keys.EVENTS, f"{what} {job_id}")
                publish(pipe, job_event(job_id, after.state.value))
            return after

        after = atomic(self.r, [keys.job(job_id)], body)
        log.info("job %s: %s (%s)", job_id, what, after.reason)
        return after

    def requeue_job(self, job_id: int, hold: str | None = None) -> Job:
        """RUNNING or ended -> PENDING by a user's request (``scontrol requeue``; held by user
        ``hold`` if given: ``requeuehold``): the same id, a new attempt once the scheduler
        starts it. Nodes whose ranks already reported are freed now; the others' agents see the
        attempt is no longer running, tear it down and free theirs by their report (as after a
        node failure, but not counted as one)."""

        def body(pipe):
            job = _read(pipe, job_id)
            after = job_control.requeue(job, hold)
            results_key = keys.job_results(job.id, job.attempts)
            pipe.watch(results_key, *[keys.node_alloc(n) for n in job.nodes])
            releasable = held_by(pipe, [text(n) for n in pipe.hkeys(results_key)], job.id)
            pipe.multi()
            write_job(pipe, job_id, job_control.changed_fields(job, after))
            pipe.srem(keys.JOBS_ACTIVE, job_id)
            pipe.zrem(keys.JOBS_ENDED, job_id)
            pipe.srem(keys.JOBS_NODE_FAILED, job_id)  # the master's own requeue decision is moot
            pipe.sadd(keys.JOBS_PENDING, job_id)
            pipe.persist(keys.job_series(job_id))
            free(pipe, releasable)
            pipe.rpush(keys.EVENTS, f"requeued {job_id}")
            publish(pipe, job_event(job_id, JobState.PENDING.value))
            return job, after

        before, after = atomic(self.r, [keys.job(job_id)], body)
        log.info("job %s: requeued from %s after attempt %s", job_id, before.state.value, before.attempts)
        return after

    # -- rendezvous: node rank 0's master port, handed to each peer ----------------------

    def publish_port(self, job_id: int, attempt: int, port: int, peers: int) -> None:
        key = keys.job_rendezvous(job_id, attempt)
        with self.r.pipeline() as pipe:
            pipe.rpush(key, *([port] * peers))
            pipe.expire(key, RENDEZVOUS_TTL)
            pipe.execute()

    def take_port(self, job_id: int, attempt: int, timeout: float) -> int | None:
        """One peer's copy of the master port, or None if none came within ``timeout``
        (BLOCK_MAX at most, within the connection's socket timeout)."""
        got = self.r.blpop([keys.job_rendezvous(job_id, attempt)], timeout=min(BLOCK_MAX, timeout))
        return int(got[1]) if got else None


def _read(pipe, job_id: int) -> Job:
    raw = pipe.hgetall(keys.job(job_id))
    if not raw:
        raise NotFound(f"job {job_id} does not exist")
    return Job.from_record(texts(raw))


def _releasable(job: Job, results: dict, node: str, current: bool, outcome: Outcome | None) -> list[str]:
    """Nodes a result may free: every reported node once the current attempt is over; for a
    stale attempt, the reporting node unless the current attempt holds it again."""
    if current:
        # Not RUNNING any more (ended, or already requeued): this attempt is over.
        ended = outcome is not None or job.state is not JobState.RUNNING
        return list(results) if ended else []
    reused = job.state is JobState.RUNNING and node in job.nodes
    return [] if reused else [node]


def _write_transition(pipe, job: Job, new: JobState, reason: str, fields: dict) -> None:
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
    write_job(pipe, job.id, update)
    pipe.rpush(keys.EVENTS, f"{new.value} {job.id}")
    publish(pipe, job_event(job.id, new.value))
