"""Elastic jobs (issue 36) as pure decisions: when a running ``--elastic`` job goes on with fewer
nodes, and when it may take more.

An elastic job asked for a node range (``-N MIN-MAX --elastic``). When one of its nodes leaves
-- it crashed, went silent, or was drained -- the job does not go back to the queue: the master
launches it again at once on the nodes it still has (:func:`shrink`), as long as they are at
least MIN; below MIN it is a node failure, requeued as any other. When nodes are free that no
pending job needs, the master gives it more, up to MAX, at most every ``grow_every`` seconds
(:func:`growth_due`; the scheduler picks the nodes: core.scheduler.grow_running); and when the
first job waiting for nodes could start with what elastic jobs hold beyond their minimum, they
give that back (:func:`reclaim`). Each change
is a relaunch of the whole gang (a new world size, so every rank restarts), which continues
from the job's checkpoint, the one its ranks saved as they were stopped where the script does
(minihpc.elastic), as torchrun's own elastic agent restarts its workers on a membership change.

Why the master and not torchrun's c10d rendezvous decides: it already sees a node go (a crash
event in a fraction of a second, a silence after the node timeout) and frees or fences the
node, while a c10d rendezvous needs a store that outlives every node (its host is one of them)
and a gloo collective that waits on a silent peer waits for its timeout (30 minutes by default).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from minihpc.core.models import Job, NodeStatus

PEER_LOST_GRACE = 0.5
"""Seconds from SIGTERM to SIGKILL (not kill_wait) for an elastic job's ranks whose gang lost a
node: they cannot agree on a step to save without it (preempt all-reduces), a peer cut off
leaves them stuck in a collective, and a dead one made them fail and save (elastic.rescue)."""


def elastic(job: Job) -> bool:
    """Whether ``job`` changes size while it runs: ``--elastic`` with a node range."""
    return job.elastic and job.max_nodes > job.nodes_requested


def leaving(job: Job, nodes: Mapping[str, NodeStatus]) -> list[str]:
    """The nodes an elastic job must go on without: down, gone from the registry, holding
    another job (its agent restarted and freed it), or drained (an operator wants it back; a
    fixed-size job keeps a drained node until it ends, as Slurm's jobs do)."""
    out = []
    for name in job.nodes:
        node = nodes.get(name)
        if node is None or not node.holds(job.id) or node.drain_reason is not None:
            out.append(name)
    return out


def shrink(job: Job, nodes: Mapping[str, NodeStatus]) -> list[str] | None:
    """The nodes an elastic job goes on with now that some of its nodes left (in its node order,
    so node rank 0 stays where it was if it can), or None: it is not elastic, none left, or fewer
    than its minimum are left (then it is a node failure, requeued as a fixed-size job is)."""
    if not elastic(job):
        return None
    gone = set(leaving(job, nodes))
    if not gone:
        return None
    kept = [n for n in job.nodes if n not in gone]
    return kept if len(kept) >= job.nodes_requested else None


def _grows_at(job: Job, grow_every: float) -> float | None:
    """When a running elastic job below its most may grow: ``grow_every`` seconds after its last
    start or resize (each growth restarts its ranks); None: it may not."""
    if not elastic(job) or len(job.nodes) >= job.max_nodes or job.launched_at is None:
        return None
    return job.launched_at + grow_every


def teardown_grace(kill_wait: float, gang_whole: bool) -> float:
    """Seconds from SIGTERM to SIGKILL for the ranks of an elastic job's launch that ended:
    ``kill_wait`` while every node of its gang is up (a growth, a drain: they agree on a step
    and save it), else PEER_LOST_GRACE at most."""
    return kill_wait if gang_whole else min(kill_wait, PEER_LOST_GRACE)


def growth_due(job: Job, now: float, grow_every: float) -> bool:
    """Whether a running elastic job may take more nodes now."""
    at = _grows_at(job, grow_every)
    return at is not None and now >= at


def next_growth(running: Iterable[Job], now: float, grow_every: float) -> float | None:
    """The earliest time a running elastic job below its most may grow, if that is to come (the
    master plans again then; a plan's inputs need not have changed); None: no such job."""
    times = [_grows_at(job, grow_every) for job in running]
    return min((t for t in times if t is not None and t > now), default=None)


def reclaim(waiting: Job | None, candidates: list[str], nodes: Iterable[NodeStatus], running: Iterable[Job],
            ) -> list[tuple[int, list[str]]]:
    """Shrinks that let ``waiting`` -- the first job in the queue that waits for nodes
    (``Resources``), with the nodes it may ever have (``candidates``) -- start: running elastic
    jobs give back the nodes they hold beyond their minimum (their last ones, so node rank 0
    stays; the job that grew last gives first), as many as it lacks. A growth never outranks a
    pending job, whichever came first. [] when all of them would still not be enough, or none is
    needed. Nodes being given back already (held by a running job that no longer lists them)
    count as free."""
    if waiting is None:
        return []
    jobs = list(running)
    members = {job.id: set(job.nodes) for job in jobs}
    usable = set(candidates)
    free = {n.name for n in nodes if n.name in usable and n.schedulable
            and (n.job is None or (n.job in members and n.name not in members[n.job]))}
    lacking = waiting.nodes_requested - len(free)
    if lacking <= 0 or not set(waiting.nodelist) <= free:  # -w nodes a shrink would not give it
        return []
    out = []
    for job in sorted((j for j in jobs if elastic(j)), key=lambda j: -(j.launched_at or 0.0)):
        spare = [n for n in reversed(job.nodes[job.nodes_requested:]) if n in usable][:lacking]
        if spare:
            out.append((job.id, [n for n in job.nodes if n not in spare]))
            lacking -= len(spare)
        if lacking <= 0:
            return out
    return []
