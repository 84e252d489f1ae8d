"""What the API returns for a job and a node: the records' JSON plus what a page shows."""

from __future__ import annotations

from minihpc.client.jobs import elapsed
from minihpc.core.models import Job, NodeStatus
from minihpc.core.outcome import format_exit


def job_json(job: Job, now: float) -> dict:
    out = job.to_json()
    out["exit"] = format_exit(job.exit_code, job.signal)
    out["elapsed"] = elapsed(job, now)
    out.pop("script", None)  # the spool path is the cluster's business
    return out


def node_json(node: NodeStatus, now: float) -> dict:
    return {
        "name": node.name, "state": node.state.value, "addr": node.addr, "cpus": node.cpus,
        "memory_bytes": node.memory_bytes, "gpus": node.gpus, "gpu_devices": node.gpu_devices, "job": node.job,
        "drain_reason": node.drain_reason,
        "cpu_model": node.cpu_model, "cpu_limit": node.cpu_limit, "gpu_model": node.gpu_model, "gflops": node.gflops,
        "allreduce_gbps": node.allreduce_gbps, "last_heartbeat": node.last_heartbeat,
        "heartbeat_age": None if node.last_heartbeat is None else max(0.0, now - node.last_heartbeat),
    }
