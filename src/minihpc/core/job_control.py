"""What ``minihpc scontrol`` may change in a job, and when: pure decisions over a job record.

They follow scontrol(1) where minihpc has the concept:

- ``hold`` / ``release``: "Prevent a pending job from being started" / "Release a previously
  held job to begin execution": PENDING jobs only; a held job waits with Reason=JobHeldUser.
- ``requeue``: "Requeue a running, suspended or finished Slurm batch job into pending state":
  RUNNING or ended (COMPLETED, FAILED, CANCELLED, TIMEOUT, NODE_FAIL) jobs; it runs again as a
  new attempt. ``requeuehold`` also holds it. A job submitted with ``--no-requeue`` ("should
  never be requeued under any circumstances", man sbatch) is refused, as slurmctld refuses it.
- ``update``: TimeLimit while PENDING or RUNNING ("Only the Slurm administrator or root can
  increase job's TimeLimit" -- of a running job: slurmctld lets a pending job's limit grow up
  to its partition's, and minihpc has no partition limit); Priority (minihpc's names, not
  Slurm's numbers) and NumNodes only while PENDING.

Each decision returns the job as it is to be written (the caller writes the fields that
changed, in one transaction) or raises Conflict / Forbidden / UsageError with one line.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from minihpc.core.errors import Conflict, Forbidden, UsageError
from minihpc.core.models import Job, JobState, Priority
from minihpc.core.parsing import format_duration, parse_node_range, parse_time_limit

HELD_REASON = "JobHeldUser"
"""Slurm's reason for a job its user holds."""

REQUEUABLE = frozenset(s for s in JobState if s is not JobState.PENDING)
"""States ``scontrol requeue`` takes a job from: running or ended."""

UPDATE_KEYS = ("JobId", "TimeLimit", "Priority", "NumNodes")
"""The keys ``scontrol update`` takes (case-insensitive, as scontrol takes them)."""


def hold(job: Job, user: str) -> Job:
    """The job held by ``user``; Conflict unless it is PENDING (holding a held job is a no-op)."""
    _must_be_pending(job, "held")
    if job.held:
        return job
    return dataclasses.replace(job, held_by=user, reason=HELD_REASON)


def release(job: Job) -> Job:
    """The job released; Conflict unless it is PENDING (releasing one not held is a no-op). Its
    reason is cleared: the scheduler writes the next one."""
    _must_be_pending(job, "released")
    if not job.held:
        return job
    return dataclasses.replace(job, held_by=None, reason="None")


def requeue(job: Job, held_by: str | None = None) -> Job:
    """The job back in the queue (held by ``held_by`` if given); Conflict if it is PENDING or
    was submitted with ``--no-requeue``.
    It keeps its id, attempts and last exit code; node-failure requeues are not counted."""
    if job.state not in REQUEUABLE:
        raise Conflict(f"job {job.id} is already PENDING; only a running or ended job can be requeued")
    if not job.requeue:
        raise Conflict(f"job {job.id} was submitted with --no-requeue; it cannot be requeued")
    return dataclasses.replace(
        job, state=JobState.PENDING, reason=HELD_REASON if held_by else "None", held_by=held_by,
        ended_at=None, first_failure=None, failing_since=None,
    )


def _must_be_pending(job: Job, what: str) -> None:
    if job.state is not JobState.PENDING:
        raise Conflict(f"job {job.id} is {job.state.value}; only a pending job can be {what}")


@dataclass(frozen=True)
class TimeChange:
    """TimeLimit=, TimeLimit+= or TimeLimit-= (``op`` "=", "+", "-"); seconds None: UNLIMITED."""

    op: str
    seconds: float | None


@dataclass(frozen=True)
class Update:
    """What ``scontrol update JobId=ID ...`` asks for; None: not asked."""

    job_id: int
    time_limit: TimeChange | None = None
    priority: Priority | None = None
    nodes: tuple[int, int] | None = None  # NumNodes=N or MIN-MAX, as (least, most)


def parse_update(words: list[str]) -> Update:
    """``JobId=5 TimeLimit=10 Priority=high NumNodes=2`` (keys in any case, any order) as an
    Update; UsageError naming the first word that is not one."""
    found: dict[str, object] = {}
    for word in words:
        key, eq, value = word.partition("=")
        op = key[-1] if key[-1:] in ("+", "-") else "="
        name = _update_key(key[:-1] if op != "=" else key, word)
        if not eq or (op != "=" and name != "TimeLimit"):
            raise UsageError(f"invalid update {word!r}: expected Key=Value with a key of {', '.join(UPDATE_KEYS)}")
        if name in found:
            raise UsageError(f"{name} given twice in the update")
        found[name] = _update_value(name, op, value.strip(), word)
    if "JobId" not in found:
        raise UsageError("no JobId=ID in the update: scontrol update JobId=ID Key=Value ...")
    if len(found) == 1:
        raise UsageError("nothing to update: give TimeLimit=, Priority= or NumNodes=")
    return Update(found.pop("JobId"), found.get("TimeLimit"), found.get("Priority"), found.get("NumNodes"))


def _update_key(key: str, word: str) -> str:
    by_lower = {k.lower(): k for k in UPDATE_KEYS}
    if key.lower() not in by_lower:
        raise UsageError(f"unknown update key {key!r} (in {word!r}): minihpc updates {', '.join(UPDATE_KEYS)}")
    return by_lower[key.lower()]


