"""The cluster's exporter, served by the master: read from Redis at scrape time.

- nodes by state, and each node up and drained (the MinihpcNodeDrained and MinihpcNodeFlapping
  alerts); queue depth by priority, jobs by state, and the pending jobs the scheduler's plan
  would start right now (with jobs started: MinihpcQueueStuck);
- counters and histograms the cluster keeps as things happen (minihpc.state.stats): jobs started
  and ended, requeues, node restarts, wait and run times, node recovery times;
- Redis's memory and its maxmemory (MinihpcRedisMemoryHigh), so no Redis exporter is needed;
- one ``minihpc_job_info{job_id, name, user, partition, state}`` series per running job and per
  pending job up to JOB_INFO_PENDING_MAX (the next to start first), the only series with a
  job's free-text fields: others join it on ``job_id``; ``minihpc_jobs_by_user{user, state}``
  counts every live job, however deep the queue (a series per user, not per job);
- training metrics of *running* jobs, from their progress reports (minihpc.progress): step,
  progress, loss, samples/s, step time by phase, gradient norm; and for multi-node jobs each
  reporting rank's smoothed compute time per step and its ratio to the other ranks'
  (minihpc.core.straggler: the MinihpcStraggler alert). A job's series carry its id in the
  ``job_id`` label (never ``job``: Prometheus's own target label) and vanish when it ends, so
  the label stays bounded.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Iterator

import redis
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from minihpc.core import dependency, replan, scheduler, straggler
from minihpc.core.errors import ClusterUnavailable
from minihpc.core.models import Job, JobState, NodeState, NodeStatus, Priority
from minihpc.core.partitions import Partitions
from minihpc.core.requirements import published_cpus
from minihpc.job.progress import PHASES
from minihpc.state.pending import PendingCache
from minihpc.state.store import Store

log = logging.getLogger(__name__)

TRAINING = {
    "loss": ("minihpc_job_loss", "Training loss at the job's latest reported step."),
    "samples_per_second": ("minihpc_job_samples_per_second", "Training throughput, all ranks together."),
    "grad_norm": ("minihpc_job_grad_norm", "Gradient L2 norm at the latest reported step."),
}

JOB_INFO = ("job_id", "name", "user", "partition", "state")
"""Labels of ``minihpc_job_info``: the job's id and what describes it, free text included."""
JOB_INFO_PENDING_MAX = 1000
"""Pending jobs given a minihpc_job_info series, in queue order: a queue of 100,000 made as many
series per scrape (issue 38); minihpc_jobs_by_user counts them all."""


