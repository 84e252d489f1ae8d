#!/usr/bin/env python
"""The Grafana dashboards, as code: `python scripts/dashboards.py` writes grafana/dashboards/*.json.

Each dashboard has a fixed uid, every panel uses the provisioned Prometheus datasource (uid
minihpc-prometheus), and the JSON follows Grafana's current schema. tests/unit/test_dashboards.py
fails when the committed JSON and this file disagree; the dashboard-query tests run every
panel's expressions against a real Prometheus (tests/panels.py, with each variable at "All").

A dashboard may pick jobs and nodes: the variables ``$job_id`` and ``$node`` (several at once,
or All) filter its queries with ``=~``. A job's series carry only its id; legends name it
through ``minihpc_job_info`` (see :func:`named`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "grafana" / "dashboards"
DATASOURCE = {"type": "prometheus", "uid": "minihpc-prometheus"}
SCHEMA_VERSION = 39


def panel(title: str, *exprs: tuple[str, str], kind: str = "timeseries", unit: str = "short",
          description: str = "", stack: bool = False, width: int = 12, height: int = 8) -> dict:
    """A panel; ``exprs`` are (PromQL, legend) pairs. Positions are filled in by dashboard()."""
    field_defaults: dict = {"unit": unit}
    options: dict = {}
    if kind == "timeseries":
        field_defaults["custom"] = {"lineWidth": 1, "fillOpacity": 20 if stack else 0,
                                    "stacking": {"mode": "normal" if stack else "none", "group": "A"}}
        options = {"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
                   "tooltip": {"mode": "multi", "sort": "none"}}
    elif kind == "stat":
        options = {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                   "colorMode": "value", "graphMode": "area", "textMode": "auto"}
    return {
        "type": kind,
        "title": title,
        "description": description,
        "datasource": DATASOURCE,
        "fieldConfig": {"defaults": field_defaults, "overrides": []},
        "options": options,
        "targets": [
            {"refId": chr(ord("A") + i), "datasource": DATASOURCE, "expr": expr, "legendFormat": legend,
             "range": True, "instant": False}
            for i, (expr, legend) in enumerate(exprs)
        ],
        "_size": (width, height),
    }


def variable(name: str, label: str, query: str, sort: int) -> dict:
    """A query variable on the Prometheus datasource: several values or All (``.*``, so jobs
    and nodes that appear later match too), its values looked up again with the time range --
    which the dashboard's auto-refresh moves, so new jobs show up in the list."""
    return {
        "type": "query",
        "name": name,
        "label": label,
        "datasource": DATASOURCE,
        "definition": query,
        "query": query,
        "refresh": 2,
        "multi": True,
        "includeAll": True,
        "allValue": ".*",
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        "options": [],
        "regex": "",
        "sort": sort,
        "hide": 0,
    }


JOB_ID = variable("job_id", "Job", "label_values(minihpc_job_info, job_id)", sort=3)  # 3: numerically
NODE = variable("node", "Node", "label_values(minihpc_node_cpus, node)", sort=1)  # 1: alphabetically


def named(expr: str) -> str:
    """``expr`` (per job, with a job_id label) with the job's name added from minihpc_job_info."""
    return f"{expr} * on(job_id) group_left(name) minihpc_job_info"


def dashboard(uid: str, title: str, description: str, panels: list[dict], variables: tuple[dict, ...] = ()) -> dict:
    x = y = row_height = 0
    for number, p in enumerate(panels, start=1):
        w, h = p.pop("_size")
        if x + w > 24:
            x, y, row_height = 0, y + row_height, 0
        p["id"] = number
        p["gridPos"] = {"x": x, "y": y, "w": w, "h": h}
        x, row_height = x + w, max(row_height, h)
    return {
        "uid": uid,
        "title": title,
        "description": description,
        "tags": ["minihpc"],
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "editable": False,
        "refresh": "5s",
        "time": {"from": "now-30m", "to": "now"},
        "timezone": "browser",
        "templating": {"list": list(variables)},
        "annotations": {"list": []},
        "panels": panels,
    }


def quantiles(metric: str, window: str) -> list[tuple[str, str]]:
    return [(f"histogram_quantile({q}, sum by (le) (rate({metric}_bucket[{window}])))", f"p{int(q * 100)}")
            for q in (0.5, 0.95)]


J = 'job_id=~"$job_id"'
N = 'node=~"$node"'

