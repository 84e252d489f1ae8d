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

