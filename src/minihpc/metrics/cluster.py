"""The cluster's exporter, served by the master: read from Redis at scrape time.

- nodes by state, queue depth by priority, jobs by state;
- counters and histograms the cluster keeps as things happen (minihpc.state.stats): jobs ended by state,
  requeues, node restarts, wait and run times, node recovery times;
- training metrics of *running* jobs, from their progress reports (minihpc.progress): step,
  progress, loss, samples/s, step time by phase, gradient norm; and for multi-node jobs each
  reporting rank's smoothed compute time per step and its ratio to the other ranks'
  (minihpc.core.straggler: the MinihpcStraggler alert). A job's series carry its id in the
  ``job`` label and vanish when it ends, so the label stays bounded.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from minihpc.core import straggler
from minihpc.core.models import JobState, NodeState, Priority
from minihpc.job.progress import PHASES
from minihpc.state.store import Store

TRAINING = {
    "loss": ("minihpc_job_loss", "Training loss at the job's latest reported step."),
    "samples_per_second": ("minihpc_job_samples_per_second", "Training throughput, all ranks together."),
    "grad_norm": ("minihpc_job_grad_norm", "Gradient L2 norm at the latest reported step."),
}


class ClusterCollector:
    def __init__(self, store: Store):
        self.store = store

    def collect(self) -> Iterator[Metric]:
        store = self.store
        nodes = store.node_statuses()
        pending = store.pending_jobs()
        running = store.running_jobs()

        family = GaugeMetricFamily("minihpc_nodes", "Nodes by state.", labels=["state"])
        for state in NodeState:
            family.add_metric([state.value], sum(1 for n in nodes if n.state is state))
        yield family
        family = GaugeMetricFamily("minihpc_queue_pending_jobs", "Jobs waiting, by priority.", labels=["priority"])
        for priority in Priority:
            family.add_metric([priority.value], sum(1 for j in pending if j.priority is priority))
        yield family
        family = GaugeMetricFamily("minihpc_jobs", "Jobs not yet ended, by state.", labels=["state"])
        family.add_metric([JobState.PENDING.value], len(pending))
        family.add_metric([JobState.RUNNING.value], len(running))
        yield family
        now = time.time()
        family = GaugeMetricFamily("minihpc_queue_oldest_pending_seconds", "How long the oldest pending job has "
                                   "waited (0 when none).")
        family.add_metric([], max((now - j.submitted_at for j in pending), default=0.0))
        yield family

        counters = store.counters()
        family = CounterMetricFamily("minihpc_jobs_ended", "Jobs that ended, by final state.", labels=["state"])
        for state in JobState:
            if state.terminal:
                family.add_metric([state.value], counters["jobs_ended"].get(state.value, 0))
        yield family
        family = CounterMetricFamily("minihpc_job_requeues", "Jobs requeued after a node failure.")
        family.add_metric([], sum(counters["job_requeues"].values()))
        yield family
        family = CounterMetricFamily("minihpc_node_restarts", "Restarts of DOWN nodes by the health monitor.",
                                     labels=["node"])
        for node in nodes:
            family.add_metric([node.name], counters["node_restarts"].get(node.name, 0))
        yield family
        for name, doc in (("job_wait_seconds", "Submit to first start of each job."),
                          ("job_run_seconds", "Run time of each attempt that ended."),
                          ("node_recovery_seconds", "A node DOWN until it heartbeats again.")):
            buckets, total = store.histogram(name)
            family = HistogramMetricFamily(f"minihpc_{name}", doc)
            family.add_metric([], buckets, total)
            yield family
        yield from self._training(running)

    def _training(self, running) -> Iterator[Metric]:
        labels = ["job", "name"]
        step = GaugeMetricFamily("minihpc_job_step", "Latest reported training step.", labels=labels)
        ratio = GaugeMetricFamily("minihpc_job_progress_ratio", "Latest step over total steps (0-1).", labels=labels)
        seen = GaugeMetricFamily("minihpc_job_last_progress_timestamp_seconds", "When the job last reported "
                                 "progress (Unix time).", labels=labels)
        attempt = GaugeMetricFamily("minihpc_job_attempt", "The running attempt (1 + requeues).", labels=labels)
        phases = GaugeMetricFamily("minihpc_job_step_phase_seconds", "Time per step in each phase (data, "
                                   "forward, backward, allreduce, optimizer) at the latest report.",
                                   labels=[*labels, "phase"])
        extra = {key: GaugeMetricFamily(name, doc, labels=labels) for key, (name, doc) in TRAINING.items()}
        reports = self.store.progress(j.id for j in running)
        for job in running:
            values = [str(job.id), job.name]
            attempt.add_metric(values, job.attempts)
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
        yield from (step, ratio, seen, attempt, phases, *extra.values())
        yield from self._ranks(running)

    def _ranks(self, running) -> Iterator[Metric]:
        labels = ["job", "name", "rank", "node"]
        pace = GaugeMetricFamily("minihpc_job_rank_step_seconds", "A rank's own compute time per step (data, "
                                 "forward, backward, optimizer; not the all-reduce), smoothed.", labels=labels)
        slow = GaugeMetricFamily("minihpc_job_rank_slowdown_ratio", "A rank's smoothed compute time per step "
                                 "over the median of the other ranks' (above 1.5: a straggler).", labels=labels)
        for job in running:
            if job.nodes_requested < 2:
                continue
            series = self.store.series(job.id, last=straggler.WINDOW * job.nodes_requested)
            for rank in straggler.paces(series, job.attempts):
                values = [str(job.id), job.name, str(rank.rank), rank.node]
                pace.add_metric(values, rank.seconds)
                if rank.ratio is not None and rank.reports >= straggler.MIN_REPORTS:
                    slow.add_metric(values, rank.ratio)
        yield from (pace, slow)
