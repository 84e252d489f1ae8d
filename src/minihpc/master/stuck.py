"""The master's watch for stuck nodes (minihpc.core.stuck decides): a running job's launch task
still waiting in its node's queue ``launch_timeout`` after the job started ends the job as a
node failure (the master requeues it), drains the node so it gets no new job, takes the task
out of the queue and has the health monitor restart the node; once the node has registered
again since it was found stuck (a new agent: a stuck one registers no more), the drain is lifted."""

from __future__ import annotations

import logging
from collections.abc import Callable

from minihpc.core import stuck
from minihpc.core.models import Job, JobState, NodeStatus
from minihpc.master.health import NodeHealth
from minihpc.state.queues import launch_id
from minihpc.state.store import Store

log = logging.getLogger(__name__)


INTERVAL = 1.0
"""Seconds between two looks: a launch is judged by the minute (launch_timeout), not the pass."""


class StuckWatch:
    def __init__(self, store: Store, health: NodeHealth, timeout: float, interval: float = INTERVAL):
        self.store = store
        self.health = health
        self.timeout = timeout
        self.interval = min(interval, timeout / 4)
        self.next_at = 0.0
        self.taken: set[tuple[int, int, str]] = set()  # (job, attempt, node) launches seen taken
        self.found_at: dict[str, float] = {}  # node -> when it was found stuck (its restart comes after)

    def step(self, nodes: list[NodeStatus], now: float, running_jobs: Callable[[], list[Job]]) -> None:
        """Look again if it is time; ``running_jobs``: the running jobs (the master's cache of
        them, asked only then: a thousand records a second read whole had cost the busy master
        0.1-1 s a pass with 1,000 short jobs starting and ending)."""
        if now < self.next_at:
            return
        self.next_at = now + self.interval
        running = running_jobs()
        launches = stuck.overdue(running, now, self.timeout, self.taken)
        if launches:
            waiting = self.store.waiting_launches([(node, launch_id(j, a, node)) for j, a, node, _ in launches])
            self.taken.update((j, a, node) for (j, a, node, _), still in zip(launches, waiting) if not still)
            drained = {n.name: n.drain_reason for n in nodes}
            for node, (job_id, attempt, waited) in stuck.stuck(launches, waiting).items():
                self._stuck(node, job_id, attempt, waited, now, drained.get(node))
        live = {(job.id, job.attempts) for job in running}
        self.taken = {t for t in self.taken if t[:2] in live}
        for node in nodes:
            if stuck.is_stuck(node.drain_reason):
                found = self.found_at.get(node.name)
                if found is None:  # found by a master before this one: its restart is the newest
                    history = self.store.restarts(node.name)
                    found = max(history) if history else None
                if stuck.back(node, found) and self.store.lift_drain(node.name, node.drain_reason):
                    self.found_at.pop(node.name, None)
                    self.store.incident("unstuck", node.name)
                    log.warning("node %s: registered again after its restart; takes jobs again", node.name)

    def _stuck(self, node: str, job_id: int, attempt: int, waited: float, now: float, drain: str | None) -> None:
        reason = stuck.drain_reason(waited)
        if self.store.transition(job_id, JobState.NODE_FAIL, f"node {node} {reason}", only_from=[JobState.RUNNING],
                                 failed_node=node):
            log.error("job %s: NODE_FAIL (node %s %s)", job_id, node, reason)
        self.store.drop_launch(node, launch_id(job_id, attempt, node))
        if drain is None:  # an admin's drain stays as it is
            self.store.drain(node, reason)
        self.store.incident("stuck", node, job_id, waited_for=round(waited, 1), attempt=attempt)
        self.found_at[node] = now
        self.health.restart_stuck(node, now)
