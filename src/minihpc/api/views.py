"""What the API returns for a job and a node: the records' JSON plus what a page shows."""

from __future__ import annotations

from minihpc.client.jobs import elapsed
from minihpc.core.models import Job, NodeStatus
from minihpc.core.outcome import format_exit
from minihpc.core.queue_rows import Panel, Row


def job_json(job: Job, now: float) -> dict:
    out = job.to_json()
    out["exit"] = format_exit(job.exit_code, job.signal)
    out["elapsed"] = elapsed(job, now)
    out.pop("script", None)  # the spool path is the cluster's business
    return out


def row_json(row: Row, now: float, shown=lambda job: job) -> dict:
    """A queue or history row: its first job's fields (as ``shown`` lets its reader see them:
    client.reading.redacted), the id it shows (``row_id``), its jobs as scancel takes them
    (``ref``) and how many they are (``count``)."""
    return dict(job_json(shown(row.job), now), row_id=row.shown, ref=row.ref, count=row.count)


def panel_json(panel: Panel, limit: int, now: float, shown=lambda job: job) -> dict:
    return {"rows": [row_json(r, now, shown) for r in panel.rows], "total_rows": panel.total_rows,
            "total_jobs": panel.total_jobs, "shown_jobs": panel.shown_jobs, "more_jobs": panel.more_jobs,
            "complete": panel.complete, "limit": limit}


def node_json(node: NodeStatus, now: float) -> dict:
    return {
        "name": node.name, "state": node.state.value, "addr": node.addr, "cpus": node.cpus,
        "memory_bytes": node.memory_bytes, "gpus": node.gpus, "gpu_devices": node.gpu_devices, "job": node.job,
        "drain_reason": node.drain_reason,
        "cpu_model": node.cpu_model, "cpu_limit": node.cpu_limit, "gpu_model": node.gpu_model, "gflops": node.gflops,
        "allreduce_gbps": node.allreduce_gbps, "last_heartbeat": node.last_heartbeat,
        "heartbeat_age": None if node.last_heartbeat is None else max(0.0, now - node.last_heartbeat),
        "simulated": node.simulated,
    }
