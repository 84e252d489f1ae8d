"""Gang scheduling as pure functions: which pending jobs start now, on which nodes, and why
the others wait. A held job (``scontrol hold``) is passed over as if it were not queued.

The policy is strict priority with *conservative backfill*: jobs are taken in priority order
(high, normal, low), users taking turns within a priority (:func:`queue_order`), then submit
time. Each job gets the earliest start at which enough of its
*eligible* nodes are free for its whole time limit, given the running jobs' time limits and
the nodes already promised to every job ahead of it; it starts only if that time is now. A
lower-priority job can therefore take idle nodes only when it ends (by its time limit) before
any job ahead of it could have used them. A job with no time limit is assumed to run forever;
a job ahead that cannot be promised any start time (it waits on such jobs) holds the eligible
nodes that free soonest from now on, so jobs behind it get only nodes it could never need.

A node is eligible for a job (:func:`eligible`) when it is up and not drained, in the job's
partition (``-p``, else the default: core.partitions) and has what ``--mem``, ``--gres=gpu:N``
and ``-c`` x ``--ntasks-per-node`` ask of each node (core.requirements.fits). Promises are
kept per node (:class:`Profile`), since jobs with different constraints compete for different
subsets of the nodes. Before taking nodes, a job may wait for reasons of its own, which
reserve nothing: a dependency, ``--begin`` in the future (``BeginTime``), or its array's
``%N`` throttle (``JobArrayTaskLimit``: man sbatch --array, "a maximum number of
simultaneously running tasks"). A job no eligible set of nodes could ever hold waits
``ReqNodeNotAvail``.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from operator import attrgetter

from minihpc.core import dependency, elastic
from minihpc.core.job_control import HELD_REASON
from minihpc.core.models import Job, JobState, NodeStatus
from minihpc.core.partitions import Partitions
from minihpc.core.requirements import cpus_needed, fits

INF = math.inf

BEGIN_TIME = "BeginTime"
"""Slurm's reason for a job whose ``--begin`` time has not come."""

ARRAY_LIMIT = "JobArrayTaskLimit"
"""Slurm's reason for an array task held back by the array's ``%N`` throttle."""

NOT_AVAILABLE = "ReqNodeNotAvail"
"""Slurm's reason for a job that too few up, undrained, eligible nodes could ever hold."""


@dataclass
class Plan:
    starts: list[tuple[int, list[str]]] = field(default_factory=list)
    """(job id, node names) to reserve and launch now, in order."""
    reasons: dict[int, str] = field(default_factory=dict)
    """Why each job that does not start waits (Slurm's reason names), in queue order."""
    cancels: dict[int, str] = field(default_factory=dict)
    """Jobs that can never run, with the reason."""
    promised: dict[int, float | None] = field(default_factory=dict)
    """When each job waiting for nodes (Resources, Priority) is promised to start; None: no
    start can be promised (it waits on jobs without a time limit). ``squeue --start``."""
    grows: list[tuple[int, list[str]]] = field(default_factory=list)
    """(job id, all its nodes after) for running elastic jobs that take more nodes now."""


def queue_order_key(job: Job) -> tuple:
    """Priority first, then requeued jobs before new ones (a job a node failure interrupted
    goes back to the front of its priority), then submit time, then id -- an array's tasks in
    index order (the last index has the array's own id, the lowest). Kept with the job
    (Job.queue_key): a pass orders 100,000 waiting jobs."""
    return job.queue_key


_QUEUE_KEY, _USER = attrgetter("queue_key"), attrgetter("user")