class ClusterCollector:
    def __init__(self, store: Store):
        self.store = store
        # Pending records as the master keeps them: a scrape of a deep queue reads only the
        # records the changes stream names since the last scrape (state.pending, issue 38).
        self.pending = PendingCache()  # scrapes may overlap (one thread each): it locks
        # The last plan's count of startable jobs, and what it was made from (core.replan): a
        # scrape plans the queue again only when that changed, as the master does -- planning
        # 100,000 held jobs each scrape (every 5 s) cost the master's process a second each.
        self.planned = replan.LastPlan()
        self.startable = 0
        self._plan_lock = threading.Lock()

    def collect(self) -> Iterator[Metric]:
        store = self.store
        revision = store.jobs_revision()  # before the jobs: a write after it is planned next time
        nodes = store.node_statuses()
        pending = self.pending.read(store)
        running = store.running_jobs()
        try:
            cluster = store.cluster_info()
        except ClusterUnavailable:
            cluster = None  # no master has published the cluster yet: nothing to plan with
        yield from self._nodes(nodes)
        yield from self._queue(nodes, pending, running, cluster, time.time(), revision)
        yield from self._counters(nodes)
        yield from self._redis()
        yield self._job_info(pending, running, Partitions.from_record(cluster or {}))
        yield self._by_user(pending, running)
        yield from self._training(running)

    def _nodes(self, nodes: list[NodeStatus]) -> Iterator[Metric]:
        family = GaugeMetricFamily("minihpc_nodes", "Nodes by state.", labels=["state"])
        for state in NodeState:
            family.add_metric([state.value], sum(1 for n in nodes if n.state is state))
        yield family
        up = GaugeMetricFamily("minihpc_node_up", "1 while the node heartbeats, else 0 (DOWN).", labels=["node"])
        drained = GaugeMetricFamily("minihpc_node_drained", "1 while the node is drained (it takes no new jobs), "
                                    "whether idle, running a job or DOWN; else 0.", labels=["node"])
        for node in nodes:
            up.add_metric([node.name], 1.0 if node.alive else 0.0)
            drained.add_metric([node.name], 1.0 if node.drain_reason is not None else 0.0)
        yield from (up, drained)

    def _queue(self, nodes: list[NodeStatus], pending: list[Job], running: list[Job], cluster: dict[str, str] | None,
               now: float, revision: int) -> Iterator[Metric]:
        family = GaugeMetricFamily("minihpc_queue_pending_jobs", "Jobs waiting, by priority.", labels=["priority"])
        for priority in Priority:
            family.add_metric([priority.value], sum(1 for j in pending if j.priority is priority))
        yield family
        family = GaugeMetricFamily("minihpc_jobs", "Jobs not yet ended, by state.", labels=["state"])
        family.add_metric([JobState.PENDING.value], len(pending))
        family.add_metric([JobState.RUNNING.value], len(running))
        yield family
        family = GaugeMetricFamily("minihpc_queue_oldest_pending_seconds", "How long the oldest pending job has "
                                   "waited (0 when none).")
        family.add_metric([], max((now - j.submitted_at for j in pending), default=0.0))
        yield family
        if cluster is None:
            return
        family = GaugeMetricFamily("minihpc_queue_startable_jobs", "Pending jobs the scheduler's plan would start "
                                   "now (nodes free for them, nothing else to wait for); above 0 for more than "
                                   "a pass only while the scheduler starts nothing.")
        family.add_metric([], self._startable(nodes, pending, running, cluster, now, revision))
        yield family

    def _startable(self, nodes: list[NodeStatus], pending: list[Job], running: list[Job], cluster: dict[str, str],
                   now: float, revision: int) -> int:
        """How many jobs a plan starts now: planned again only when due (core.replan)."""
        current = replan.signature(revision, nodes, cluster)
        with self._plan_lock:
            if self.planned.due(current, now):
                deps = self.store.dependency_states({d for job in pending for d in dependency.refs(job.dependency)})
                plan = scheduler.plan(pending, nodes, running, deps, now, Partitions.from_record(cluster),
                                      published_cpus(cluster))
                self.startable = len(plan.starts)
                self.planned.made(current, now, replan.next_begin(pending, now))
            return self.startable

    def _counters(self, nodes: list[NodeStatus]) -> Iterator[Metric]:
        counters = self.store.counters()
        family = CounterMetricFamily("minihpc_jobs_started", "Job attempts started (a requeued job's new attempt "
                                     "counts again).")
        family.add_metric([], sum(counters["jobs_started"].values()))
        yield family
        family = CounterMetricFamily("minihpc_jobs_ended", "Jobs that ended, by final state.", labels=["state"])
        for state in JobState:
            if state.terminal:
                family.add_metric([state.value], counters["jobs_ended"].get(state.value, 0))
        yield family
        family = CounterMetricFamily("minihpc_job_requeues", "Jobs requeued after a node failure.")
        family.add_metric([], sum(counters["job_requeues"].values()))
        yield family
        family = CounterMetricFamily("minihpc_job_resizes", "Elastic jobs that went on with other nodes "
                                     "without the queue (a node left, or they grew).")
        family.add_metric([], sum(counters.get("job_resizes", {}).values()))
        yield family
        family = CounterMetricFamily("minihpc_node_restarts", "Restarts of DOWN nodes by the health monitor.",
                                     labels=["node"])
        for node in nodes:
            family.add_metric([node.name], counters["node_restarts"].get(node.name, 0))
        yield family
        for name, doc in (("job_wait_seconds", "Submit to first start of each job."),
                          ("job_run_seconds", "Run time of each attempt that ended."),
                          ("node_recovery_seconds", "A node DOWN until it heartbeats again.")):
            buckets, total = self.store.histogram(name)
            family = HistogramMetricFamily(f"minihpc_{name}", doc)
            family.add_metric([], buckets, total)
            yield family

    def _redis(self) -> Iterator[Metric]:
        try:
            used, limit = self.store.redis_memory()
        except redis.ResponseError as exc:  # a Redis user without INFO: the rest of the scrape still comes
            log.warning("cluster exporter: cannot read Redis's memory (%s)", exc)
            return
        family = GaugeMetricFamily("minihpc_redis_memory_used_bytes", "Memory Redis uses for its data (INFO "
                                   "memory: used_memory).")
        family.add_metric([], used)
        yield family
        family = GaugeMetricFamily("minihpc_redis_memory_max_bytes", "Redis's maxmemory: writes fail beyond it "
                                   "(noeviction); 0 when it has none.")
        family.add_metric([], limit)
        yield family

    def _job_info(self, pending: list[Job], running: list[Job], partitions: Partitions) -> Metric:
        family = GaugeMetricFamily("minihpc_job_info", "One series per pending or running job, always 1: its "
                                   "name, user, partition and state, for joins on job_id "
                                   "(* on(job_id) group_left(name) minihpc_job_info).", labels=list(JOB_INFO))
        for job in [*running, *scheduler.queue_order(pending, running)[:JOB_INFO_PENDING_MAX]]:
            family.add_metric([str(job.id), job.name, job.user, partitions.effective(job.partition),
                               job.state.value], 1.0)
        return family

    @staticmethod
    def _by_user(pending: list[Job], running: list[Job]) -> Metric:
        family = GaugeMetricFamily("minihpc_jobs_by_user", "Pending and running jobs of each user.",
                                   labels=["user", "state"])
        for (user, state), count in sorted(Counter((j.user, j.state.value) for j in [*running, *pending]).items()):
            family.add_metric([user, state], count)
        return family

    def _training(self, running: list[Job]) -> Iterator[Metric]:
        labels = ["job_id"]
        step = GaugeMetricFamily("minihpc_job_step", "Latest reported training step.", labels=labels)
        ratio = GaugeMetricFamily("minihpc_job_progress_ratio", "Latest step over total steps (0-1).", labels=labels)
        seen = GaugeMetricFamily("minihpc_job_last_progress_timestamp_seconds", "When the job last reported "
                                 "progress (Unix time).", labels=labels)
        attempt = GaugeMetricFamily("minihpc_job_attempt", "The running attempt (1 + requeues).", labels=labels)
        size = GaugeMetricFamily("minihpc_job_nodes", "Nodes the running job has now (an elastic job's changes "
                                 "with its resizes; its range is -N MIN-MAX).", labels=labels)
        phases = GaugeMetricFamily("minihpc_job_step_phase_seconds", "Time per step in each phase (data, "
                                   "forward, backward, allreduce, optimizer) at the latest report.",
                                   labels=[*labels, "phase"])
        extra = {key: GaugeMetricFamily(name, doc, labels=labels) for key, (name, doc) in TRAINING.items()}
        reports = self.store.progress(j.id for j in running)
        for job in running:
            values = [str(job.id)]
            attempt.add_metric(values, job.queue_attempts)
            size.add_metric(values, len(job.nodes))
            report = reports.get(job.id)
            if report is None:
                continue
            step.add_metric(values, report["step"])
            seen.add_metric(values, report["at"])
            if report.get("total"):
                ratio.add_metric(values, min(1.0, report["step"] / report["total"]))
            for key, family in extra.items():
                if key in report:
                    family.add_metric(values, report[key])
            for phase in PHASES:
                if f"{phase}_seconds" in report:
                    phases.add_metric([*values, phase], report[f"{phase}_seconds"])
        yield from (step, ratio, seen, attempt, size, phases, *extra.values())
        yield from self._ranks(running)

    def _ranks(self, running: list[Job]) -> Iterator[Metric]:
        labels = ["job_id", "rank", "node"]
        pace = GaugeMetricFamily("minihpc_job_rank_step_seconds", "A rank's own compute time per step (data, "
                                 "forward, backward, optimizer; not the all-reduce), smoothed.", labels=labels)
        slow = GaugeMetricFamily("minihpc_job_rank_slowdown_ratio", "A rank's smoothed compute time per step "
                                 "over the median of the other ranks' (above 1.5: a straggler).", labels=labels)
        for job in running:
            if len(job.nodes) < 2:
                continue
            series = self.store.series(job.id, last=straggler.WINDOW * len(job.nodes))
            for rank in straggler.paces(series, job.attempts):
                values = [str(job.id), str(rank.rank), rank.node]
                pace.add_metric(values, rank.seconds)
                if rank.ratio is not None and rank.reports >= straggler.MIN_REPORTS:
                    slow.add_metric(values, rank.ratio)
        yield from (pace, slow)
