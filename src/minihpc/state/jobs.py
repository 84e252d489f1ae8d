"""Job records: the cluster record, ids, reading jobs and their sets, and keeping the sets
true to each job's state. How a job's state *changes* is in :mod:`minihpc.state.lifecycle`."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable, Mapping

from minihpc.core.arrays import array_state
from minihpc.core.errors import ClusterUnavailable, NotFound
from minihpc.core.models import Job, JobState
from minihpc.core.outcome import NodeResult
from minihpc.state import environments, keys
from minihpc.state.atomic import atomic
from minihpc.state.bulk import bulk_reading
from minihpc.state.connect import text, texts
from minihpc.state.events import job_event, publish
from minihpc.state.pending import note_change


def write_job(pipe, job_id: int, fields: dict) -> None:
    """Every write to a job record goes through here: ``fields`` set, and its revision bumped
    in the same transaction (keys.JOB_REVISION), and the job named in the changes stream
    (state.pending) after the write."""
    pipe.hset(keys.job(job_id), mapping=fields)
    pipe.hincrby(keys.job(job_id), keys.JOB_REVISION, 1)
    pipe.incr(keys.JOBS_REVISION)
    note_change(pipe, job_id)


def to_refetch(ids: list[int], revisions: list, cached: dict[int, tuple[int, Job]]) -> list[int]:
    """Which pending jobs' records must be read again: those not cached, or changed since
    (another revision, or none: a record written before revisions existed is never trusted)."""
    return [i for i, rev in zip(ids, revisions)
            if rev is None or i not in cached or cached[i][0] != int(rev)]


class JobRecords:
    r: object

    # -- the cluster record -------------------------------------------------------------

    def cluster_info(self) -> dict[str, str]:
        info = texts(self.r.hgetall(keys.CLUSTER))
        if not info:
            raise ClusterUnavailable(
                "Redis is reachable but holds no minihpc cluster; start one with "
                "'minihpc up --local' or point MINIHPC_REDIS_URL at a running cluster"
            )
        return info

    def set_cluster_info(self, info: dict[str, str]) -> None:
        self.r.hset(keys.CLUSTER, mapping=info)

    # -- reading jobs -------------------------------------------------------------------

    def next_job_id(self) -> int:
        return int(self.r.incr(keys.JOB_SEQ))

    def reserve_job_ids(self, count: int) -> int:
        """Reserve ``count`` ids in a row in one step (a job array's tasks); the first of them."""
        return int(self.r.incrby(keys.JOB_SEQ, count)) - count + 1

    def add_job(self, job: Job) -> None:
        self.add_jobs([job])

    def add_jobs(self, jobs: list[Job]) -> None:
        """Record new PENDING jobs in one transaction (an array's tasks all, or none), each
        array task in its array's index too."""
        with self.r.pipeline() as pipe:
            environments.keep(pipe, jobs)
            for job in jobs:
                write_job(pipe, job.id, job.to_record(compact=True))
                pipe.sadd(keys.JOBS_PENDING, job.id)
                if job.array_job_id is not None:
                    pipe.zadd(keys.array_tasks(job.array_job_id), {job.id: job.array_task_id})
                publish(pipe, job_event(job.id, job.state.value))
            for user in {job.user for job in jobs}:
                pipe.sadd(keys.user_jobs(user), *(job.id for job in jobs if job.user == user))
            pipe.rpush(keys.EVENTS, f"submit {jobs[0].id}" + (f" (+{len(jobs) - 1})" if len(jobs) > 1 else ""))
            pipe.execute()

    def array_tasks(self, array_job_id: int) -> dict[int, int]:
        """{array index: job id} of array ``array_job_id``'s tasks that have a record, in index
        order; empty when it is no array (or all its tasks were forgotten)."""
        pairs = self.r.zrange(keys.array_tasks(array_job_id), 0, -1, withscores=True)
        return {int(score): int(job_id) for job_id, score in pairs}

    def expand_refs(self, refs: Iterable[int | str]) -> dict[int | str, list[int]]:
        """The job ids each ref (core.dependency.refs) stands for: an array's id, every task of
        it; any other id, that job; ``"A_i"``, array A's task i (none if it has no such task)."""
        refs = list(dict.fromkeys(refs))
        with self.r.pipeline(transaction=False) as pipe:
            for ref in refs:
                pipe.zrange(keys.array_tasks(str(ref).partition("_")[0]), 0, -1, withscores=True)
            answers = pipe.execute()
        out: dict[int | str, list[int]] = {}
        for ref, pairs in zip(refs, answers):
            tasks = {int(score): int(job_id) for job_id, score in pairs}
            if isinstance(ref, str):
                index = int(ref.partition("_")[2])
                out[ref] = [tasks[index]] if index in tasks else []
            else:
                out[ref] = list(tasks.values()) or [ref]
        return out

    def dependency_states(self, refs: Iterable[int | str],
                          known: Mapping[int, JobState] | None = None) -> dict[int | str, JobState | None]:
        """What core.dependency.status needs: the state of each ref; an array's, the state of
        the whole array (core.arrays.array_state); None where nothing has a record. ``known``:
        states the caller read in this pass (the master's pending and running jobs), not read
        again -- a dependency on a 1,000-task array that waits is 1,000 reads less a pass."""
        expanded = self.expand_refs(refs)
        wanted = {i for ids in expanded.values() for i in ids}
        known = known or {}
        states = self.job_states([i for i in wanted if i not in known])
        states.update((i, known[i]) for i in wanted if i in known)
        return {ref: array_state([states[i] for i in ids]) for ref, ids in expanded.items()}

    def get_job(self, job_id: int) -> Job:
        raw = self.r.hgetall(keys.job(job_id))
        if not raw:
            raise NotFound(f"job {job_id} does not exist")
        return self._parsed(raw)

    def job_settled(self, job_id: int) -> tuple[Job, bool]:
        """The job and whether it has ended for good, read together in one transaction. Read
        apart, a NODE_FAIL record and then the requeue decision could straddle the master's
        requeue, which clears both at once: the job looked ended while it ran again."""
        with self.r.pipeline(transaction=True) as pipe:
            pipe.hgetall(keys.job(job_id))
            pipe.sismember(keys.JOBS_NODE_FAILED, job_id)
            raw, undecided = pipe.execute()
        if not raw:
            raise NotFound(f"job {job_id} does not exist")
        job = self._parsed(raw)
        return job, job.ended_for_good(job.state is JobState.NODE_FAIL and bool(undecided))

    def _parsed(self, raw: dict) -> Job:
        """One job of its record as HGETALL answers it, its environment read in."""
        return self.with_environments([Job.from_record(texts(raw))])[0]

    def get_jobs(self, ids: Iterable[int]) -> list[Job]:
        with bulk_reading():
            return self.with_environments([Job.from_record(record) for _, record in self._records(ids)])

    def _records(self, ids: Iterable[int]) -> list[tuple[int, dict[str, str]]]:
        """The decoded records of ``ids``, in that order, in one round trip; a job that does
        not exist is left out."""
        ids = list(ids)
        many = getattr(self.r, "hgetall_texts", None)  # state.wire's: decoded in C, packed at once
        if many is not None:
            return [(job_id, raw) for job_id, raw in zip(ids, many([keys.job(i) for i in ids])) if raw]
        with self.r.pipeline(transaction=False) as pipe:
            for job_id in ids:
                pipe.hgetall(keys.job(job_id))
            raws = pipe.execute()
        return [(job_id, texts(raw)) for job_id, raw in zip(ids, raws) if raw]

    def job_states(self, ids: Iterable[int]) -> dict[int, JobState | None]:
        ids = list(ids)
        if not ids:
            return {}
        with self.r.pipeline(transaction=False) as pipe:
            for job_id in ids:
                pipe.hget(keys.job(job_id), "state")
            values = pipe.execute()
        return {i: JobState(text(v)) if v else None for i, v in zip(ids, values)}

    def ended_at(self, ids: Iterable[int]) -> dict[int, float]:
        """When each of these jobs ended, for those that did and are remembered."""
        ids = list(ids)
        with self.r.pipeline(transaction=False) as pipe:
            for job_id in ids:
                pipe.zscore(keys.JOBS_ENDED, job_id)
            values = pipe.execute()
        return {i: float(v) for i, v in zip(ids, values) if v is not None}

    def attempt_is_current(self, job_id: int, attempt: int) -> bool:
        """Whether the job is RUNNING its attempt ``attempt`` (a node's launch task checks)."""
        state, attempts = self.r.hmget(keys.job(job_id), "state", "attempts")
        return text(state) == JobState.RUNNING.value and int(attempts) == attempt

    def run_limit(self, job_id: int) -> tuple[float | None, float | None]:
        """(started_at, time_limit) of the job as the record says now (``scontrol update
        TimeLimit=`` changes it while the job runs); None for a field unset or unreadable."""
        return tuple(_opt_float(v) for v in self.r.hmget(keys.job(job_id), "started_at", "time_limit"))

    def attempt_starts(self, job_id: int) -> dict[int, float]:
        """{attempt: when it began} for each attempt the job has started; a field that does not
        parse is skipped."""
        out: dict[int, float] = {}
        for field, value in self.r.hgetall(keys.job_starts(job_id)).items():
            try:
                attempt, at = int(text(field)), float(text(value))
            except ValueError:
                continue
            if math.isfinite(at):
                out[attempt] = at
        return out

    def pending_jobs(self, cache: dict[int, tuple[int, Job]] | None = None) -> list[Job]:
        """Every pending job. With ``cache`` ({id: (revision, job)}, kept by the caller from
        pass to pass), only records that changed are read whole: a deep queue costs each pass
        one small read per job, not its whole record."""
        ids = [int(i) for i in self.r.smembers(keys.JOBS_PENDING)]
        if cache is None:
            return self.get_jobs(ids)
        with self.r.pipeline(transaction=False) as pipe:
            for job_id in ids:
                pipe.hget(keys.job(job_id), keys.JOB_REVISION)
            revisions = pipe.execute()
        fresh = []
        with bulk_reading():
            for job_id, record in self._records(to_refetch(ids, revisions, cache)):  # gone meanwhile: left out
                cache[job_id] = (int(record.get(keys.JOB_REVISION) or -1), Job.from_record(record))
                fresh.append(cache[job_id][1])
        self.with_environments(fresh)
        for job_id in set(cache) - set(ids):
            del cache[job_id]
        return [cache[i][1] for i in ids if i in cache]

    def jobs_revision(self) -> int:
        """The count of job-record writes so far (keys.JOBS_REVISION)."""
        return int(self.r.get(keys.JOBS_REVISION) or 0)

    def running_jobs(self) -> list[Job]:
        return self.get_jobs(int(i) for i in self.r.smembers(keys.JOBS_ACTIVE))

    def ended_jobs(self, limit: int = 100) -> list[Job]:
        ids = self.r.zrevrange(keys.JOBS_ENDED, 0, limit - 1)
        return self.get_jobs(int(i) for i in ids)

    def job_results(self, job_id: int, attempt: int) -> dict[str, NodeResult]:
        raw = self.r.hgetall(keys.job_results(job_id, attempt))
        return {text(k): NodeResult.from_dict(json.loads(v)) for k, v in raw.items()}

    # -- NODE_FAIL jobs awaiting the master's requeue decision ---------------------------

    def node_failed_jobs(self) -> list[Job]:
        """Jobs that became NODE_FAIL since the master last looked (requeue candidates)."""
        return self.get_jobs(sorted(int(i) for i in self.r.smembers(keys.JOBS_NODE_FAILED)))

    def settle_node_failure(self, job_id: int) -> None:
        """The master has decided about this NODE_FAIL job (it stays failed)."""
        self.r.srem(keys.JOBS_NODE_FAILED, job_id)

    def set_reasons(self, reasons: dict[int, str]) -> None:
        """Record why pending jobs wait: only for jobs still pending and not held. One
        transaction, so a hold that lands between the scheduler's read and this write keeps
        its reason (JobHeldUser): the write is retried and then passes that job over."""
        if not reasons:
            return

        def body(pipe):
            current = [pipe.hmget(keys.job(job_id), "state", "held_by") for job_id in reasons]
            pipe.multi()
            for (job_id, reason), (state, held_by) in zip(reasons.items(), current):
                if text(state) == JobState.PENDING.value and not text(held_by):
                    write_job(pipe, job_id, {"reason": reason})

        atomic(self.r, [keys.job(job_id) for job_id in reasons], body)

    # -- housekeeping -------------------------------------------------------------------

    def reconcile(self) -> dict[int, str]:
        """Make every job's set membership agree with its state (after a crash or a restore):
        PENDING in the pending set only, RUNNING in the active set only, ended states in the
        ended set only. Returns {job id: what was fixed}."""
        last = int(self.r.get(keys.JOB_SEQ) or 0)
        fixed: dict[int, str] = {}
        members = {
            "pending": {int(i) for i in self.r.smembers(keys.JOBS_PENDING)},
            "active": {int(i) for i in self.r.smembers(keys.JOBS_ACTIVE)},
            "ended": {int(i) for i in self.r.zrange(keys.JOBS_ENDED, 0, -1)},
        }
        states = self.job_states(range(1, last + 1))
        with self.r.pipeline() as pipe:
            for job_id, state in states.items():
                want = _set_for(state)
                have = {name for name, ids in members.items() if job_id in ids}
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
            pipe.incr(keys.JOBS_REVISION)
            pipe.execute()
        return fixed

    def delete_job(self, job: Job) -> None:
        """Forget an ended job's record, results and telemetry (its files are the caller's)."""
        with self.r.pipeline() as pipe:
            pipe.delete(*_record_keys(job.id), *[keys.job_results(job.id, a) for a in range(1, job.attempts + 1)])
            environments.let_go(pipe, job.environment_id)
            pipe.zrem(keys.JOBS_ENDED, job.id)
            if job.array_job_id is not None:
                pipe.zrem(keys.array_tasks(job.array_job_id), job.id)
            pipe.incr(keys.JOBS_REVISION)  # a dependency on it is judged anew
            note_change(pipe, job.id)
            pipe.execute()
        self.drop_unused(job.environment_id)

    def leave_files(self, job_id: int) -> None:
        """Job ``job_id`` is forgotten but some of its folders are not removed: the master's
        (master.retention.LEFT_INTERVAL)."""
        self.r.sadd(keys.FILES_LEFT, job_id)

    def take_left_files(self, count: int) -> list[int]:
        """Up to ``count`` ids :meth:`leave_files` named, taken out of the set."""
        return [int(i) for i in self.r.spop(keys.FILES_LEFT, count) or ()]

    def ended_before(self, when: float) -> list[int]:
        """Ids of the jobs that ended before ``when``, oldest first."""
        return [int(i) for i in self.r.zrangebyscore(keys.JOBS_ENDED, "-inf", f"({when}")]

    def oldest_ended(self, count: int) -> tuple[list[tuple[int, float]], int]:
        """The ``count`` jobs that ended first, as (id, ended_at) oldest first, and how many
        ended jobs there are in all."""
        if count <= 0:  # ZRANGE 0 -1 would read them all
            return [], int(self.r.zcard(keys.JOBS_ENDED))
        with self.r.pipeline(transaction=False) as pipe:
            pipe.zrange(keys.JOBS_ENDED, 0, count - 1, withscores=True)
            pipe.zcard(keys.JOBS_ENDED)
            oldest, total = pipe.execute()
        return [(int(i), float(at)) for i, at in oldest], int(total)

    def forget_ended(self, job_id: int) -> bool:
        """Forget an ended job's record, results and telemetry as :meth:`delete_job` does, in one
        step with reading its state: False, leaving it, if it is PENDING or RUNNING again (a
        requeue came first). A job whose record is gone is taken out of the ended set. Its files
        are the caller's."""

        def body(pipe):
            state, attempts, array, environment = (text(v) for v in pipe.hmget(
                keys.job(job_id), "state", "attempts", "array_job_id", "environment_id"))
            if state in (JobState.PENDING.value, JobState.RUNNING.value):
                return False
            results = range(1, int(attempts) + 1) if (attempts or "").isdigit() else ()
            pipe.multi()
            pipe.delete(*_record_keys(job_id), *[keys.job_results(job_id, a) for a in results])
            environments.let_go(pipe, environment or "")
            pipe.zrem(keys.JOBS_ENDED, job_id)
            if array:
                pipe.zrem(keys.array_tasks(array), job_id)
            pipe.incr(keys.JOBS_REVISION)  # a dependency on it is judged anew
            note_change(pipe, job_id)
            return environment or ""

        gone = atomic(self.r, [keys.job(job_id)], body)
        if gone is False:
            return False
        self.drop_unused(gone)
        return True


def _record_keys(job_id: int) -> tuple[str, ...]:
    """A job's record and telemetry keys: what forgetting an ended job deletes."""
    return (keys.job(job_id), keys.job_starts(job_id), keys.job_progress(job_id), keys.job_steps(job_id),
            keys.job_series(job_id), keys.job_input(job_id))


def _set_for(state: JobState | None) -> str | None:
    """Which of the job sets a job in ``state`` belongs to (None: no record, no set)."""
    if state is None:
        return None
    return "pending" if state is JobState.PENDING else "active" if state is JobState.RUNNING else "ended"


def _opt_float(value) -> float | None:
    try:
        return float(text(value)) if value else None
    except ValueError:
        return None
