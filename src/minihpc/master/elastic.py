"""The master's side of elastic jobs (core.elastic decides): a running elastic job that lost a
node goes on with the nodes it has left, and one the plan gives more nodes takes them -- each a
transaction (state.lifecycle.resize) that launches its gang again, and an incident that says
the job's new size."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Collection, Mapping

from minihpc.core import elastic, scheduler
from minihpc.core.models import Job, NodeStatus
from minihpc.core.partitions import Partitions
from minihpc.core.requirements import published_cpus
from minihpc.master.dispatch import dispatcher
from minihpc.state.store import Store

log = logging.getLogger(__name__)


def shrink(store: Store, running: list[Job], by_name: Mapping[str, NodeStatus], quiet: bool,
           crashed: Collection[str] = frozenset()) -> set[int]:
    """Relaunch every running elastic job that lost a node (down, freed, drained) on the nodes it
    has left, while they are at least its minimum; the ids of those relaunched. While ``quiet``
    (an outage's grace) a silent node counts as there unless it was ``crashed``."""
    view = _calm(by_name, crashed) if quiet else by_name
    done: set[int] = set()
    dispatch = None
    for job in running:
        kept = elastic.shrink(job, view)
        if kept is None:
            continue
        dispatch = dispatch or dispatcher(store, dict(by_name), store.cluster_info())
        if _resize(store, job, kept, dispatch):
            done.add(job.id)
    return done


def grow(store: Store, grows: list[tuple[int, list[str]]], running: list[Job], by_name: Mapping[str, NodeStatus],
         cluster: dict[str, str]) -> None:
    """Give each running elastic job the plan grows (core.scheduler.grow_running) its nodes."""
    jobs = {job.id: job for job in running}
    dispatch = dispatcher(store, dict(by_name), cluster) if grows else None
    for job_id, nodes in grows:
        job = jobs.get(job_id)
        if job is not None:
            _resize(store, job, nodes, dispatch)


def reclaim(store: Store, plan: scheduler.Plan, pending: list[Job], running: list[Job], nodes: list[NodeStatus],
            by_name: Mapping[str, NodeStatus], cluster: dict[str, str]) -> None:
    """Give the first job waiting for nodes what running elastic jobs hold beyond their minimum,
    when that lets it start (core.elastic.reclaim): they go on with fewer, and it starts once
    their ranks there have ended (the nodes are freed by those ranks' reports)."""
    if not any(elastic.elastic(j) and len(j.nodes) > j.nodes_requested for j in running):
        return  # nothing to give back
    first = next((i for i, why in plan.reasons.items() if why == "Resources"), None)  # in queue order
    waiting = next((j for j in pending if j.id == first), None)
    if waiting is None:
        return
    candidates = scheduler.eligible(waiting, nodes, Partitions.from_record(cluster), published_cpus(cluster))
    shrinks = elastic.reclaim(waiting, candidates, nodes, running)
    jobs = {job.id: job for job in running}
    dispatch = dispatcher(store, dict(by_name), cluster) if shrinks else None
    for job_id, kept in shrinks:
        if _resize(store, jobs[job_id], kept, dispatch, cause=f"given back for job {waiting.id}"):
            log.info("job %s: gave back nodes for job %s, which waits for them", job_id, waiting.id)


def _resize(store: Store, job: Job, nodes: list[str], dispatch, cause: str = "") -> bool:
    after = store.resize(job.id, job.attempts, nodes, dispatch)
    if after is None:  # it ended, changed meanwhile, or a node it was to gain was taken
        return False
    gone = [n for n in job.nodes if n not in nodes]
    gained = [n for n in nodes if n not in job.nodes]
    why = f"without {','.join(gone)}" if gone else f"with {','.join(gained)}"
    why += f" ({cause})" if cause else ""
    store.incident("resized", ",".join(gone or gained), job.id, nodes=len(nodes), was=len(job.nodes),
                   grew=not gone, attempt=after.queue_attempts, launch=after.attempts,
                   reason=f"{len(job.nodes)} -> {len(nodes)} nodes {why}")
    log.warning("job %s: goes on on %s (%d nodes, was %d: %s)", job.id, ",".join(nodes), len(nodes),
                len(job.nodes), why)
    return True


def _calm(by_name: Mapping[str, NodeStatus], crashed: Collection[str]) -> dict[str, NodeStatus]:
    """The nodes as an outage's grace sees them: a silent one is up, unless it was seen to crash."""
    return {name: node if node.alive or name in crashed else dataclasses.replace(node, alive=True)
            for name, node in by_name.items()}