def queue_order(pending: Iterable[Job], running: Iterable[Job] = ()) -> list[Job]:
    """The order jobs are considered in (and squeue shows them): by priority, requeued jobs
    first, then **users take turns** (issue 33: one user's flood of jobs must not hold up
    everyone else's): a user's n-th waiting job comes after every other user's jobs that have
    fewer of their own running or ahead of them, as a fair-share scheduler would put it;
    among equals, submit order (:func:`queue_order_key`). One user alone gets plain FIFO."""
    ordered = sorted(pending, key=_QUEUE_KEY)
    if len(set(map(_USER, ordered))) <= 1:
        return ordered  # one user's turns follow submit order: the order stands
    turns = Counter(j.user for j in running)
    count = len(ordered)
    span = count + len(running) + 1  # more than any turn
    keyed = []
    for index, job in enumerate(ordered):
        # (priority, requeued) as queue_order_key has them, then the user's turn, then the
        # place in that order, as one integer: 100,000 jobs sort in milliseconds, not tuples
        turn = turns[job.user]
        turns[job.user] = turn + 1
        group = job.priority.rank * 2 + (0 if job.requeues else 1)
        keyed.append((group * span + turn) * count + index)
    return [ordered[key % count] for key in sorted(keyed)]


def should_requeue(job: Job, max_requeues: int) -> bool:
    """A job its node failure ended goes back to the queue until it used up its requeues --
    unless it was submitted with ``--no-requeue`` (man sbatch: "Specifies that the batch job
    should never be requeued under any circumstances")."""
    return job.state is JobState.NODE_FAIL and job.requeue and job.requeues < max_requeues


def expected_end(job: Job, now: float) -> float:
    """When a running job will have freed its nodes at the latest (INF without a time limit)."""
    if job.time_limit is None or job.started_at is None:
        return INF
    return max(job.started_at + job.time_limit, now)


class Profile:
    """Each node's reservations from ``now`` on, as (start, end) intervals: a running job's
    until its expected end, and those promised to jobs ahead. ``frees_at``: node -> when it
    is free (``now`` for an idle one), in the order nodes are preferred. A node may start a
    job at ``now`` only if it is in ``idle`` (default: every node free at ``now``); one whose
    allocation is about to be freed is free only after ``now``."""

    def __init__(self, now: float, frees_at: dict[str, float], idle: Iterable[str] | None = None):
        self.now = now
        self.busy = {name: [(now, t)] if t > now else [] for name, t in frees_at.items()}
        self.idle = {n for n, t in frees_at.items() if t <= now} if idle is None else set(idle)
        self.held: set[str] = {n for n, t in frees_at.items() if t == INF}
        """Nodes reserved for good (until INF): no job can ever be given them in this plan."""

    def all_held(self, nodes: list[str]) -> bool:
        """Whether every one of ``nodes`` is reserved for good: a job that may have only them
        can neither start nor be promised a start, and holding them changes nothing."""
        return all(n in self.held for n in nodes)

    def free(self, node: str, start: float, duration: float) -> bool:
        """Whether ``node`` has no reservation in [start, start + duration)."""
        if start <= self.now and node not in self.idle:
            return False
        end = start + duration
        return all(e <= start or s >= end for s, e in self.busy[node])

    def earliest(self, count: int, duration: float, nodes: list[str] | None = None,
                 required: tuple[str, ...] = ()) -> float | None:
        """First time at which ``count`` of ``nodes`` (default: all), every one of ``required``
        among them, stay free for ``duration``; None if never. Only ``now`` and reservation
        ends can be such a time."""
        nodes = list(self.busy) if nodes is None else nodes

        def fits(t: float) -> bool:
            return all(self.free(n, t, duration) for n in required) and self.enough(count, t, duration, nodes)

        if fits(self.now):  # the common case, decided before the reservation ends are gathered
            return self.now
        ends = {e for n in nodes for _, e in self.busy[n] if self.now < e < INF}
        return next((t for t in sorted(ends) if fits(t)), None)

    def enough(self, count: int, start: float, duration: float, nodes: Iterable[str]) -> bool:
        """Whether at least ``count`` of ``nodes`` are free over [start, start + duration);
        stops looking at the ``count``-th."""
        found = 0
        for n in nodes:
            if found >= count:
                break
            found += self.free(n, start, duration)
        return found >= count

    def reserve(self, start: float, count: int, duration: float, nodes: list[str] | None = None,
                required: tuple[str, ...] = ()) -> list[str]:
        """Reserve ``count`` of ``nodes`` free over [start, start + duration), ``required``
        first, and return them: in ``nodes`` order at ``now``; later, those busy until closest
        before ``start`` first, which leaves the longest-idle nodes to backfill."""
        nodes = list(self.busy) if nodes is None else nodes
        free = (n for n in nodes if n not in required and self.free(n, start, duration))
        if start > self.now:
            free = sorted(free, key=lambda n: -max((e for _, e in self.busy[n] if e <= start), default=-INF))
        else:  # in nodes order: the first ones are enough
            free = list(itertools.islice(free, max(0, count - len(required))))
        chosen = [*required, *free][:max(count, len(required))]
        for n in chosen:
            self.busy[n].append((start, start + duration))
            if start <= self.now and start + duration == INF:
                self.held.add(n)
        return chosen

    def hold(self, count: int, nodes: list[str], required: tuple[str, ...] = ()) -> None:
        """Reserve, from now on, ``required`` and the rest of ``count`` of ``nodes`` that are
        free for good soonest."""
        def free_for_good(n: str) -> float:
            return max((e for _, e in self.busy[n]), default=self.now)

        others = sorted((n for n in nodes if n not in required), key=free_for_good)
        for n in [*required, *others][:max(count, len(required))]:
            self.busy[n].append((self.now, INF))
            self.held.add(n)


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


