"""Which ended jobs the cluster forgets: the newest ``keep_jobs`` are kept, and none older than
``keep_days``, but never a job that a pending job still depends on (its outcome decides whether
that job may start). A pure decision; the master applies it (minihpc.master.retention)."""

from __future__ import annotations

from collections.abc import Collection, Sequence

DAY = 86_400.0
"""Seconds in a day."""


def to_forget(ended: Sequence[tuple[int, float]], now: float, keep_jobs: int, keep_days: float,
              needed: Collection[int] = (), total: int | None = None, limit: int | None = None) -> list[int]:
    """The ids of the ended jobs to forget, oldest first: those beyond the newest ``keep_jobs``
    (0: no count limit) and those that ended more than ``keep_days`` days before ``now`` (0: no
    age limit); never one in ``needed``; at most ``limit`` (None: all).

    ``ended``: (id, ended_at) of the ended jobs, oldest first -- all of them, or only the oldest
    when ``total`` says how many there are. Both bounds pick from the oldest, so the first
    ``limit + len(needed)`` of them are enough to decide a pass."""
    total = len(ended) if total is None else total
    beyond = total - keep_jobs if keep_jobs > 0 else 0  # how many of the oldest are over the count
    cutoff = now - keep_days * DAY if keep_days > 0 else None
    chosen: list[int] = []
    for index, (job_id, ended_at) in enumerate(ended):
        if limit is not None and len(chosen) >= limit:
            break
        too_many = index < beyond
        too_old = cutoff is not None and ended_at < cutoff
        if (too_many or too_old) and job_id not in needed:
            chosen.append(job_id)
    return chosen


PRUNABLE = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT")
"""The states whose checkpoints a user's cap may take: ended for good (a NODE_FAIL job may be
requeued, and resumes from its checkpoint)."""


def checkpoints_to_prune(folders: Sequence[tuple[int, int, str, float | None]], cap: int) -> list[int]:
    """Which of one user's checkpoint folders go so that what the user keeps fits ``cap`` bytes
    (0: no cap): those of the user's oldest jobs that ended for good, oldest first, until the
    rest fits -- never a pending or running job's (it may resume from it). ``folders``: (job
    id, bytes, state, ended_at) of every folder of the user's."""
    total = sum(size for _, size, _, _ in folders)
    if not cap or total <= cap:
        return []
    chosen = []
    for job_id, size, _, _ in sorted((f for f in folders if f[2] in PRUNABLE), key=lambda f: (f[3] or 0.0, f[0])):
        if total <= cap:
            break
        chosen.append(job_id)
        total -= size
    return chosen
