"""Jobs as users see them: ids as typed, the queue in Slurm's order, waiting for the end,
cancelling -- one rule for every face (CLI, REST API)."""

from __future__ import annotations

import pwd
import time
from dataclasses import dataclass, field

from minihpc.client import arrays
from minihpc.client.access import Principal, can_change, may_change
from minihpc.core import dependency as dependencies
from minihpc.core.errors import Conflict, Forbidden, MinihpcError, UsageError
from minihpc.core.models import Job, JobState
from minihpc.core.partitions import Partitions
from minihpc.core.requirements import published_cpus
from minihpc.core.scheduler import queue_order
from minihpc.core.slurm_filters import JobFilter, in_window
from minihpc.core.slurm_formats import expected_starts
from minihpc.machine import files
from minihpc.state.pending import PendingCache
from minihpc.state.store import Store

QUEUE_ENDED = 50
"""Recently ended jobs the queue shows with ``--all``."""


def parse_job_id(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise UsageError(f"invalid job id {text!r}: expected a number") from None
    if value < 1:
        raise UsageError(f"invalid job id {text!r}: expected a positive number")
    return value


def queue(store: Store, include_ended: bool = False, pending: PendingCache | None = None) -> list[Job]:
    """Running jobs, then pending ones in the order they will start, then (optionally) the
    recently ended: what squeue shows. ``pending``: a long-lived reader's cache of pending
    records (the API's), so a deep queue is read whole only once."""
    running = sorted(store.running_jobs(), key=lambda j: j.id)
    waiting = store.pending_jobs() if pending is None else pending.read(store)
    pending = queue_order(waiting, running)
    ended = sorted(store.ended_jobs(limit=QUEUE_ENDED), key=lambda j: j.id) if include_ended else []
    return running + pending + ended


def elapsed(job: Job, now: float) -> float:
    """Seconds the job has run (its current or last attempt)."""
    if job.started_at is None:
        return 0.0
    return (job.ended_at or now) - job.started_at


def ended_for_good(store: Store, job: Job) -> bool:
    """``job``, as read a moment ago, has ended and is not about to be requeued (see
    Job.ended_for_good): asked again of the store, with the requeue decision in the same read,
    and still the same attempt in the same state."""
    if not job.state.terminal:
        return False
    now, over = store.job_settled(job.id)
    return over and (now.attempts, now.state) == (job.attempts, job.state)


def wait(store: Store, job_id: int, timeout: float | None = None, poll: float = 0.1) -> tuple[Job, bool]:
    """Block until the job has ended for good or ``timeout`` passed: (the job as last read,
    whether it ended)."""
    deadline = None if timeout is None else time.time() + timeout
    while True:
        job, over = store.job_settled(job_id)
        if over:
            return job, True
        if deadline is not None and time.time() >= deadline:
            return job, False
        time.sleep(poll)


def wait_all(store: Store, job_ids: list[int], timeout: float | None = None) -> tuple[Job, bool]:
    """:func:`wait` for every job of ``job_ids`` (a job array's tasks) within one ``timeout``:
    (the first that did not complete, else the last; whether they all ended)."""
    deadline = None if timeout is None else time.time() + timeout
    ended_jobs = []
    for job_id in job_ids:
        job, ended = wait(store, job_id, None if deadline is None else max(0.0, deadline - time.time()))
        if not ended:
            return job, False
        ended_jobs.append(job)
    return next((j for j in ended_jobs if j.state is not JobState.COMPLETED), ended_jobs[-1]), True


def cancel(store: Store, job_id: int, who: Principal) -> None:
    """Cancel a pending or running job of ``who``'s (any job for an admin); Conflict if it has
    already ended."""
    may_change(who, store.get_job(job_id))
    if not store.transition(job_id, JobState.CANCELLED, f"cancelled by {who.user}",
                            only_from=[JobState.PENDING, JobState.RUNNING]):
        raise Conflict(f"job {job_id} already ended ({store.get_job(job_id).state.value})")


def listing(store: Store, states: set[JobState] | None = None, user: str | None = None,
            name: str | None = None, pending: PendingCache | None = None) -> list[Job]:
    """Jobs as the queue orders them (running, pending in start order), then ended ones newest
    first, filtered by state, owner and name (a substring)."""
    jobs = queue(store, pending=pending)
    if states is None or any(s.terminal for s in states):
        jobs += store.ended_jobs(limit=QUEUE_LISTED)
    return [j for j in jobs
            if (states is None or j.state in states) and (not user or j.user == user)
            and (not name or name in j.name)]


QUEUE_LISTED = 1000
"""Ended jobs a listing looks through, newest first."""


def parse_states(text: str | None) -> set[JobState] | None:
    """``RUNNING,PD,...`` (names or Slurm's codes) as states; None for all."""
    if not text:
        return None
    by_code = {s.code: s for s in JobState} | {s.value: s for s in JobState}
    states = set()
    for word in text.upper().replace(" ", "").split(","):
        if word not in by_code:
            raise UsageError(f"invalid job state {word!r}: expected one of {', '.join(s.value for s in JobState)} "
                             "or their codes")
        states.add(by_code[word])
    return states


def delete(store: Store, job_id: int, who: Principal) -> None:
    """Forget an ended job: its record, telemetry, spooled script and logs (checkpoints stay:
    they are the user's results)."""
    job = store.get_job(job_id)
    check_deletable(store, job, who, waiting_on(store))
    _forget(store, job)


def purge(store: Store, older_than: float, who: Principal, now: float | None = None) -> list[int]:
    """Delete the ended jobs (``who``'s own, or everyone's for an admin) that ended more than
    ``older_than`` seconds ago; the ids deleted. Jobs :func:`delete` would refuse are left."""
    if older_than < 0:
        raise UsageError(f"older_than must be 0 or more seconds, got {older_than:g}")
    cutoff = (now or time.time()) - older_than
    waiting = waiting_on(store)
    deleted = []
    for job in store.get_jobs(store.ended_before(cutoff)):
        try:
            check_deletable(store, job, who, waiting)
        except (Forbidden, Conflict):
            continue
        _forget(store, job)
        deleted.append(job.id)
    return deleted


def waiting_on(store: Store) -> dict[int, list[int]]:
    """For each job a pending job depends on (each task of an array it names), the ids of the
    pending jobs waiting for it."""
    waiting: dict[int, list[int]] = {}
    pending = store.pending_jobs()
    covers = store.expand_refs({r for job in pending for r in dependencies.refs(job.dependency)})
    for job in pending:
        for job_id in dict.fromkeys(i for r in dependencies.refs(job.dependency) for i in covers[r]):
            waiting.setdefault(job_id, []).append(job.id)
    return {job_id: sorted(ids) for job_id, ids in waiting.items()}


def check_deletable(store: Store, job: Job, who: Principal, waiting: dict[int, list[int]]) -> None:
    """Forbidden unless ``who`` may change ``job``; Conflict unless it has ended for good and no
    pending job waits for it."""
    may_change(who, job)
    if not ended_for_good(store, job):
        raise Conflict(f"job {job.id} is {job.state.value}; only ended jobs can be deleted (cancel it first)")
    if job.id in waiting:
        raise Conflict(f"job {job.id} is a dependency of pending job {waiting[job.id][0]}; delete it once that has started")


def _forget(store: Store, job: Job) -> None:
    store.delete_job(job)
    cluster = store.cluster_info()
    if files.remove_job_dirs((cluster.get("spool_dir"), cluster.get("log_dir")), job.id):
        store.leave_files(job.id)  # another uid's (a folder a node lent the job): the master's


# -- Slurm's filters: squeue -u/-t/-j, sacct -j/-s/-S/-E, scancel -n/-t/-u ------------------

HISTORY_SCANNED = 10000
"""Ended jobs, newest first, that a filtered ``history`` looks through (the master keeps
10000 by default, MINIHPC_KEEP_ENDED_JOBS)."""


def user_names(words: list[str]) -> frozenset[str]:
    """squeue's user list: names, or numeric uids of this machine's users (a uid it does not
    know stays as typed)."""
    names = set()
    for word in words:
        if word.isdigit():
            try:
                word = pwd.getpwuid(int(word)).pw_name
            except KeyError:
                pass
        names.add(word)
    return frozenset(names)


def queue_jobs(store: Store, flt: JobFilter) -> list[Job]:
    """What squeue shows for ``flt``: running jobs, pending ones in start order, then -- when
    its states allow ended ones -- the QUEUE_ENDED most recently ended (or, for job ids, those
    jobs however long ago they ended)."""
    flt = arrays.resolve_filter(store, flt)
    jobs = queue(store, include_ended=flt.wants_ended() and flt.ids is None)
    if flt.ids is not None and flt.wants_ended():
        seen = {j.id for j in jobs}
        jobs += [j for j in store.get_jobs(sorted(flt.ids - seen)) if j.state.terminal]
    return [j for j in jobs if flt.matches(j)]


def pending_starts(store: Store, now: float | None = None) -> dict[int, float | None]:
    """Each pending job's expected start by the master's backfill plan (None: none promised)."""
    pending = store.pending_jobs()
    deps = store.dependency_states({d for job in pending for d in dependencies.refs(job.dependency)})
    cluster = store.cluster_info()
    return expected_starts(pending, store.node_statuses(), store.running_jobs(), deps, now or time.time(),
                           Partitions.from_record(cluster), published_cpus(cluster))


def history(store: Store, flt: JobFilter, start: float | None = None, end: float | None = None,
            limit: int = 100) -> list[Job]:
    """What sacct shows for ``flt`` and the window ``start``..``end`` (see
    slurm_filters.in_window), at most ``limit``: jobs named by id in any state; otherwise
    ended jobs newest first, after the running and pending ones when the states name them."""
    flt = arrays.resolve_filter(store, flt)
    if flt.ids is not None:
        jobs = store.get_jobs(sorted(flt.ids))
    else:
        active = flt.states is not None and any(not s.terminal for s in flt.states)
        jobs = queue(store) if active else []
        if flt.wants_ended():
            narrowed = flt.users is not None or flt.states is not None or start is not None or end is not None
            jobs += store.ended_jobs(limit=max(limit, HISTORY_SCANNED) if narrowed else limit)
    return [j for j in jobs if flt.matches(j) and in_window(j, start, end, flt.states)][:limit]


@dataclass
class CancelReport:
    cancelled: list[int] = field(default_factory=list)
    errors: list[tuple[int, MinihpcError]] = field(default_factory=list)
    not_yours: list[int] = field(default_factory=list)
    """Jobs the filters matched that ``who`` may not cancel (left alone, not an error)."""


def require_selection(ids_given: bool, flt: JobFilter) -> None:
    """scancel refuses to run with neither job ids nor a filter."""
    if not ids_given and flt.empty:
        raise UsageError("no job identification provided: give job ids, or --name, --state or --user")


def cancel_matching(store: Store, ids: list[int], flt: JobFilter, who: Principal, act=None) -> CancelReport:
    """scancel: with ids, each id that is pending or running and matches the filters (an id
    that does not exist or has ended is an error, one the filters pass over is left alone);
    without, every pending or running job the filters match that ``who`` may cancel. ``act``
    (store, job_id, who) does instead of :func:`cancel` (``scancel --signal``: client.signals)."""
    require_selection(bool(ids), flt)
    report = CancelReport()
    if ids:
        targets = []
        for job_id in ids:
            try:
                job = store.get_job(job_id)
            except MinihpcError as exc:
                report.errors.append((job_id, exc))
                continue
            if job.state.terminal:
                report.errors.append((job_id, Conflict(f"job {job_id} already ended ({job.state.value})")))
            elif flt.matches(job):
                targets.append(job_id)
    else:
        matched = [j for j in queue(store) if flt.matches(j)]
        report.not_yours = [j.id for j in matched if not can_change(who, j)]
        targets = [j.id for j in matched if j.id not in report.not_yours]
    for job_id in targets:
        try:
            (act or cancel)(store, job_id, who)
        except MinihpcError as exc:
            report.errors.append((job_id, exc))
        else:
            report.cancelled.append(job_id)
    return report