DASHBOARDS = [
    dashboard("minihpc-cluster", "minihpc / Cluster overview", "Nodes, queue and jobs at a glance.", [
        panel("Nodes up", ('sum(minihpc_nodes{state!="down"})', "up"), kind="stat", width=6, height=4),
        panel("Nodes down", ('minihpc_nodes{state="down"}', "down"), kind="stat", width=6, height=4),
        panel("Jobs running", ('minihpc_jobs{state="RUNNING"}', "running"), kind="stat", width=6, height=4),
        panel("Jobs pending", ('sum(minihpc_queue_pending_jobs)', "pending"), kind="stat", width=6, height=4),
        panel("Nodes by state", ("minihpc_nodes", "{{state}}"), stack=True),
        panel("Queue depth by priority", ("minihpc_queue_pending_jobs", "{{priority}}"), stack=True),
        panel("Jobs ended per minute, by state", ("sum by (state) (rate(minihpc_jobs_ended_total[5m])) * 60", "{{state}}")),
        panel("Job wait (submit to start)", *quantiles("minihpc_job_wait_seconds", "30m"), unit="s"),
        panel("Live jobs by user", ("sum by (user, state) (minihpc_jobs_by_user)", "{{user}} {{state}}"), stack=True,
              description="Pending and running jobs of each user (minihpc_jobs_by_user)."),
        panel("Scheduler: jobs started and startable", ("sum(rate(minihpc_jobs_started_total[5m])) * 60",
                                                        "started per minute"),
              ("minihpc_queue_startable_jobs", "could start now"),
              description="Jobs that could start now stay above 0 only while the scheduler starts nothing "
                          "(the MinihpcQueueStuck alert)."),
        panel("CPUs in the cluster", ("sum(minihpc_node_cpus)", "CPUs"), kind="stat", width=8, height=4),
        panel("Exporters up", ('sum(up{job="minihpc"})', "up"), ('count(up{job="minihpc"})', "known"),
              kind="stat", width=8, height=4),
        panel("Oldest pending job", ("minihpc_queue_oldest_pending_seconds", "waited"), kind="stat", unit="s",
              width=8, height=4),
        panel("Redis memory", ("minihpc_redis_memory_used_bytes", "used"),
              ("minihpc_redis_memory_max_bytes > 0", "maxmemory"), unit="bytes", width=24,
              description="What Redis holds (the whole cluster state) and its maxmemory when it has one "
                          "(the MinihpcRedisMemoryHigh alert)."),
    ]),
    dashboard("minihpc-nodes", "minihpc / Nodes", "Each node's own usage (its container's cgroup; in local "
              "mode its agent's processes), the host beneath it, and GPUs when NVML finds one.", [
        panel("CPU used per node (cores)", (f"rate(minihpc_node_cpu_seconds_total{{{N}}}[1m])", "{{node}}")),
        panel("Memory used per node", (f"minihpc_node_memory_used_bytes{{{N}}}", "{{node}}"), unit="bytes"),
        panel("Network received per node", (f"rate(minihpc_node_network_receive_bytes_total{{{N}}}[1m])", "{{node}}"),
              unit="Bps"),
        panel("Network sent per node", (f"rate(minihpc_node_network_transmit_bytes_total{{{N}}}[1m])", "{{node}}"),
              unit="Bps"),
        panel("Shared volume used", (f"minihpc_node_disk_used_bytes{{{N}}} / minihpc_node_disk_size_bytes", "{{node}}"),
              unit="percentunit"),
        panel("Allocated (1: running a job)", (f"minihpc_node_allocated{{{N}}}", "{{node}}"), stack=True),
        panel("Host CPU busy", (f"minihpc_host_cpu_usage_ratio{{{N}}}", "{{node}}"), unit="percentunit"),
        panel("Host memory used", (f"minihpc_host_memory_used_bytes{{{N}}}", "{{node}}"),
              (f"minihpc_host_memory_total_bytes{{{N}}}", "total ({{node}})"), unit="bytes"),
        panel("Host load (1 min)", (f"minihpc_host_load1{{{N}}}", "{{node}}")),
        panel("GPUs", (f"minihpc_host_gpus{{{N}}}", "GPUs ({{node}})"),
              (f"minihpc_gpu_utilization_ratio{{{N}}}", "{{node}} GPU {{gpu}}"),
              (named(f"minihpc_gpu_utilization_ratio{{{N}}} * on(node, gpu) group_left(job_id) "
                     f"minihpc_gpu_job_info{{{J}}}"), "{{node}} GPU {{gpu}} job {{job_id}} {{name}}"),
              (f"sum by (node) (minihpc_gpu_allocated{{{N}}})", "GPUs allocated ({{node}})"),
              description="GPU utilisation (0-1) through NVML, each GPU a job holds with the job's id and name "
                          "(minihpc_gpu_job_info, minihpc_job_info), and the GPUs allocated per node; only the GPU "
                          "count (0) without a GPU."),
    ], variables=(NODE, JOB_ID)),
    dashboard("minihpc-training", "minihpc / Jobs and training", "Running jobs as their ranks report them "
              "(minihpc.progress); a job's series end when it ends.", [
        panel("Training loss", (named(f"minihpc_job_loss{{{J}}}"), "job {{job_id}} {{name}}")),
        panel("Progress", (named(f"minihpc_job_progress_ratio{{{J}}}"), "job {{job_id}} {{name}}"), unit="percentunit"),
        panel("Samples per second", (named(f"minihpc_job_samples_per_second{{{J}}}"), "job {{job_id}} {{name}}")),
        panel("Step time by phase", (named(f"minihpc_job_step_phase_seconds{{{J}}}"),
                                     "job {{job_id}} {{name}} {{phase}}"), unit="s", stack=True),
        panel("Gradient norm", (named(f"minihpc_job_grad_norm{{{J}}}"), "job {{job_id}} {{name}}")),
        panel("Seconds since the last step", (named(f"(time() - minihpc_job_last_progress_timestamp_seconds{{{J}}})"),
                                              "job {{job_id}} {{name}}"), unit="s"),
        panel("Compute time per step by rank", (named(f"minihpc_job_rank_step_seconds{{{J}, {N}}}"),
                                                "job {{job_id}} {{name}} rank {{rank}} ({{node}})"),
              unit="s", description="Each rank's own work per step, smoothed (not the all-reduce, where fast "
              "ranks wait for slow ones)."),
        panel("Rank slowdown (straggler ratio)", (named(f"minihpc_job_rank_slowdown_ratio{{{J}, {N}}}"),
                                                  "job {{job_id}} {{name}} rank {{rank}} ({{node}})"),
              description="A rank's compute time per step over the median of the other ranks'; above 1.5 "
              "the MinihpcStraggler alert fires."),
        panel("Step", (named(f"minihpc_job_step{{{J}}}"), "job {{job_id}} {{name}}"), kind="stat", width=8, height=4),
        panel("Attempt", (named(f"minihpc_job_attempt{{{J}}}"), "job {{job_id}} {{name}}"), kind="stat", width=8,
              height=4),
        panel("Job run time (ended attempts)", *quantiles("minihpc_job_run_seconds", "30m"), unit="s", width=8,
              height=4, kind="stat"),
    ], variables=(JOB_ID, NODE)),
    dashboard("minihpc-recovery", "minihpc / Recovery and incidents", "Node failures, restarts by the health "
              "monitor, requeued jobs and how long recovery took.", [
        panel("Nodes down", ('minihpc_nodes{state="down"}', "down"), ('minihpc_nodes{state="drain"}', "drained")),
        panel("Node up (1) or DOWN (0), and drained", (f"minihpc_node_up{{{N}}}", "up {{node}}"),
              (f"minihpc_node_drained{{{N}}}", "drained {{node}}"),
              description="Each node's heartbeat verdict and whether it is drained (MinihpcNodeFlapping, "
                          "MinihpcNodeDrained)."),
        panel("Node restarts (last hour)", (f"increase(minihpc_node_restarts_total{{{N}}}[1h])", "{{node}}")),
        panel("Jobs requeued (last hour)", ("increase(minihpc_job_requeues_total[1h])", "requeues")),
        panel("Jobs lost to node failures (last hour)", ('increase(minihpc_jobs_ended_total{state="NODE_FAIL"}[1h])',
                                                          "NODE_FAIL")),
        panel("Node recovery (down to heartbeating)", *quantiles("minihpc_node_recovery_seconds", "1h"), unit="s"),
        panel("Attempts of running jobs", (named(f"minihpc_job_attempt{{{J}}}"), "job {{job_id}} {{name}}"),
              width=24),
    ], variables=(NODE, JOB_ID)),
]


def render(d: dict) -> str:
    return json.dumps(d, indent=2) + "\n"


def main() -> int:
    check = "--check" in sys.argv
    stale = []
    OUT.mkdir(parents=True, exist_ok=True)
    for d in DASHBOARDS:
        path = OUT / f"{d['uid'].removeprefix('minihpc-')}.json"
        if check:
            if not path.exists() or path.read_text() != render(d):
                stale.append(path.name)
        else:
            path.write_text(render(d))
            print(f"wrote {path.relative_to(OUT.parent.parent)} ({len(d['panels'])} panels)")
    if check and stale:
        print(f"stale dashboards: {', '.join(stale)}; run python scripts/dashboards.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
