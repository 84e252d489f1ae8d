"""The cluster's counters and histograms, kept in Redis where things happen and read by the
cluster exporter (minihpc.metrics.cluster) at scrape time. Monotonic, so Prometheus's rate() and
histogram_quantile() work on them; they survive a master restart with the rest of the state.

Writes go on the caller's pipeline, in the same transaction as the change they count.
"""

from __future__ import annotations

import math

from minihpc.state import keys
from minihpc.state.connect import text, texts

HISTOGRAMS: dict[str, tuple[float, ...]] = {
    "job_wait_seconds": (1, 5, 15, 30, 60, 300, 900, 3600, 4 * 3600),
    "job_run_seconds": (5, 15, 30, 60, 300, 900, 3600, 4 * 3600, 24 * 3600),
    "node_recovery_seconds": (1, 2, 3, 5, 7.5, 10, 15, 20, 30, 60, 120),
}
"""Bucket upper bounds (seconds); +Inf is implied."""
COUNTERS = ("jobs_started", "jobs_ended", "job_requeues", "job_resizes", "node_restarts")


def bucket(name: str, value: float) -> int:
    """Index of the first bucket whose bound holds ``value`` (len(bounds) for +Inf)."""
    bounds = HISTOGRAMS[name]
    return next((i for i, le in enumerate(bounds) if value <= le), len(bounds))


def observe(pipe, name: str, value: float) -> None:
    key = keys.stats_histogram(name)
    pipe.hincrby(key, str(bucket(name, value)), 1)
    pipe.hincrbyfloat(key, "sum", float(value))
    pipe.hincrby(key, "count", 1)


def count(pipe, name: str, label: str = "") -> None:
    assert name in COUNTERS, name
    pipe.hincrby(keys.STATS_COUNTERS, f"{name}|{label}", 1)


def read_counters(r) -> dict[str, dict[str, int]]:
    """{counter: {label value: count}}."""
    out: dict[str, dict[str, int]] = {name: {} for name in COUNTERS}
    for field, value in r.hgetall(keys.STATS_COUNTERS).items():
        name, _, label = text(field).partition("|")
        out.setdefault(name, {})[label] = int(value)
    return out


def read_histogram(r, name: str) -> tuple[list[tuple[str, float]], float]:
    """Cumulative buckets [(le, count), ..., ("+Inf", total)] and the sum, as Prometheus wants."""
    raw = {k: float(v) for k, v in texts(r.hgetall(keys.stats_histogram(name))).items()}
    bounds = HISTOGRAMS[name]
    cumulative, running = [], 0.0
    for i, le in enumerate([*bounds, math.inf]):
        running += raw.get(str(i), 0.0)
        cumulative.append(("+Inf" if le == math.inf else _le(le), running))
    return cumulative, raw.get("sum", 0.0)


def _le(value: float) -> str:
    return str(float(value))
