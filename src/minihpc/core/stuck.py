"""A stuck node: its agent heartbeats but takes no work (issue 33). Heartbeats come from a
thread of their own, so an agent whose worker is blocked -- on a job's trap, a bug, a hung
call -- still looks up, and every job given to it would wait for good. The master sees it
from outside, where a stuck agent cannot lie: a running job's launch task still waiting in
the node's queue ``launch_timeout`` after the job started. The job is ended as a node failure
(and requeued), the node is drained with a reason of this form -- so it receives no new job --
and restarted; once it has registered again after that restart, the drain is lifted.

Decisions only; :mod:`minihpc.master.stuck` reads Redis and acts."""

from __future__ import annotations

from minihpc.core.models import Job, NodeStatus

PREFIX = "stuck: "
"""How a drain the master made for a stuck node begins (sinfo shows it as the reason)."""


def overdue(running: list[Job], now: float, timeout: float,
            taken: set[tuple[int, int, str]]) -> list[tuple[int, int, str, float]]:
    """(job, attempt, node, seconds since the launch was queued) of each launch of a running job
    that a healthy agent would have taken by now and that was not yet seen taken (``taken``): an
    elastic job's launch after a resize is timed from the resize, not from the job's start."""
    return [(job.id, job.attempts, node, now - job.launched_at)
            for job in running if job.launched_at is not None and now - job.launched_at > timeout
            for node in job.nodes if (job.id, job.attempts, node) not in taken]


def stuck(launches: list[tuple[int, int, str, float]], waiting: list[bool]) -> dict[str, tuple[int, int, float]]:
    """node -> (job, attempt, seconds waited) for each overdue launch still in its node's queue."""
    return {node: (job_id, attempt, waited)
            for (job_id, attempt, node, waited), still in zip(launches, waiting) if still}


def drain_reason(waited: float) -> str:
    return f"{PREFIX}took no launch for {waited:.0f}s while heartbeating"


def is_stuck(drain: str | None) -> bool:
    """Whether a drain is the master's for a stuck node (a restart may lift it; an admin's may not)."""
    return drain is not None and drain.startswith(PREFIX)


def back(node: NodeStatus, found_at: float | None) -> bool:
    """Whether a node drained as stuck has come back: up, and registered since it was found
    stuck (a stuck agent registers no more: a registration is a new agent's)."""
    return (node.alive and is_stuck(node.drain_reason) and found_at is not None
            and node.registered_at is not None and node.registered_at > found_at)