def eligible(job: Job, nodes: list[NodeStatus], partitions: Partitions, cpus_override: int = 0) -> list[str]:
    """The nodes that could ever hold the job's share, most fitting first: up and undrained,
    in its partition, with its memory, GPUs and CPUs (core.requirements.fits). Nodes with fewer
    GPUs come first, so a job that needs none leaves GPU nodes to the jobs that do."""
    part = partitions.effective(job.partition)
    ok = [n for n in nodes if n.schedulable and partitions.contains(part, n.name) and fits(job, n, cpus_override)
          and n.name not in job.exclude and partitions.meets(job.constraint, n.name, n.simulated)]
    return [n.name for n in sorted(ok, key=lambda n: n.gpus)]


def shape(job: Job) -> tuple:
    """What :func:`eligible` reads of a job: jobs of one shape (an array's tasks, a loop's
    submits) have the same candidate nodes, worked out once per pass."""
    return (job.partition, job.mem_bytes, job.gpus, cpus_needed(job), tuple(job.exclude), job.constraint)


def own_wait(job: Job, now: float, dependency_states: dict[int, JobState | None], singletons: Iterable[Job],
             array_running: Counter) -> str | None:
    """Why the job waits whatever the nodes do (it reserves none meanwhile), or None: held,
    a dependency (or 'DependencyNeverSatisfied': cancel it), ``--begin`` not come, or its
    array's throttle reached."""
    if job.held_by is not None and job.held:  # the field first: a property is a call a job
        return HELD_REASON
    if job.dependency:  # most jobs have none: no call
        dep = dependency_status(job, dependency_states, singletons)
        if dep is not None:
            return dep
    if job.begin_at is not None and job.begin_at > now:
        return BEGIN_TIME
    if job.array_limit and job.array_job_id is not None and array_running[job.array_job_id] >= job.array_limit:
        return ARRAY_LIMIT
    return None


