"""Serving a collector over HTTP for Prometheus: each exporter on its own registry."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.process_collector import ProcessCollector


def serve(port: int, collector, addr: str = "0.0.0.0", process: bool = True, extra=()) -> int:
    """Serve /metrics on ``addr:port`` from a background thread; returns the port (port 0
    picks a free one, as local mode does for its many agents on one host). ``extra``: more
    collectors (the master's pass-time histogram)."""
    registry = CollectorRegistry()
    for each in (collector, *extra):
        registry.register(each)
    if process:
        ProcessCollector(registry=registry)
    server, _thread = start_http_server(port, addr=addr, registry=registry)
    return server.server_port
