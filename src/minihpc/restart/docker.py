"""Compose's restarter: POST /restart/<node> to the cluster's restart proxy
(:mod:`minihpc.restart.proxy`) with the restart token; the proxy restarts that node's container
of this Compose project if Redis shows it DOWN, and nothing else. It also follows the proxy's
GET /events, so the master hears of a node container's death the moment Docker reports it."""

from __future__ import annotations

import json
import logging
import threading
import urllib.error
import urllib.request
from collections.abc import Callable

from minihpc.core.crashes import Crash, container_phrase
from minihpc.restart.spec import RestartRefused
from minihpc.restart.token import bearer

log = logging.getLogger(__name__)

EVENTS_SILENCE = 35.0
"""Seconds without even a keepalive line (the proxy sends one every 10 s) before the stream
is taken for dead and opened again."""
RECONNECT_MAX = 30.0
"""Most seconds between attempts to reach the proxy's event stream (doubling from 1)."""


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
            message = f"restart proxy refused {node}: {exc.code} {_message(exc.read())}"
            if exc.code == 429:
                raise RestartRefused(message, _seconds(exc.headers.get("Retry-After"))) from None
            raise RuntimeError(message) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise RuntimeError(f"restart proxy at {self.url} did not answer for {node} ({reason})") from None

    def watch(self, report: Callable[[Crash], None], stop: threading.Event) -> None:
        """Report each node container's death from the proxy's event stream, in a thread,
        reconnecting while ``stop`` is not set (heartbeats cover any gap)."""
        threading.Thread(target=self._follow, args=(report, stop), name="crash-events", daemon=True).start()

    def _follow(self, report: Callable[[Crash], None], stop: threading.Event) -> None:
        delay, failing = 1.0, False
        while not stop.is_set():
            request = urllib.request.Request(f"{self.url}/events", headers={"Authorization": bearer(self.token)})
            try:
                with urllib.request.urlopen(request, timeout=EVENTS_SILENCE) as resp:
                    log.info("master: following node containers' deaths at %s/events", self.url)
                    delay, failing = 1.0, False
                    for line in resp:
                        if not line.strip():
                            continue  # the proxy's keepalive
                        death = json.loads(line)
                        report(Crash(str(death["node"]), float(death["at"]), container_phrase(death.get("exit_code"))))
            except urllib.error.HTTPError as exc:
                if not failing:
                    log.warning("master: restart proxy refused its event stream: %s %s", exc.code, exc.reason)
                failing = True
            except Exception as exc:  # noqa: BLE001 - any failure: heartbeats cover the gap, retry
                if not failing:
                    log.warning("master: restart proxy's event stream unavailable (%s: %s); retrying",
                                type(exc).__name__, getattr(exc, "reason", exc))
                failing = True
            stop.wait(delay)
            delay = min(delay * 2, RECONNECT_MAX)


def _seconds(value: str | None) -> float | None:
    """A Retry-After header's delay in seconds (the proxy sends seconds, never an HTTP date)."""
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def _message(body: bytes) -> str:
    """The proxy's {"message": ...}, or the start of whatever else answered."""
    try:
        return str(json.loads(body)["message"])[:300]
    except (ValueError, KeyError, TypeError):
        return body.decode(errors="replace")[:200]
