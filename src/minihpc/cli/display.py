"""What the CLI prints: plain-text tables (left-aligned columns, two spaces apart, like
squeue), times, and the rows of the queue, node and incident views."""

from __future__ import annotations

import json
import time

from minihpc.client.jobs import elapsed
from minihpc.core import dependency as dependencies
from minihpc.core.arrays import collapse_pending
from minihpc.core.models import Job, JobState, NodeStatus
from minihpc.core.outcome import format_exit
from minihpc.core.partitions import Partitions
from minihpc.core.parsing import compress_hostlist, format_duration, format_elapsed, human_bytes
from minihpc.core.slurm_formats import View


def render(headers: list[str], rows: list[list[str]], header: bool = True) -> str:
    cells = [headers] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
    return "\n".join(lines if header else lines[1:])


def clock(ts: float) -> str:
    """HH:MM:SS.mmm, for event streams."""
    return time.strftime("%H:%M:%S", time.localtime(ts)) + f".{int(ts * 1000) % 1000:03d}"


def timestamp(ts: float | None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(ts)) if ts else "Unknown"


def json_text(data) -> str:
    return json.dumps(data, indent=2, sort_keys=True)


def print_json(data) -> None:
    print(json_text(data))


QUEUE_HEADERS = ["JOBID", "NAME", "USER", "ST", "TIME", "NODES", "NODELIST(REASON)"]


def queue_rows(jobs: list[Job], now: float) -> list[list[str]]:
    """One row a job, but one for an array's pending tasks that wait alike (``12_[4-15]``)."""
    jobs, names = collapse_pending(jobs)
    return [
        [names.get(j.id, j.array_name), j.name[:20], j.user[:10], j.state.code, format_duration(elapsed(j, now)),
         str(len(j.nodes) or j.node_range), _nodelist_or_reason(j)]
        for j in jobs
    ]


def by_start(jobs: list[Job], view: View) -> list[Job]:
    """squeue --start's order: soonest start first (a running job's actual start, a pending
    one's expected start); jobs with none last, in queue order."""
    def start(job: Job) -> float | None:
        return view.starts.get(job.id) if job.state is JobState.PENDING else job.started_at

    return sorted(jobs, key=lambda j: (start(j) is None, start(j) or 0.0))


def show_lines(job: Job) -> list[str]:
    """``show``'s lines for one job (an array task's with its ArrayJobId and ArrayTaskId)."""
    rows = [
        ("JobId", job.id), ("ArrayJobId", job.array_job_id), ("ArrayTaskId", job.array_task_id),
        ("JobName", job.name), ("UserId", job.user), ("JobState", job.state.value),
        ("Reason", job.reason), ("ExitCode", format_exit(job.exit_code, job.signal)),
        ("Priority", job.priority.value), ("Attempts", job.queue_attempts),
        ("NumNodes", len(job.nodes) or job.node_range),
        ("NodeRange", f"{job.node_range}{' (elastic)' if job.elastic else ''}" if job.max_nodes else None),
        ("Resizes", job.resizes if job.elastic else None),
        ("NtasksPerNode", job.tasks_per_node), ("NodeList", ",".join(job.nodes) or "(null)"),
        ("TimeLimit", format_duration(job.time_limit)), ("Requeues", job.requeues),
        ("Dependency", dependencies.to_text(job.dependency)),
        ("SubmitTime", timestamp(job.submitted_at)), ("StartTime", timestamp(job.started_at)),
        ("EndTime", timestamp(job.ended_at)), ("Command", " ".join([job.script_source, *job.args])),
        ("Script", f"{job.script} (sha256 {job.script_sha256[:12]})"), ("WorkDir", job.workdir),
    ]
    return [f"{key:>14} = {value}" for key, value in rows
            if key not in ("ArrayJobId", "ArrayTaskId", "NodeRange", "Resizes") or value is not None]


HISTORY_HEADERS = ["JOBID", "JOBNAME", "USER", "STATE", "EXITCODE", "ELAPSED", "NNODES", "NODELIST", "ATTEMPTS"]