def plan(
    pending: list[Job], nodes: list[NodeStatus], running: list[Job], dependency_states: dict[int, JobState | None],
    now: float, partitions: Partitions | None = None, cpus_override: int = 0, grow_every: float | None = None,
) -> Plan:
    """Decide what starts now (and what running elastic jobs grow, every ``grow_every`` s at
    most). Pure. ``partitions``: the published ones (None: one default partition)."""
    result = Plan()
    partitions = partitions or Partitions()
    ends = {job.id: expected_end(job, now) for job in running}
    usable = [n for n in nodes if n.schedulable]
    profile = Profile(now, {n.name: now if n.job is None else ends.get(n.job, now) for n in usable},
                      idle=[n.name for n in usable if n.job is None])
    array_running = Counter(j.array_job_id for j in running if j.array_job_id is not None)
    someone_ahead_waits = False
    # Only a singleton term compares jobs by (user, name): built only when one has it.
    owners = (same_owner_and_name([*pending, *running])
              if any(dependency.has_singleton(j.dependency) for j in pending if j.dependency) else {})
    candidates_of: dict[tuple, list[str]] = {}
    started: list[tuple[int, Job, float, list[str]]] = []

    for job in queue_order(pending, running):
        why = own_wait(job, now, dependency_states, owners.get((job.user, job.name), ()), array_running)
        if why is not None:  # waits on its own: no nodes looked at, none reserved
            if why == dependency.NEVER:
                result.cancels[job.id] = why
            else:
                result.reasons[job.id] = why
            continue
        if (key := shape(job)) not in candidates_of:
            candidates_of[key] = eligible(job, nodes, partitions, cpus_override)
        candidates = candidates_of[key]
        required = tuple(job.nodelist)
        if len(candidates) < job.nodes_requested or not set(required) <= set(candidates):
            result.reasons[job.id] = NOT_AVAILABLE
            continue
        # What it may have may be held for good by jobs ahead of it: then it can neither start
        # nor be promised a start, and holding those nodes again would change nothing.
        held = profile.all_held(candidates)
        duration = job.time_limit if job.time_limit is not None else INF
        start = None if held else profile.earliest(job.nodes_requested, duration, candidates, required)
        if start == now:
            result.starts.append((job.id, profile.reserve(now, job.nodes_requested, duration, candidates, required)))
            started.append((len(result.starts) - 1, job, duration, candidates))  # a range grows at the end
            if job.array_job_id is not None:
                array_running[job.array_job_id] += 1
            continue
        result.reasons[job.id] = "Priority" if someone_ahead_waits else "Resources"
        result.promised[job.id] = start
        someone_ahead_waits = True
        if start is not None:
            profile.reserve(start, job.nodes_requested, duration, candidates, required)
        elif not held:
            # No start can be promised (it waits on jobs without time limits): hold its
            # nodes from now on, so that only nodes it could never need go to others.
            profile.hold(job.nodes_requested, candidates, required)
    grow(result, started, profile)  # then running elastic jobs, with what is left
    result.grows = grow_running(running, nodes, profile, now, grow_every, partitions, cpus_override)
    return result


def grow(result: Plan, started: list[tuple[int, Job, float, list[str]]], profile: Profile) -> None:
    """Give the jobs of a ``-N MIN-MAX`` range among those that start now (``started``: where
    each is in ``result.starts``, the job, its duration, the nodes it may have) more nodes, up
    to their most, in queue order: only nodes free for as long as each may run once every other
    job has had its start or its reservation, so a range never takes a node a job behind it
    was promised (Slurm's node ranges, and issue 36's rule for elastic growth)."""
    for at, job, duration, candidates in started:
        job_id, chosen = result.starts[at]
        if job.max_nodes > len(chosen):
            others = [n for n in candidates if n not in chosen]
            more = profile.reserve(profile.now, job.max_nodes - len(chosen), duration, others)
            result.starts[at] = (job_id, chosen + more)


def grow_running(running: list[Job], nodes: list[NodeStatus], profile: Profile, now: float,
                 grow_every: float | None, partitions: Partitions, cpus_override: int = 0) -> list[tuple[int, list[str]]]:
    """Running elastic jobs whose growth is due (core.elastic.growth_due), in queue order, with
    the nodes each has after taking more: only nodes free for as long as it may still run once
    every pending job has had its start or its reservation, so growth never takes a node a
    waiting job was given or promised (issue 36). ``grow_every`` None: none grows."""
    out = []
    if grow_every is None:
        return out
    for job in sorted(running, key=_QUEUE_KEY):
        if not elastic.growth_due(job, now, grow_every):
            continue
        others = [n for n in eligible(job, nodes, partitions, cpus_override) if n not in job.nodes]
        more = profile.reserve(now, job.max_nodes - len(job.nodes), expected_end(job, now) - now, others)
        if more:
            out.append((job.id, [*job.nodes, *more]))
    return out


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
            if node is None or not node.holds(job.id):
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
