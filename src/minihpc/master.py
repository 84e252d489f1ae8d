"""The master's loop: enforce time limits, notice lost nodes, and start what the plan says.

Every decision is made by the pure functions in scheduler.py; this module only reads the
state, applies the decisions through the store, and waits for the next event.
"""

from __future__ import annotations

import logging
import os
import threading
import time

from rq import Queue
from rq.serializers import JSONSerializer

from . import discovery, keys, scheduler
from .config import Settings
from .launcher import LaunchSpec
from .models import Job, JobState, NodeStatus
from .health import RestartPolicy, next_lapse
from .monitor import HealthMonitor
from .outcome import held_failure
from .restart import Restarter
from .store import REDIS_ERRORS, Store, connect

log = logging.getLogger(__name__)

LAUNCH_TASK = "minihpc.agent.launch_task"
LAUNCH_RESULT_TTL = 600
LAUNCH_FAILURE_TTL = 86400


def launch_specs(job: Job, nodes: dict[str, NodeStatus], cluster: dict[str, str]) -> list[LaunchSpec]:
    """The per-node launch tasks of a job that has just been given ``job.nodes``."""
    log_dir = os.path.join(cluster["log_dir"], f"job-{job.id}")
    checkpoint_dir = os.path.join(cluster["checkpoint_dir"], f"job-{job.id}")
    master_addr = nodes[job.nodes[0]].addr
    return [
        LaunchSpec(
            job_id=job.id,
            attempt=job.attempts,
            name=job.name,
            node=name,
            node_rank=rank,
            nodes=list(job.nodes),
            master_addr=master_addr,
            tasks_per_node=job.tasks_per_node,
            script=job.script,
            args=list(job.args),
            workdir=job.workdir,
            source_dir=os.path.dirname(job.script_source) if job.script_source.startswith("/") else "",
            log_path=os.path.join(log_dir, f"{name}.log"),
            checkpoint_dir=checkpoint_dir,
            data_dir=cluster.get("data_dir", ""),
        )
        for rank, name in enumerate(job.nodes)
    ]


