#!/usr/bin/env python
"""The Grafana dashboards, as code: `make dashboards` writes grafana/dashboards/*.json.

Each dashboard has a fixed uid, every panel uses the provisioned Prometheus datasource (uid
minihpc-prometheus), and the JSON follows Grafana's current schema. tests/unit/test_dashboards.py
fails when the committed JSON and this file disagree; the dashboard-query tests run every
panel's expressions against a real Prometheus.
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


def dashboard(uid: str, title: str, description: str, panels: list[dict]) -> dict:
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
        "templating": {"list": []},
        "annotations": {"list": []},
        "panels": panels,
    }


def quantiles(metric: str, window: str) -> list[tuple[str, str]]:
    return [(f"histogram_quantile({q}, sum by (le) (rate({metric}_bucket[{window}])))", f"p{int(q * 100)}")
            for q in (0.5, 0.95)]


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
        panel("CPUs in the cluster", ("sum(minihpc_node_cpus)", "CPUs"), kind="stat", width=8, height=4),
        panel("Exporters up", ('sum(up{job="minihpc"})', "up"), ('count(up{job="minihpc"})', "known"),
              kind="stat", width=8, height=4),
        panel("Oldest pending job", ("minihpc_queue_oldest_pending_seconds", "waited"), kind="stat", unit="s",
              width=8, height=4),
    ]),
    dashboard("minihpc-nodes", "minihpc / Nodes", "Each node's own usage (its container's cgroup; in local "
              "mode its agent's processes), the host beneath it, and GPUs when NVML finds one.", [
        panel("CPU used per node (cores)", ("rate(minihpc_node_cpu_seconds_total[1m])", "{{node}}")),
        panel("Memory used per node", ("minihpc_node_memory_used_bytes", "{{node}}"), unit="bytes"),
        panel("Network received per node", ("rate(minihpc_node_network_receive_bytes_total[1m])", "{{node}}"),
              unit="Bps"),
        panel("Network sent per node", ("rate(minihpc_node_network_transmit_bytes_total[1m])", "{{node}}"),
              unit="Bps"),
        panel("Shared volume used", ("minihpc_node_disk_used_bytes / minihpc_node_disk_size_bytes", "{{node}}"),
              unit="percentunit"),
        panel("Allocated (1: running a job)", ("minihpc_node_allocated", "{{node}}"), stack=True),
        panel("Host CPU busy", ("minihpc_host_cpu_usage_ratio", "{{node}}"), unit="percentunit"),
        panel("Host memory used", ("minihpc_host_memory_used_bytes", "{{node}}"),
              ("minihpc_host_memory_total_bytes", "total ({{node}})"), unit="bytes"),
        panel("Host load (1 min)", ("minihpc_host_load1", "{{node}}")),
        panel("GPUs", ("minihpc_host_gpus", "GPUs ({{node}})"), ("minihpc_gpu_utilization_ratio", "{{node}} GPU {{gpu}}"),
              ("minihpc_gpu_utilization_ratio * on(node, gpu) group_left(job_id) minihpc_gpu_job_info",
               "{{node}} GPU {{gpu}} job {{job_id}}"),
              ("sum by (node) (minihpc_gpu_allocated)", "GPUs allocated ({{node}})"),
              description="GPU utilisation (0-1) through NVML, each GPU a job holds with its job id "
                          "(minihpc_gpu_job_info), and the GPUs allocated per node; only the GPU count (0) "
                          "without a GPU."),
    ]),
    dashboard("minihpc-training", "minihpc / Jobs and training", "Running jobs as their ranks report them "
              "(minihpc.progress); a job's series end when it ends.", [
        panel("Training loss", ("minihpc_job_loss", "job {{job}} {{name}}")),
        panel("Progress", ("minihpc_job_progress_ratio", "job {{job}} {{name}}"), unit="percentunit"),
        panel("Samples per second", ("minihpc_job_samples_per_second", "job {{job}}")),
        panel("Step time by phase", ("minihpc_job_step_phase_seconds", "job {{job}} {{phase}}"), unit="s", stack=True),
        panel("Gradient norm", ("minihpc_job_grad_norm", "job {{job}}")),
        panel("Seconds since the last step", ("time() - minihpc_job_last_progress_timestamp_seconds", "job {{job}}"),
              unit="s"),
        panel("Compute time per step by rank", ("minihpc_job_rank_step_seconds", "job {{job}} rank {{rank}} ({{node}})"),
              unit="s", description="Each rank's own work per step, smoothed (not the all-reduce, where fast "
              "ranks wait for slow ones)."),
        panel("Rank slowdown (straggler ratio)", ("minihpc_job_rank_slowdown_ratio", "job {{job}} rank {{rank}} ({{node}})"),
              description="A rank's compute time per step over the median of the other ranks'; above 1.5 "
              "the MinihpcStraggler alert fires."),
        panel("Step", ("minihpc_job_step", "job {{job}}"), kind="stat", width=8, height=4),
        panel("Attempt", ("minihpc_job_attempt", "job {{job}}"), kind="stat", width=8, height=4),
        panel("Job run time (ended attempts)", *quantiles("minihpc_job_run_seconds", "30m"), unit="s", width=8,
              height=4, kind="stat"),
    ]),
    dashboard("minihpc-recovery", "minihpc / Recovery and incidents", "Node failures, restarts by the health "
              "monitor, requeued jobs and how long recovery took.", [
        panel("Nodes down", ('minihpc_nodes{state="down"}', "down"), ('minihpc_nodes{state="drain"}', "drained")),
        panel("Node restarts (last hour)", ("increase(minihpc_node_restarts_total[1h])", "{{node}}")),
        panel("Jobs requeued (last hour)", ("increase(minihpc_job_requeues_total[1h])", "requeues")),
        panel("Jobs lost to node failures (last hour)", ('increase(minihpc_jobs_ended_total{state="NODE_FAIL"}[1h])',
                                                          "NODE_FAIL")),
        panel("Node recovery (down to heartbeating)", *quantiles("minihpc_node_recovery_seconds", "1h"), unit="s"),
        panel("Attempts of running jobs", ("minihpc_job_attempt", "job {{job}}")),
    ]),
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
        print(f"stale dashboards: {', '.join(stale)}; run make dashboards", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
