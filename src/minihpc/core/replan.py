"""Whether the master must plan again (issue 38): a scheduling pass reads every pending job and
weighs it against every node, so a deep queue made an idle master busy -- 10,000 held jobs
cost it a core, planning the same nothing every half second. A plan can change only when its
inputs do: a job record (any write bumps one counter, state.keys.JOBS_REVISION), the nodes
(up, drained, allocated, what they hold), the cluster's published settings, or the clock
reaching a pending job's ``--begin``. Time passing alone starts nothing else: a backfill gap
only shrinks, and a running job's end is a write.

Decisions, and :class:`LastPlan`, what a planner (the master's loop, the cluster exporter)
keeps of its last plan to ask them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from minihpc.core.models import Job, NodeStatus


def signature(jobs_revision: int, nodes: Iterable[NodeStatus], cluster: Mapping[str, str]) -> tuple:
    """What a plan is made from, but the job records themselves (their revision stands for them)."""
    return (jobs_revision,
            tuple((n.name, n.schedulable, n.job, n.cpus, n.memory_bytes, tuple(n.gpu_devices), n.simulated)
                  for n in nodes),
            tuple(sorted(cluster.items())))


REPLAN_MAX = 30.0
"""Seconds after which the master plans again whatever the signature says: a write that did
not bump the counter (an older client during an upgrade, a hand-made change) waits no longer."""


def due(last: tuple | None, current: tuple, now: float, next_begin: float | None,
        planned_at: float | None = None) -> bool:
    """Whether to plan: never planned, something changed, a ``--begin`` time has come, or the
    last plan is REPLAN_MAX old."""
    return (last != current or (next_begin is not None and now >= next_begin)
            or planned_at is None or now - planned_at >= REPLAN_MAX)


def next_begin(pending: Iterable[Job], now: float) -> float | None:
    """The earliest ``--begin`` still to come among the pending jobs; None: none."""
    return min((j.begin_at for j in pending if j.begin_at is not None and j.begin_at > now), default=None)


@dataclass
class LastPlan:
    """What a planner keeps of its last plan: what it was made from (None: plan anew), when,
    and the next time the clock alone makes another due (a ``--begin``, an elastic growth)."""

    signature: tuple | None = None
    at: float | None = None
    next_due: float | None = None

    def due(self, current: tuple, now: float) -> bool:
        """:func:`due` for a plan made from ``current`` now."""
        return due(self.signature, current, now, self.next_due, self.at)

    def made(self, current: tuple, now: float, next_due: float | None) -> None:
        self.signature, self.at, self.next_due = current, now, next_due
