"""Compose's restarter: POST /restart/<node> to the cluster's restart proxy
(:mod:`minihpc.restart.proxy`), which restarts that node's container of this Compose project
and nothing else."""

from __future__ import annotations

import urllib.error
import urllib.request


class DockerRestarter:
    def __init__(self, url: str, timeout: float = 60.0):
        self.url = url.rstrip("/")
        self.timeout = timeout

    def restart(self, node: str) -> None:
        request = urllib.request.Request(f"{self.url}/restart/{node}", method="POST", data=b"")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as resp:
                resp.read()
        except urllib.error.HTTPError as exc:
            raise RuntimeError(f"restart proxy refused {node}: {exc.code} {exc.read().decode()[:200]}") from None
