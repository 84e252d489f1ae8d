"""A node's Prometheus exporter: what the node has, what it uses, and whether it runs a job.

Each node agent serves it on ``--metrics-port`` and records ``host:port`` in its node hash, so
the master can write Prometheus's file-based service discovery from the node registry
(:func:`minihpc.discovery.targets`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import psutil
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.process_collector import ProcessCollector


class NodeCollector:
    """Read at scrape time; ``current_job`` says which job holds the node (None: idle)."""

    def __init__(self, node: str, current_job: Callable[[], int | None]):
        self.node = node
        self.current_job = current_job
        psutil.cpu_percent(None)  # prime the counter: the first call always returns 0.0

    def _gauge(self, name: str, doc: str, value: float) -> GaugeMetricFamily:
        family = GaugeMetricFamily(name, doc, labels=["node"])
        family.add_metric([self.node], value)
        return family

    def collect(self) -> Iterator[Metric]:
        memory = psutil.virtual_memory()
        yield self._gauge("minihpc_node_cpus", "CPUs the node offers.", psutil.cpu_count() or 1)
        yield self._gauge(
            "minihpc_node_cpu_usage_ratio", "CPU busy fraction since the last scrape (0-1).",
            psutil.cpu_percent(None) / 100.0,
        )
        yield self._gauge("minihpc_node_load1", "One-minute load average.", psutil.getloadavg()[0])
        yield self._gauge("minihpc_node_memory_total_bytes", "Memory the node has.", memory.total)
        yield self._gauge(
            "minihpc_node_memory_used_bytes", "Memory in use (total minus available).",
            memory.total - memory.available,
        )
        yield self._gauge(
            "minihpc_node_allocated", "1 while a job holds the node, else 0.",
            1.0 if self.current_job() is not None else 0.0,
        )


def serve(port: int, collector: NodeCollector, addr: str = "0.0.0.0") -> int:
    """Serve /metrics on ``addr:port`` from a background thread; returns the port (port 0
    picks a free one, as local mode does for its many agents on one host)."""
    registry = CollectorRegistry()
    registry.register(collector)
    ProcessCollector(registry=registry)
    server, _thread = start_http_server(port, addr=addr, registry=registry)
    return server.server_port
