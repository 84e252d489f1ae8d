"""What the restart proxy will restart, as pure decisions: which names, in which state, how
often, and never the caller's own container.

Each refusal is a message naming the subject, what was seen and what was expected; None means
the rule lets the restart through. :mod:`minihpc.restart.proxy` applies them in order and turns
each refusal into its HTTP status (403, 409, 429).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from minihpc.core import stuck
from minihpc.core.models import NodeState

NODE_NAME = re.compile(r"^(master-node|worker-node-[0-9]{1,4})$")
"""The Compose services that are minihpc nodes; nothing else is ever restarted."""

CONTROL_PLANE = frozenset({"control", "restart-proxy", "api", "redis", "prometheus", "grafana"})
"""Services the proxy names in its refusal: the cluster's control plane and monitoring. (They
fail NODE_NAME too; listing them makes the refusal say why and keeps them out if the node
naming rule ever widens.)"""

NODE_INTERVAL = 10.0
"""Seconds between two restarts of one node, at least (the health monitor itself waits its
boot grace, 20 s, before restarting a node again)."""

MAX_RESTARTS = 10
"""Restarts of all nodes together within RESTART_WINDOW, at most."""

RESTART_WINDOW = 60.0


@dataclass(frozen=True)
class RateLimits:
    node_interval: float = NODE_INTERVAL
    max_restarts: int = MAX_RESTARTS
    window: float = RESTART_WINDOW

    def __post_init__(self):
        if self.node_interval < 0 or self.window <= 0 or self.max_restarts < 1:
            raise ValueError(f"rate limits {self} must have node_interval >= 0, window > 0 and max_restarts >= 1")


History = Sequence[tuple[float, str]]
"""(time, node) of every restart the proxy made, oldest first."""


def name_refusal(node: str) -> str | None:
    """Why ``node`` is not a name the proxy restarts, or None for a node's name."""
    if node in CONTROL_PLANE:
        return f"{node} is part of the control plane; only nodes (master-node, worker-node-N) are restarted"
    if not NODE_NAME.match(node):
        return f"{node[:80]!r} is not a node name; expected master-node or worker-node-N"
    return None


BOOTING = 15.0
"""Seconds after Docker started a node's container again by itself (its restart policy, after
the agent died) during which the proxy leaves it to boot rather than restart it once more."""


def booting(running: bool, started_at: float | None, last_beat: float | None, now: float) -> bool:
    """Whether the node's container is a new start still booting: running, started after the
    dead agent's last heartbeat (Docker's restart policy brought it back) and less than BOOTING
    ago. A crash reported at once would otherwise have the health monitor restart it twice."""
    return (running and started_at is not None and last_beat is not None and started_at > last_beat
            and now - started_at < BOOTING)


def state_refusal(node: str, state: NodeState | None, drain_reason: str | None = None) -> str | None:
    """Why ``node`` in ``state`` (None: not registered) is not restarted: only DOWN is, or one
    the master drained as stuck (up, but taking no work: core.stuck)."""
    if state is None:
        return f"{node} is not registered in the cluster, not DOWN; not restarting"
    if state is not NodeState.DOWN and not stuck.is_stuck(drain_reason):
        return f"{node} is {state.value}, not DOWN; not restarting"
    return None


def container_ips(container: dict) -> set[str]:
    """Every address a container has on its networks, from the Engine's container list."""
    networks = ((container.get("NetworkSettings") or {}).get("Networks") or {}).values()
    return {ip for net in networks for ip in (net.get("IPAddress"), net.get("GlobalIPv6Address")) if ip}


def caller_refusal(node: str, container: dict, caller: str) -> str | None:
    """Why ``node``'s container is not restarted for a request from address ``caller``: it is
    the caller's own container (a master must never restart the container it runs in)."""
    if caller and caller in container_ips(container):
        return (f"{node} ({container.get('Id', '')[:12]}) is the container this request came from "
                f"({caller}); a master never restarts the container it runs in")
    return None


def wait_before(now: float, history: History, node: str, limits: RateLimits) -> float:
    """Seconds from ``now`` until both limits let ``node`` be restarted (0.0: at once); the
    proxy's Retry-After on a 429."""
    waits = [0.0]
    last = max((t for t, n in history if n == node), default=None)
    if last is not None:
        waits.append(last + limits.node_interval - now)
    recent = sorted(t for t, _ in history if now - t < limits.window)
    if len(recent) >= limits.max_restarts:
        waits.append(recent[len(recent) - limits.max_restarts] + limits.window - now)
    return max(waits)


def allow(now: float, history: History, node: str, limits: RateLimits) -> tuple[bool, str]:
    """(True, "ok") if a restart of ``node`` at ``now`` keeps within ``limits``, else
    (False, why): one restart per node per ``node_interval``, ``max_restarts`` per ``window``."""
    last = max((t for t, n in history if n == node), default=None)
    if last is not None and now - last < limits.node_interval:
        return False, (f"{node} was restarted {now - last:.1f}s ago; at most one restart per node every "
                       f"{limits.node_interval:g}s (next in {last + limits.node_interval - now:.1f}s)")
    recent = sorted(t for t, _ in history if now - t < limits.window)
    if len(recent) >= limits.max_restarts:
        next_in = recent[len(recent) - limits.max_restarts] + limits.window - now
        return False, (f"{len(recent)} restarts in the last {limits.window:g}s; at most {limits.max_restarts} "
                       f"(next in {next_in:.1f}s)")
    return True, "ok"


def prune(history: History, now: float, limits: RateLimits) -> list[tuple[float, str]]:
    """The part of ``history`` that can still refuse a restart at ``now`` or later."""
    keep = max(limits.window, limits.node_interval)
    return [(t, n) for t, n in history if now - t < keep]
