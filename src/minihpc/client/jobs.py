"""Jobs as users see them: ids as typed, the queue in Slurm's order, waiting for the end,
cancelling -- one rule for every face (CLI, REST API)."""

from __future__ import annotations

import time

from minihpc.core.errors import UsageError
from minihpc.core.models import Job, JobState
from minihpc.core.scheduler import queue_order_key
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


def queue(store: Store, include_ended: bool = False) -> list[Job]:
    """Running jobs, then pending ones in the order they will start, then (optionally) the
    recently ended: what squeue shows."""
    running = sorted(store.running_jobs(), key=lambda j: j.id)
    pending = sorted(store.pending_jobs(), key=queue_order_key)
    ended = sorted(store.ended_jobs(limit=QUEUE_ENDED), key=lambda j: j.id) if include_ended else []
    return running + pending + ended


def elapsed(job: Job, now: float) -> float:
    """Seconds the job has run (its current or last attempt)."""
    if job.started_at is None:
        return 0.0
    return (job.ended_at or now) - job.started_at


def ended_for_good(store: Store, job: Job) -> bool:
    """Ended, and not about to be requeued (see Job.ended_for_good)."""
    return job.ended_for_good(job.state is JobState.NODE_FAIL and store.requeue_undecided(job.id))


def wait(store: Store, job_id: int, timeout: float | None = None, poll: float = 0.1) -> tuple[Job, bool]:
    """Block until the job has ended for good or ``timeout`` passed: (the job as last read,
    whether it ended)."""
    deadline = None if timeout is None else time.time() + timeout
    while True:
        job = store.get_job(job_id)
        if ended_for_good(store, job):
            return job, True
        if deadline is not None and time.time() >= deadline:
            return job, False
        time.sleep(poll)


def cancel(store: Store, job_id: int, by: str) -> None:
    """Cancel a pending or running job; UsageError if it has already ended."""
    if not store.transition(job_id, JobState.CANCELLED, f"cancelled by {by}",
                            only_from=[JobState.PENDING, JobState.RUNNING]):
        raise UsageError(f"job {job_id} already ended ({store.get_job(job_id).state.value})")
