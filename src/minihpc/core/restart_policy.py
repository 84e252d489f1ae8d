"""The health monitor's decisions: when to restart a DOWN node, and when to give up on it.

Pure functions of the node's restart history; the master's health monitor (minihpc.master.health)
applies them through a restarter (minihpc.restart): Docker through the cluster's restart proxy, a local process
respawn, or later systemd over SSH.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Action(str, Enum):
    RESTART = "restart"
    WAIT = "wait"  # backing off, or a restart is in flight
    DRAIN = "drain"  # out of restart budget: flapping; an operator must look


@dataclass(frozen=True)
class RestartPolicy:
    backoff_initial: float = 1.0
    """Seconds before the second restart within the window; doubles with each one after."""
    backoff_max: float = 30.0
    budget: int = 5
    """Restarts allowed within ``window``; one more failure drains the node."""
    window: float = 600.0
    boot_grace: float = 20.0
    """Seconds a restarted node gets to come back before it is restarted again."""


def recent(restarts: list[float], policy: RestartPolicy, now: float) -> list[float]:
    return sorted(t for t in restarts if now - t < policy.window)


def backoff(count: int, policy) -> float:
    """Delay before restart number ``count + 1`` in the window: none for the first. ``policy``:
    anything with ``backoff_initial`` and ``backoff_max`` (a RestartPolicy, the restart proxy's
    WatchPolicy)."""
    if count == 0:
        return 0.0
    return min(policy.backoff_max, policy.backoff_initial * 2 ** (count - 1))


def decide(restarts: list[float], down_since: float, now: float, policy: RestartPolicy) -> Action:
    """What to do about a node that has been DOWN since ``down_since``."""
    done = recent(restarts, policy, now)
    if done and done[-1] >= down_since and now - done[-1] < policy.boot_grace:
        return Action.WAIT  # restarted during this outage: give it time to boot
    if len(done) >= policy.budget:
        return Action.DRAIN
    # Like a crash-loop backoff, the delay counts from the failure, not from the restart.
    return Action.RESTART if now - down_since >= backoff(len(done), policy) else Action.WAIT


def next_lapse(heartbeats: list[float | None], now: float, timeout: float) -> float | None:
    """Seconds until the first of these live nodes' heartbeats lapses (when it would be DOWN),
    or None when there is none. The master wakes then, so detection is not late by a pass."""
    due = [hb + timeout - now for hb in heartbeats if hb is not None]
    return max(0.0, min(due)) if due else None


def lapsed_at(last_heartbeat: float | None, node_timeout: float, now: float) -> float:
    """When a node found DOWN went DOWN, as best known without having watched it: its alive
    key lapsed a node timeout after its last heartbeat (or sooner, if its agent dropped the
    key on a graceful stop); ``now`` when it never beat."""
    return min(now, (last_heartbeat or now) + node_timeout)