def _update_value(name: str, op: str, value: str, word: str):
    if name == "NumNodes":
        try:
            return parse_node_range(value)
        except UsageError:
            raise UsageError(f"invalid {word!r}: NumNodes must be a positive number or a range MIN-MAX") from None
    if name == "JobId":
        if not value.isdigit() or int(value) < 1:
            raise UsageError(f"invalid {word!r}: {name} must be a positive number")
        return int(value)
    if name == "Priority":
        names = ", ".join(p.value for p in Priority)
        if value.lower() not in {p.value for p in Priority}:
            kind = "names, not numbers: " if value.lstrip("+-").isdigit() else ""
            raise UsageError(f"invalid {word!r}: minihpc's priorities are {kind}{names}")
        return Priority(value.lower())
    try:
        seconds = parse_time_limit(value)
    except UsageError as exc:
        raise UsageError(f"{exc} (in {word!r})") from None
    if seconds is None and op != "=":
        raise UsageError(f"invalid {word!r}: UNLIMITED cannot be added or taken away")
    return TimeChange(op, seconds)


def check_priority(priority: Priority, admin: bool) -> None:
    """Forbidden for a user who is not an admin asking ``high``: the front of the queue is the
    operators' to give, as in Slurm, where a user may lower a job's priority but only an
    operator may raise it; otherwise any user's flood of high jobs would pass everyone else's."""
    if priority is Priority.HIGH and not admin:
        raise Forbidden("priority high is for admins (the front of the queue is theirs to give); "
                        "use normal or low")


def check_user_jobs(user: str, live: int, adding: int, cap: int) -> None:
    """UsageError when ``adding`` jobs would take ``user`` past ``cap`` jobs pending or running
    (0: no cap), as Slurm's MaxSubmitJobs refuses a submit (admins are not capped)."""
    if cap and live + adding > cap:
        raise UsageError(f"user {user} has {live} job(s) pending or running and may have at most {cap} "
                         f"(MINIHPC_MAX_JOBS_PER_USER); this submit adds {adding}")


RECORD_MAX = 64 << 10
"""Bytes of what a job's record carries besides its script (args, name, --export's variables,
output names): a job's, not a data set's (issue 33: a 100 KB args string took 100 MB of Redis
as 1,000 array tasks)."""

ARRAY_RECORDS_MAX = 8 << 20
"""Bytes those fields may take over all of an array's tasks, each of which has its own copy."""


def check_size(args: list[str], name: str, environment: dict[str, str], names: tuple[str, ...], tasks: int) -> None:
    """UsageError, one line, for a job whose record (``args``, ``name``, ``environment``,
    output ``names``) is over :data:`RECORD_MAX` bytes, or over :data:`ARRAY_RECORDS_MAX`
    over its ``tasks`` array tasks."""
    size = (sum(len(a.encode()) + 1 for a in args) + len(name.encode())
            + sum(len(k.encode()) + len(v.encode()) + 2 for k, v in environment.items())
            + sum(len(n.encode()) for n in names))
    if size > RECORD_MAX:
        raise UsageError(f"the job's args, name, environment and output names take {size} bytes, over the "
                         f"{RECORD_MAX} a job may have (pass data through a file on the data volume)")
    if size * tasks > ARRAY_RECORDS_MAX:
        raise UsageError(f"the array's {tasks} tasks would each copy {size} bytes of args, name, environment and "
                         f"output names, {size * tasks} in all, over the {ARRAY_RECORDS_MAX} an array may have")


def apply_update(job: Job, update: Update, admin: bool, capacity: int) -> Job:
    """The job as ``update`` leaves it; Conflict for a change its state does not allow,
    Forbidden for a running job's time limit raised by a non-admin, UsageError for a node
    count over ``capacity``."""
    if job.state.terminal:
        raise Conflict(f"job {job.id} is {job.state.value}; only a pending or running job can be updated")
    changed = job
    if update.time_limit is not None:
        limit = new_time_limit(job, update.time_limit)
        if job.state is JobState.RUNNING and not admin and _longer(limit, job.time_limit):
            raise Forbidden(f"job {job.id} is RUNNING with TimeLimit={format_duration(job.time_limit)}; only an "
                            f"admin may raise it (to {format_duration(limit)})")
        changed = dataclasses.replace(changed, time_limit=limit)
    if update.priority is not None:
        check_priority(update.priority, admin)
        _must_be_pending(job, "given another Priority")
        changed = dataclasses.replace(changed, priority=update.priority)
    if update.nodes is not None:
        _must_be_pending(job, "given another NumNodes")
        least, most = update.nodes
        if least > capacity:
            raise UsageError(f"job {job.id} would need {least} node{'s' if least != 1 else ''}; "
                             f"the cluster has {capacity}")
        changed = dataclasses.replace(changed, nodes_requested=least, max_nodes=most if most > least else 0)
    return changed


def new_time_limit(job: Job, change: TimeChange) -> float | None:
    """The limit after TimeLimit=, += or -= (UsageError for one that would reach zero or less)."""
    if change.op == "=":
        return change.seconds
    if job.time_limit is None:
        raise UsageError(f"job {job.id} has no time limit (UNLIMITED) to add to or take from")
    limit = job.time_limit + change.seconds if change.op == "+" else job.time_limit - change.seconds
    if limit <= 0:
        raise UsageError(f"job {job.id}'s TimeLimit {format_duration(job.time_limit)} minus "
                         f"{format_duration(change.seconds)} leaves nothing")
    return limit


def _longer(new: float | None, old: float | None) -> bool:
    """Whether limit ``new`` is longer than ``old`` (None is UNLIMITED)."""
    if old is None:
        return False
    return new is None or new > old


def changed_fields(before: Job, after: Job) -> dict[str, str]:
    """The record fields (as stored: see Job.to_record) that differ between two versions."""
    old = before.to_record()
    return {k: v for k, v in after.to_record().items() if old.get(k) != v}
