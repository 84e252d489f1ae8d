"""A crash is an event, not a silence: what a node's watcher (the local supervisor, the restart
proxy's view of Docker's events) reports when an agent's process or container ends, and the
rules that turn such a report into a DOWN node at once instead of after its heartbeat lapses.

Heartbeats stay the judge of what only silence reveals (a paused or cut-off node).
"""

from __future__ import annotations

import signal
from dataclasses import dataclass

from minihpc.core.outcome import signal_name


@dataclass(frozen=True)
class Crash:
    node: str
    at: float
    """When the agent ended (wall clock, as precise as the watcher knows it)."""
    cause: str
    """One phrase for the incident and the log: 'its process was killed by SIGKILL'."""


def applies(last_beat: float | None, crash: Crash) -> bool:
    """Whether ``crash`` is about the agent whose heartbeat is ``last_beat``: an agent that
    beat after the crash is a newer one (a restart) and stays up. None: no beat, nothing to end."""
    return last_beat is not None and last_beat <= crash.at


def exit_phrase(returncode: int | None) -> str:
    """How a process ended, from its return code as subprocess reports it (negative: killed by
    that signal); None when the watcher could not learn it (not its child)."""
    if returncode is None:
        return "its process ended"
    if returncode < 0:
        return f"its process was killed by {signal_name(-returncode)}"
    return f"its process exited with status {returncode}"


def container_phrase(exit_code: int | None) -> str:
    """How a container ended, from the exit code Docker reports (128 + n: signal n, whether the
    container or the agent in it was killed)."""
    if exit_code is None:
        return "its container stopped"
    if exit_code - 128 in {s.value for s in signal.Signals}:  # 128 + a named signal (not 255, an error)
        return f"its container exited with code {exit_code} ({signal_name(exit_code - 128)})"
    return f"its container exited with code {exit_code}"


def docker_death(event: dict) -> dict | None:
    """A Docker ``die`` event of a Compose service's container -> {"node", "at", "exit_code"}
    (the service is the node's name), or None when it is not one."""
    attributes = (event.get("Actor") or {}).get("Attributes") or {}
    service = attributes.get("com.docker.compose.service")
    if event.get("Type") != "container" or event.get("Action") != "die" or not service:
        return None
    if attributes.get("com.docker.compose.oneoff", "False") == "True":
        return None  # `compose run worker-node-1 ...`: not the node
    at = event["timeNano"] / 1e9 if event.get("timeNano") else float(event.get("time", 0))
    code = attributes.get("exitCode")
    return {"node": service, "at": at, "exit_code": int(code) if code not in (None, "") else None}


def systemd_phrase(result: str, code: str, status: str) -> str | None:
    """How a unit's main process ended, from what systemd gives ExecStopPost ($SERVICE_RESULT,
    $EXIT_CODE, $EXIT_STATUS); None for a clean stop (the agent said it was leaving itself) and
    when systemd said nothing (run by hand, not as ExecStopPost: nothing is known to have ended)."""
    if result in ("success", ""):
        return None
    if code in ("killed", "dumped"):
        name = status if status.startswith("SIG") else f"SIG{status}"
        return f"its unit's process was killed by {name}" + (" (core dumped)" if code == "dumped" else "")
    if code == "exited":
        return f"its unit's process exited with status {status}"
    return f"its unit stopped ({result or 'unknown result'})"
