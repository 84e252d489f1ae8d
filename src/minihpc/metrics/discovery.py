"""Prometheus file-based service discovery written from the node registry.

The master rewrites the targets file whenever the set of nodes changes, so Prometheus follows
nodes as they join and leave without a restart (``file_sd_configs`` in config/prometheus.yml).
"""

from __future__ import annotations

import json
import os

from minihpc.core.models import NodeStatus
from minihpc.machine import files


def targets(nodes: list[NodeStatus], cluster: str | None = None) -> list[dict]:
    """One file-SD group per node that runs an exporter, labelled with its node name, and one
    for the master's cluster exporter (``component="cluster"``) when it runs one."""
    groups = [
        {"targets": [n.metrics], "labels": {"node": n.name, "component": "node"}}
        for n in sorted(nodes, key=lambda n: n.name)
        if n.metrics
    ]
    if cluster:
        groups.append({"targets": [cluster], "labels": {"component": "cluster"}})
    return groups


def write_atomically(path: str, groups: list[dict]) -> bool:
    """Write ``groups`` to ``path`` unless it already holds them; True when it changed.
    Prometheus may read at any moment, so the file is replaced by a rename, never rewritten."""
    text = json.dumps(groups, indent=2, sort_keys=True) + "\n"
    try:
        with open(path, encoding="utf-8") as fh:
            if fh.read() == text:
                return False
    except FileNotFoundError:
        pass
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    files.replace(path, text.encode("utf-8"))
    return True
