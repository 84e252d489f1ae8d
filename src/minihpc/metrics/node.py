"""A node's Prometheus exporter: what the node has, what it and its host use, and whether it
runs a job.

``minihpc_node_*`` is the node itself: its container's cgroup in Compose (every container
shares one kernel, so system-wide figures would be the host's), the agent's process tree in
local mode. ``minihpc_host_*`` is the machine underneath, as psutil sees it. GPUs appear as
``minihpc_gpu_*`` when NVML finds one. What the node is and was measured to do (its CPU and GPU
models, CPU limit, FLOP/s and all-reduce bandwidth) comes from its record as registered, the
same figures ``minihpc nodes --long`` shows (:mod:`minihpc.core.measurements`).

Each node agent serves it on ``--metrics-port`` and records ``host:port`` in its node hash, so
the master can write Prometheus's file-based service discovery from the node registry
(:func:`minihpc.metrics.discovery.targets`).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator

import psutil
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from minihpc.core.models import NodeStatus
from minihpc.machine import resources


class NodeCollector:
    """Read at scrape time; ``current_job`` says which job holds the node (None: idle),
    ``record`` what its registry record holds (None: unknown now)."""

    def __init__(self, node: str, current_job: Callable[[], int | None],
                 shared_dir: Callable[[], str | None] = lambda: None,
                 record: Callable[[], NodeStatus | None] = lambda: None, container: bool | None = None,
                 held_gpus: Callable[[], tuple[int, list[int]] | None] = lambda: None):
        self.node = node
        self.held_gpus = held_gpus
        self.current_job = current_job
        self.shared_dir = shared_dir
        self.record = record
        self.container = resources.in_container() if container is None else container
        self.nvml = resources.NVML()
        psutil.cpu_percent(None)  # prime the counter: the first call always returns 0.0

    def _gauge(self, name: str, doc: str, value: float, **labels: str) -> GaugeMetricFamily:
        family = GaugeMetricFamily(name, doc, labels=["node", *labels])
        family.add_metric([self.node, *labels.values()], value)
        return family

    def _counter(self, name: str, doc: str, value: float) -> CounterMetricFamily:
        family = CounterMetricFamily(name, doc, labels=["node"])
        family.add_metric([self.node], value)
        return family

    def _own(self) -> tuple[float | None, int | None, int | None, float | None]:
        """(CPU seconds, memory bytes, memory limit, CPU quota) of the node itself."""
        if self.container:
            used, limit = resources.cgroup_memory()
            return resources.cgroup_cpu_seconds(), used, limit, resources.cpu_quota()
        cpu, rss = resources.tree_usage(os.getpid())
        return cpu, rss, None, None

    def collect(self) -> Iterator[Metric]:
        cpus = psutil.cpu_count() or 1
        memory = psutil.virtual_memory()
        cpu_seconds, used, limit, quota = self._own()
        yield self._gauge("minihpc_node_cpus", "CPUs the node may use (its quota, else the host's).", quota or cpus)
        if cpu_seconds is not None:
            yield self._counter("minihpc_node_cpu_seconds_total", "CPU time the node has used (its cgroup, or "
                                "in local mode its agent's live process tree).", cpu_seconds)
        if used is not None:
            yield self._gauge("minihpc_node_memory_used_bytes", "Memory the node uses (cgroup, minus "
                              "inactive file cache; local mode: resident set of its processes).", used)
        yield self._gauge("minihpc_node_memory_limit_bytes", "Memory the node may use (its limit, else the "
                          "host's).", limit or memory.total)
        yield self._gauge("minihpc_node_allocated", "1 while a job holds the node, else 0.",
                          1.0 if self.current_job() is not None else 0.0)
        net = psutil.net_io_counters()
        if net is not None:  # the container's own network namespace in Compose
            yield self._counter("minihpc_node_network_receive_bytes_total", "Bytes received.", net.bytes_recv)
            yield self._counter("minihpc_node_network_transmit_bytes_total", "Bytes sent.", net.bytes_sent)
        shared = self.shared_dir()
        if shared and os.path.isdir(shared):
            disk = shutil.disk_usage(shared)
            yield self._gauge("minihpc_node_disk_used_bytes", "Used bytes of the shared volume's filesystem.",
                              disk.used, mount="shared")
            yield self._gauge("minihpc_node_disk_size_bytes", "Size of the shared volume's filesystem.",
                              disk.total, mount="shared")

        record = self.record()
        yield from self._hardware(record)
        yield from self._gpu_holders(record)

        yield self._gauge("minihpc_host_cpu_usage_ratio", "Host CPU busy fraction since the last scrape (0-1).",
                          psutil.cpu_percent(None) / 100.0)
        yield self._gauge("minihpc_host_cpus", "CPUs of the host.", cpus)
        yield self._gauge("minihpc_host_load1", "Host one-minute load average.", psutil.getloadavg()[0])
        yield self._gauge("minihpc_host_memory_total_bytes", "Memory of the host.", memory.total)
        yield self._gauge("minihpc_host_memory_used_bytes", "Host memory in use (total minus available).",
                          memory.total - memory.available)

        gpus = self.nvml.gpus()
        yield self._gauge("minihpc_host_gpus", "GPUs NVML finds (0 without a GPU or its driver).", len(gpus))
        if gpus:
            util = GaugeMetricFamily("minihpc_gpu_utilization_ratio", "GPU busy fraction (NVML).", labels=["node", "gpu"])
            mem = GaugeMetricFamily("minihpc_gpu_memory_used_bytes", "GPU memory in use (NVML).", labels=["node", "gpu"])
            total = GaugeMetricFamily("minihpc_gpu_memory_total_bytes", "GPU memory (NVML).", labels=["node", "gpu"])
            for gpu in gpus:
                labels = [self.node, str(gpu["index"])]
                if gpu["utilization"] is not None:
                    util.add_metric(labels, gpu["utilization"])
                if gpu["memory_used"] is not None:
                    mem.add_metric(labels, gpu["memory_used"])
                    total.add_metric(labels, gpu["memory_total"])
            yield from (util, mem, total)

    def _gpu_holders(self, record: NodeStatus | None) -> Iterator[Metric]:
        """Which of the node's GPUs a job holds: ``minihpc_gpu_allocated`` (0/1) per registered
        GPU, and one ``minihpc_gpu_job_info`` series per held GPU naming the job -- joined to the
        NVML series on node and gpu, so the job's id is not a label of every sample."""
        devices = record.gpu_devices if record is not None else []
        held = self.held_gpus()
        job, mine = held if held else (None, [])
        allocated = GaugeMetricFamily("minihpc_gpu_allocated", "1 while a job holds this GPU of the node, else 0.",
                                      labels=["node", "gpu"])
        info = GaugeMetricFamily("minihpc_gpu_job_info", "The job holding this GPU (1 per held GPU).",
                                 labels=["node", "gpu", "job_id"])
        for gpu in devices:
            allocated.add_metric([self.node, str(gpu)], 1.0 if gpu in mine else 0.0)
        for gpu in mine:
            info.add_metric([self.node, str(gpu), str(job)], 1.0)
        if devices:
            yield allocated
        if mine:
            yield info

    def _hardware(self, record: NodeStatus | None) -> Iterator[Metric]:
        """What the node registered and what was measured of it; each figure only when known."""
        if record is None:
            return
        yield self._gauge("minihpc_node_info", "The node's hardware as it registered, in labels; always 1.", 1.0,
                          cpu_model=record.cpu_model, gpu_model=record.gpu_model)
        if record.cpu_limit is not None:
            yield self._gauge("minihpc_node_cpu_limit_cpus", "CPUs the node's cgroup quota allows (only when it "
                              "has one).", record.cpu_limit)
        # The record keeps GFLOP/s and GB/s (as `minihpc nodes --long` shows them); Prometheus
        # wants base units: FLOP/s and bytes per second.
        if record.gflops is not None:
            yield self._gauge("minihpc_node_compute_flops", "FLOP/s of float32 matrix multiplies on the node "
                              "(its speed probe at agent start, or its last benchmark job).", record.gflops * 1e9)
        if record.allreduce_gbps is not None:
            yield self._gauge("minihpc_node_allreduce_busbw_bytes_per_second", "All-reduce bus bandwidth (bytes "
                              "per second) of the last benchmark job the node ran in (jobs/benchmark.py).",
                              record.allreduce_gbps * 1e9)
