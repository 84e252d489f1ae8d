"""Compose's restarter: POST /restart/<node> to the cluster's restart proxy
(:mod:`minihpc.restart.proxy`) with the restart token; the proxy restarts that node's container
of this Compose project if Redis shows it DOWN, and nothing else."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from minihpc.restart.token import bearer


class DockerRestarter:
    def __init__(self, url: str, token: str, timeout: float = 60.0):
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout

    def restart(self, node: str) -> None:
        request = urllib.request.Request(f"{self.url}/restart/{node}", method="POST", data=b"",
                                         headers={"Authorization": bearer(self.token)})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as resp:
                resp.read()
        except urllib.error.HTTPError as exc:
            raise RuntimeError(f"restart proxy refused {node}: {exc.code} {_message(exc.read())}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise RuntimeError(f"restart proxy at {self.url} did not answer for {node} ({reason})") from None


def _message(body: bytes) -> str:
    """The proxy's {"message": ...}, or the start of whatever else answered."""
    try:
        return str(json.loads(body)["message"])[:300]
    except (ValueError, KeyError, TypeError):
        return body.decode(errors="replace")[:200]