class Master:
    """``sd_file``: where to keep Prometheus's file-SD targets (None: nowhere)."""

    def __init__(self, settings: Settings, sd_file: str | None = None, restarter: Restarter | None = None):
        self.settings = settings
        self.store = Store(connect(settings.redis_url))
        self.stop = threading.Event()
        self.sd_file = sd_file
        self.live_heartbeats: list[float | None] = []
        self.cluster_metrics: str | None = None
        policy = RestartPolicy(
            backoff_max=settings.restart_backoff_max,
            budget=settings.restart_budget,
            window=settings.restart_window,
        )
        self.monitor = HealthMonitor(self.store, restarter, policy, settings.node_timeout)

    def publish_targets(self, nodes: list[NodeStatus]) -> None:
        if self.sd_file and discovery.write_atomically(self.sd_file, discovery.targets(nodes, self.cluster_metrics)):
            log.info("master: Prometheus targets now %s", ", ".join(n.name for n in nodes if n.metrics))

    def _dispatcher(self, nodes: dict[str, NodeStatus], cluster: dict[str, str]):
        def dispatch(pipe, job: Job) -> None:
            for spec in launch_specs(job, nodes, cluster):
                Queue(
                    keys.node_queue(spec.node), connection=self.store.r, serializer=JSONSerializer
                ).enqueue_call(
                    LAUNCH_TASK,
                    kwargs=spec.to_payload(),
                    timeout=-1,
                    result_ttl=LAUNCH_RESULT_TTL,
                    failure_ttl=LAUNCH_FAILURE_TTL,
                    job_id=f"minihpc-{job.id}-{job.attempts}-{spec.node}",
                    description=f"job {job.id} attempt {job.attempts} on {spec.node}",
                    pipeline=pipe,
                )

        return dispatch

    def step(self, now: float) -> scheduler.Plan:
        """One pass: end running jobs that must end (time limit, lost node, no progress, a held
        failure), requeue node failures, then schedule. The ending checks share one snapshot:
        every transition is guarded by the job's current state, so a job two checks pick is
        ended once."""
        store = self.store
        nodes = store.node_statuses()
        self.live_heartbeats = [n.last_heartbeat for n in nodes if n.alive]
        self.publish_targets(nodes)
        self.monitor.step(nodes, now)
        by_name = {n.name: n for n in nodes}
        running = store.running_jobs()
        for job_id in scheduler.overdue(running, now):
            if store.transition(job_id, JobState.TIMEOUT, "TimeLimit", only_from=[JobState.RUNNING]):
                log.info("job %s: TIMEOUT (time limit reached)", job_id)
        for job_id, node in scheduler.lost(running, by_name).items():
            if store.transition(
                job_id,
                JobState.NODE_FAIL,
                f"node {node} failed",
                only_from=[JobState.RUNNING],
                failed_node=node,
            ):
                log.warning("job %s: NODE_FAIL (node %s lost)", job_id, node)
        progress = store.progress(j.id for j in running)
        for job_id, silent in scheduler.stalled(running, progress, now, self.settings.progress_timeout).items():
            if store.transition(
                job_id, JobState.NODE_FAIL, f"no progress for {silent:.0f}s", only_from=[JobState.RUNNING]
            ):
                store.incident("stalled", None, job_id, silent_for=silent)
                log.warning("job %s: no progress for %.0fs; tearing it down to requeue it", job_id, silent)
        grace = self.settings.node_timeout + 2 * self.settings.heartbeat_interval
        for job in running:
            if job.failing_since is not None:
                outcome = held_failure(job, store.job_results(job.id, job.attempts), now, grace)
                if outcome is not None and store.end_held_failure(job, outcome):
                    log.info("job %s: FAILED (exit %s on %s, every node up)", job.id, outcome.exit_code, outcome.failed_node)
        self.requeue_node_failures()
        running = store.running_jobs()
        pending = store.pending_jobs()
        deps = store.job_states({d for job in pending for d in job.dependency})
        plan = scheduler.plan(pending, nodes, running, deps, now)
        for job_id, reason in plan.cancels.items():
            if store.transition(job_id, JobState.CANCELLED, reason, only_from=[JobState.PENDING]):
                log.info("job %s: CANCELLED (%s)", job_id, reason)
        if plan.starts:
            dispatch = self._dispatcher(by_name, store.cluster_info())
            for job_id, chosen in plan.starts:
                job = store.start(job_id, chosen, dispatch)
                if job is not None:
                    log.info("job %s: RUNNING on %s (attempt %s)", job_id, ",".join(chosen), job.attempts)
        current = {job.id: job.reason for job in pending}
        store.set_reasons({i: r for i, r in plan.reasons.items() if current.get(i) != r})
        return plan

    def requeue_node_failures(self) -> None:
        """Every job a node failure ended goes back to the queue (front of its priority) while
        it has requeues left; its ranks on the surviving nodes are torn down by their agents,
        which see the attempt is no longer running."""
        limit = self.settings.max_requeues
        for job in self.store.node_failed_jobs():
            if job.state is not JobState.NODE_FAIL:
                self.store.settle_node_failure(job.id)
            elif scheduler.should_requeue(job, limit):
                reason = f"Requeued ({job.reason}; requeue {job.requeues + 1} of {limit})"
                if self.store.requeue(job.id, job.attempts, reason):
                    self.store.incident("requeued", job.failed_node, job.id, attempt=job.attempts)
                    log.warning("job %s: requeued after attempt %s (%s)", job.id, job.attempts, job.reason)
            else:
                self.store.settle_node_failure(job.id)
                log.warning("job %s: NODE_FAIL for good, %s requeues used", job.id, job.requeues)

    def pause(self) -> float:
        """How long to sleep until the next pass: the scheduler interval, or less when a node's
        heartbeat lapses sooner (a little after, so its alive key is gone by then)."""
        lapse = next_lapse(self.live_heartbeats, time.time(), self.settings.node_timeout)
        interval = self.settings.scheduler_interval
        return interval if lapse is None else min(interval, lapse + 0.02)

    def run(self) -> None:
        log.info("master: scheduling (redis %s)", self.settings.redis_url.split("@")[-1])
        self.reconcile_pending = True
        last_prune = 0.0
        while not self.stop.is_set():
            try:
                if self.reconcile_pending:
                    for job_id, what in self.store.reconcile().items():
                        log.warning("master: reconciled job %s (%s)", job_id, what)
                    self.reconcile_pending = False
                self.step(time.time())
                if time.time() - last_prune > 60:
                    self.store.prune_history()
                    last_prune = time.time()
            except REDIS_ERRORS as exc:
                log.warning("master: Redis unreachable (%s); retrying", exc)
                time.sleep(self.settings.scheduler_interval)
                continue
            except Exception:  # noqa: BLE001 - a bad pass must not stop the cluster
                log.exception("master: scheduling pass failed")
                time.sleep(self.settings.scheduler_interval)
            try:
                self.store.wait_event(self.pause())
            except REDIS_ERRORS:
                time.sleep(self.settings.scheduler_interval)
