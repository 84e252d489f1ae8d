"""Gang scheduling as pure functions: which pending jobs start now, on which nodes, and why
the others wait. A held job (``scontrol hold``) is passed over as if it were not queued.

The policy is strict priority with *conservative backfill*: jobs are taken in priority order
(high, normal, low; then submit time). Each job gets the earliest start at which all of its
nodes are free, given the running jobs' time limits and the start times already promised to
every job ahead of it; it starts only if that time is now. A lower-priority job can therefore
take idle nodes only when it ends (by its time limit) before any job ahead of it could have
used them. A job with no time limit is assumed to run forever; a job ahead that cannot be promised any
start time (it waits on such jobs) holds its node count from now on, so jobs behind it get
only nodes it could never need.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from minihpc.core import dependency
from minihpc.core.job_control import HELD_REASON
from minihpc.core.models import Job, JobState, NodeState, NodeStatus

INF = math.inf


@dataclass
class Plan:
    starts: list[tuple[int, list[str]]] = field(default_factory=list)
    """(job id, node names) to reserve and launch now, in order."""
    reasons: dict[int, str] = field(default_factory=dict)
    """Why each job that does not start waits (Slurm's reason names)."""
    cancels: dict[int, str] = field(default_factory=dict)
    """Jobs that can never run, with the reason."""


def queue_order_key(job: Job) -> tuple:
    """Priority first, then requeued jobs before new ones (a job a node failure interrupted
    goes back to the front of its priority), then submit time, then id."""
    return (job.priority.rank, 0 if job.requeues else 1, job.submitted_at, job.id)


def should_requeue(job: Job, max_requeues: int) -> bool:
    """A job its node failure ended goes back to the queue until it used up its requeues."""
    return job.state is JobState.NODE_FAIL and job.requeues < max_requeues


def expected_end(job: Job, now: float) -> float:
    """When a running job will have freed its nodes at the latest (INF without a time limit)."""
    if job.time_limit is None or job.started_at is None:
        return INF
    return max(job.started_at + job.time_limit, now)


class Profile:
    """How many nodes are free over time, as a step function starting at ``now``."""

    def __init__(self, now: float, free_now: int, frees_at: list[float]):
        self.times = [now]
        self.free = [free_now]
        for t in sorted(frees_at):
            if t == INF:
                continue
            self._split(t)
            for i, ti in enumerate(self.times):
                if ti >= t:
                    self.free[i] += 1

    def _split(self, t: float) -> None:
        if t == INF or t in self.times:
            return
        i = next((k for k, ti in enumerate(self.times) if ti > t), len(self.times))
        self.times.insert(i, t)
        self.free.insert(i, self.free[i - 1])

    def earliest(self, count: int, duration: float) -> float | None:
        """First time at which ``count`` nodes stay free for ``duration``; None if never."""
        for i, start in enumerate(self.times):
            end = start + duration
            if all(
                self.free[k] >= count
                for k in range(i, len(self.times))
                if self.times[k] < end
            ):
                return start
        return None

    def reserve(self, start: float, count: int, duration: float) -> None:
        end = start + duration
        self._split(start)
        self._split(end)
        for k, t in enumerate(self.times):
            if start <= t < end:
                self.free[k] -= count


def dependency_status(job: Job, states: dict[int, JobState | None], others: Iterable[Job] = ()) -> str | None:
    """None when the job may run; 'Dependency' while it waits; 'DependencyNeverSatisfied'.
    ``others``: the queued and running jobs a singleton term looks at (see core.dependency)."""
    return dependency.status(job, states, others)


def same_owner_and_name(jobs: Iterable[Job]) -> dict[tuple[str, str], list[Job]]:
    """The jobs by (user, name): what a singleton dependency compares a job with."""
    out: dict[tuple[str, str], list[Job]] = {}
    for job in jobs:
        out.setdefault((job.user, job.name), []).append(job)
    return out


def plan(
    pending: list[Job],
    nodes: list[NodeStatus],
    running: list[Job],
    dependency_states: dict[int, JobState | None],
    now: float,
) -> Plan:
    """Decide what starts now. Pure: reads only its arguments."""
    result = Plan()
    idle = [n.name for n in nodes if n.state is NodeState.IDLE]
    capacity = sum(1 for n in nodes if n.schedulable)
    ends = {job.id: expected_end(job, now) for job in running}
    busy_until = [ends.get(n.job, now) for n in nodes if n.schedulable and n.job is not None]
    profile = Profile(now, len(idle), busy_until)
    someone_ahead_waits = False
    owners = same_owner_and_name([*pending, *running])

    for job in sorted(pending, key=queue_order_key):
        if job.held:
            # scontrol hold: not started, and no nodes kept for it -- as if it were not queued.
            result.reasons[job.id] = HELD_REASON
            continue
        dep = dependency_status(job, dependency_states, owners.get((job.user, job.name), ()))
        if dep == "DependencyNeverSatisfied":
            result.cancels[job.id] = dep
            continue
        if dep is not None:
            result.reasons[job.id] = dep
            continue
        if job.nodes_requested > capacity:
            result.reasons[job.id] = "ReqNodeNotAvail"
            continue
        duration = job.time_limit if job.time_limit is not None else INF
        start = profile.earliest(job.nodes_requested, duration)
        if start is not None and start <= now and len(idle) >= job.nodes_requested:
            chosen, idle = idle[: job.nodes_requested], idle[job.nodes_requested:]
            result.starts.append((job.id, chosen))
            profile.reserve(now, job.nodes_requested, duration)
            continue
        result.reasons[job.id] = "Priority" if someone_ahead_waits else "Resources"
        someone_ahead_waits = True
        if start is None:
            # No start can be promised (it waits on jobs without time limits): hold its
            # nodes from now on, so that only nodes it could never need go to others.
            profile.reserve(now, job.nodes_requested, INF)
        else:
            profile.reserve(start, job.nodes_requested, duration)
    return result


def overdue(running: list[Job], now: float) -> list[int]:
    """Running jobs past their time limit."""
    return [
        job.id
        for job in running
        if job.time_limit is not None
        and job.started_at is not None
        and now >= job.started_at + job.time_limit
    ]


def stalled(running: list[Job], progress: dict[int, dict], now: float, default_timeout: float) -> dict[int, float]:
    """Running jobs whose current attempt reported progress once and then went silent for
    longer than their progress timeout -> seconds of silence. A job that never reports is
    not watched (many scripts do not); neither is one before its first report."""
    out: dict[int, float] = {}
    for job in running:
        report = progress.get(job.id)
        if report is None or int(report.get("attempt", 0)) != job.attempts:
            continue
        silent = now - report["at"]
        if silent > (job.progress_timeout or default_timeout):
            out[job.id] = silent
    return out


def lost(running: list[Job], nodes: dict[str, NodeStatus]) -> dict[int, str]:
    """Running jobs one of whose nodes is down or no longer holds them -> the first such node."""
    out: dict[int, str] = {}
    for job in running:
        for name in job.nodes:
            node = nodes.get(name)
            if node is None or not node.alive or node.job != job.id:
                out[job.id] = name
                break
    return out


def stale_allocations(
    nodes: list[NodeStatus],
    job_states: dict[int, JobState | None],
    seen: dict[str, tuple[int, float]],
    now: float,
    grace: float,
) -> tuple[dict[str, tuple[int, float]], list[tuple[str, int]]]:
    """Allocations that name a job which is not RUNNING (it ended, went back to the queue, or
    has no record): normally its node's own result report frees it at once; one held past
    ``grace`` (its agent died or lost its report) is freed, so the node serves again.

    ``seen`` is the previous call's first return: {node: (job, since when its job has not been
    running)}. Returns the new ``seen`` and the (node, job) allocations to free now."""
    still: dict[str, tuple[int, float]] = {}
    free: list[tuple[str, int]] = []
    for node in nodes:
        if node.job is None or job_states.get(node.job) is JobState.RUNNING:
            continue
        job, since = seen.get(node.name, (node.job, now))
        if job != node.job:
            since = now
        still[node.name] = (node.job, since)
        if now - since >= grace:
            free.append((node.name, node.job))
    return still, free
