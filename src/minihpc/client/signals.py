"""``scancel --signal=SIG [-b|-f] JOBID``: a signal to a running job's processes, which goes on
running (scancel(1): "-s, --signal: The name or number of the signal to send"; without it the
job is cancelled).

The request travels as a message in each of the job's nodes' inboxes (state.steps), which
every node's share reads while the job runs (node.job_signals delivers it). As in Slurm, only
the job's owner or an admin may signal it, and a pending job cannot be signalled.
"""

from __future__ import annotations

import signal

from minihpc.client.access import Principal, may_change
from minihpc.core.errors import Conflict
from minihpc.core.models import JobState
from minihpc.state.steps import BATCH_SHELL, FULL, STEPS, signal_message
from minihpc.state.store import Store


def scope(batch: bool, full: bool) -> str:
    """Whom scancel's options send the signal to: every step's tasks by default; ``-b/--batch``
    the batch shell only; ``-f/--full`` the batch shell, its children and every step."""
    return FULL if full else BATCH_SHELL if batch else STEPS


def signal_job(store: Store, job_id: int, who: Principal, sig: signal.Signals, to: str = STEPS) -> None:
    """Send ``sig`` to a running job of ``who``'s (any job for an admin); Conflict for a job
    that is pending (Slurm: "Job is pending execution") or has ended."""
    job = store.get_job(job_id)
    may_change(who, job)
    if job.state is JobState.PENDING:
        raise Conflict(f"job {job_id} is pending execution; only a running job can be signalled "
                       f"(cancel it without --signal to end it)")
    if job.state is not JobState.RUNNING:
        raise Conflict(f"job {job_id} already ended ({job.state.value})")
    store.send(job.id, job.attempts, {node: signal_message(sig, to, who.user) for node in job.nodes})
