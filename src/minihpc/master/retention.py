"""The master forgets old ended jobs as core.retention decides: each job's record, results and
telemetry (minihpc.state) and its spooled script and logs (minihpc.machine.files), the same as
the API's ``DELETE /jobs/ID``. Checkpoints are the user's and stay. It also removes the folders
of jobs another process forgot but could not remove whole (the API, a uid of its own on hosts)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from minihpc.core import dependency, retention
from minihpc.core.config import Settings
from minihpc.core.errors import ClusterUnavailable
from minihpc.core.models import Job
from minihpc.machine import files
from minihpc.state.store import Store

log = logging.getLogger(__name__)

PRUNE_BATCH = 500
"""Most ended jobs one pass forgets, so a backlog (a limit just lowered, years of history) is
worked off over several passes instead of stalling scheduling."""

PRUNE_INTERVAL = 60.0
"""Seconds between two passes when the last one had nothing left over."""

LEFT_INTERVAL = 5.0
"""Seconds between two looks at the folders forgotten jobs left (keys.FILES_LEFT)."""

PRUNE_BACKLOG_INTERVAL = 5.0
"""Seconds to the next pass while a backlog remains (the last pass forgot a full batch)."""


def forget_ended(store: Store, settings: Settings, now: float,
                 pending: Callable[[], list[Job]] | None = None) -> float:
    """One pass: forget the ended jobs beyond the settings' bounds (at most PRUNE_BATCH), never
    one a pending job depends on nor a node failure whose requeue is undecided. ``pending``
    reads the pending jobs (the master's: its PendingCache; default: the store, whole); they are
    read only when some job is beyond the bounds. Returns when the next pass is due."""
    keep_jobs, keep_days = settings.keep_ended_jobs, settings.keep_ended_days
    if keep_jobs == 0 and keep_days == 0:
        return now + PRUNE_INTERVAL
    oldest, total = store.oldest_ended(PRUNE_BATCH)
    if not retention.to_forget(oldest, now, keep_jobs, keep_days, set(), total=total, limit=PRUNE_BATCH):
        return now + PRUNE_INTERVAL  # nothing beyond the bounds: no need to read the queue
    refs = {r for job in (pending or store.pending_jobs)() for r in dependency.refs(job.dependency)}
    needed = {i for ids in store.expand_refs(refs).values() for i in ids}  # an array: its every task
    needed |= {job.id for job in store.node_failed_jobs()}
    oldest, total = store.oldest_ended(PRUNE_BATCH + len(needed))
    chosen = retention.to_forget(oldest, now, keep_jobs, keep_days, needed, total=total, limit=PRUNE_BATCH)
    if not chosen:
        return now + PRUNE_INTERVAL
    roots = _job_folder_roots(store)
    if roots is None:
        return now + PRUNE_INTERVAL  # no layout yet: forgetting now would leave the folders behind
    forgotten = 0
    for job_id in chosen:
        if store.forget_ended(job_id):
            files.remove_job_dirs(roots, job_id)
            forgotten += 1
    if forgotten:
        log.info("master: forgot %s ended jobs (%s, %s)", forgotten,
                 f"kept the newest {keep_jobs}" if keep_jobs else "no count limit",
                 f"none older than {keep_days:g} days" if keep_days else "no age limit")
    return now + (PRUNE_BACKLOG_INTERVAL if len(chosen) == PRUNE_BATCH else PRUNE_INTERVAL)


def remove_left_files(store: Store) -> int:
    """Remove the folders of forgotten jobs that whoever forgot them left (keys.FILES_LEFT), at
    most PRUNE_BATCH a pass; how many jobs' folders are now gone whole."""
    left = store.take_left_files(PRUNE_BATCH)
    if not left:
        return 0
    roots = _job_folder_roots(store)
    if roots is None:
        for job_id in left:  # no layout yet: kept for a later pass
            store.leave_files(job_id)
        return 0
    gone = [job_id for job_id in left if not files.remove_job_dirs(roots, job_id)]
    log.info("master: removed the folders of %s forgotten job(s)%s", len(gone),
             f"; {len(left) - len(gone)} still hold files the master cannot remove" if len(gone) < len(left) else "")
    return len(gone)


def _job_folder_roots(store: Store) -> tuple[str | None, str | None] | None:
    """The spool and the log folder of the cluster's layout, where each job has a folder; None
    before the layout is published."""
    try:
        cluster = store.cluster_info()
    except ClusterUnavailable:
        return None
    return cluster.get("spool_dir"), cluster.get("log_dir")