def history_rows(jobs: list[Job], now: float) -> list[list[str]]:
    return [
        [j.array_name, j.name[:20], j.user[:10], j.state.value, format_exit(j.exit_code, j.signal),
         format_elapsed(elapsed(j, now)), str(len(j.nodes) or j.nodes_requested),
         compress_hostlist(j.nodes) or "None assigned", str(j.queue_attempts)]
        for j in jobs
    ]


def _nodelist_or_reason(job: Job) -> str:
    if job.state is JobState.PENDING:
        return f"({job.reason})"
    return compress_hostlist(job.nodes) if job.nodes else f"({job.reason})"


def node_partitions(name: str, partitions: Partitions) -> str:
    """sinfo's PARTITION for a node: its partitions, the default marked ``*`` (``main*,debug``)."""
    return ",".join(p + ("*" if p == partitions.default else "") for p in partitions.of_node(name)) or "-"


def gres(node: NodeStatus) -> str:
    """sinfo's GRES: ``gpu:2``, or ``(null)`` for a node without GPUs."""
    return f"gpu:{node.gpus}" if node.gpus else "(null)"


def nodes_table(nodes: list[NodeStatus], now: float, partitions: Partitions | None = None) -> str:
    partitions = partitions or Partitions()
    rows = [
        [n.name, n.state.value, node_partitions(n.name, partitions), str(n.cpus), human_bytes(n.memory_bytes),
         gres(n), str(n.job) if n.job is not None else "-",
         f"{now - n.last_heartbeat:.1f}s ago" if n.last_heartbeat else "never"]
        for n in nodes
    ]
    headers = ["NODE", "STATE", "PARTITION", "CPUS", "MEMORY", "GRES", "JOB", "LAST-HEARTBEAT"]
    if any(n.simulated for n in nodes):  # simulated nodes (core.simulation) say so, beside real ones
        headers.append("SIMULATED")
        rows = [[*row, "yes" if n.simulated else "no"] for row, n in zip(rows, nodes)]
    return render(headers, rows)


LONG_HEADERS = ["NODE", "STATE", "CPUS", "CPU-LIMIT", "MEMORY", "GPUS", "GFLOPS", "ALLREDUCE-GB/S", "CPU-MODEL",
                "GPU-MODEL"]
"""``nodes --long``: what each node is made of and was measured to do; the models, which hold
spaces, last."""


def long_rows(nodes: list[NodeStatus]) -> list[list[str]]:
    """``nodes --long``'s rows, ``-`` for what is not known (never measured, no limit, no GPU)."""
    def shown(value: float | None, spec: str) -> str:
        return "-" if value is None else format(value, spec)

    def rate(value: float | None, spec: str) -> str:
        # A slow node's figure keeps its digits (0.043, never 0.0): a rate shown as 0 reads as broken.
        return shown(value, spec if value is None or value >= 1 else ".3f")

    return [[n.name, n.state.value, str(n.cpus), shown(n.cpu_limit, "g"), human_bytes(n.memory_bytes), str(n.gpus),
             rate(n.gflops, ".1f"), rate(n.allreduce_gbps, ".2f"), n.cpu_model or "-", n.gpu_model or "-"]
            for n in nodes]


def detail_value(v) -> str:
    """An incident's detail as ``key=value`` shows it: a float to 0.1, a phrase in quotes (so
    ``reason="node worker-node-2 failed"`` reads as one value)."""
    if isinstance(v, float):
        return f"{v:.1f}"
    return json.dumps(v) if isinstance(v, str) and " " in v else str(v)


def incident_line(i: dict) -> str:
    extra = " ".join(f"{k}={detail_value(v)}" for k, v in sorted(i.items())
                     if k not in ("at", "kind", "node", "job") and v is not None)
    job = f"job {i['job']}" if i.get("job") is not None else ""
    return f"{clock(i['at'])}  {i['kind']:<15} {i.get('node') or '-':<16} {job:<8} {extra}".rstrip()
