"""The health monitor: notices nodes going DOWN and coming back, restarts DOWN nodes through a
restarter with backoff and a budget, and drains a node that keeps failing.

The master calls :meth:`NodeHealth.step` on every pass; restarts run in threads, so a slow
``docker restart`` never holds up scheduling.
"""

from __future__ import annotations

import logging
import threading
import time

from minihpc.core.models import NodeStatus
from minihpc.core.restart_policy import Action, RestartPolicy, decide, lapsed_at, recent
from minihpc.restart.spec import Restarter, RestartRefused
from minihpc.state.store import Store

log = logging.getLogger(__name__)


class NodeHealth:
    def __init__(self, store: Store, restarter: Restarter | None, policy: RestartPolicy, node_timeout: float):
        self.store = store
        self.restarter = restarter
        self.policy = policy
        self.node_timeout = node_timeout
        self.in_flight: dict[str, threading.Thread] = {}
        self.alive: dict[str, bool] = {}
        self.down_since: dict[str, float] = {}
        self.outage_end: float | None = None
        self.causes: dict[str, str] = {}  # node -> how a watcher saw it crash (master.crashes)
        self.not_before: dict[str, float] = {}  # node -> when the restarter said it may restart it
        self.seen_up: set[str] = set()  # nodes seen alive in any pass, the quiet ones too (see saw)

    def saw(self, nodes: list[NodeStatus]) -> None:
        """Every pass, a grace's quiet ones included: which nodes were up while this master
        watched, so one that goes DOWN before the monitor's first look (in the grace after the
        master starts) is reported DOWN then, not taken for a node that was down already."""
        self.seen_up.update(n.name for n in nodes if n.alive)

    def outage_ended(self, at: float) -> None:
        """Redis answers again at ``at`` after an outage: the silence before does not count
        towards any node's time DOWN (the master skips this monitor during the grace)."""
        self.outage_end = at
        self.down_since = {name: max(since, at) for name, since in self.down_since.items()}

    def step(self, nodes: list[NodeStatus], now: float) -> None:
        for node in nodes:
            self._notice(node, now)
            if node.alive:
                self.causes.pop(node.name, None)  # a cause never outlives its crash
                self.not_before.pop(node.name, None)
            if node.alive or node.drain_reason is not None or self.restarter is None:
                continue
            running = self.in_flight.get(node.name)
            if (running is not None and running.is_alive()) or now < self.not_before.get(node.name, 0.0):
                continue
            # When this monitor saw it go DOWN; else (a restarted master) when its alive key
            # lapsed, node_timeout after the last heartbeat -- or sooner, if its agent dropped
            # the key on a graceful stop.
            down_since = self.down_since.get(node.name, lapsed_at(node.last_heartbeat, self.node_timeout, now))
            down_since = max(down_since, self.outage_end or down_since)
            history = self.store.restarts(node.name)
            action = decide(history, down_since, now, self.policy)
            if action is Action.RESTART:
                self.store.record_restart(node.name, now)
                self.store.incident("restart", node.name, attempt=len(recent(history, self.policy, now)) + 1)
                self._in_background(node.name, self._restart, now)
            elif action is Action.DRAIN:
                reason = f"flapping: {self.policy.budget} restarts within {self.policy.window:g}s"
                self.store.drain(node.name, reason, {"kind": "drained", "node": node.name, "reason": reason})
                log.error("node %s: drained (%s)", node.name, reason)

    def restart_stuck(self, name: str, now: float) -> None:
        """Restart a node that heartbeats but takes no work (master.stuck), within the same
        budget as DOWN nodes: past it the node stays drained, for an operator."""
        running = self.in_flight.get(name)
        if self.restarter is None or (running is not None and running.is_alive()):
            return
        done = len(recent(self.store.restarts(name), self.policy, now))
        if done >= self.policy.budget:
            log.error("node %s: stuck, and restarted %d times within %.0fs; left drained", name,
                      self.policy.budget, self.policy.window)
            return
        self.store.incident("restart", name, attempt=done + 1, cause="stuck")
        self._in_background(name, self._restart_stuck, now)

    def _in_background(self, name: str, restart, now: float) -> None:
        """Run ``restart(name, now)`` in a thread of its own, known as the node's restart in flight."""
        thread = threading.Thread(target=restart, args=(name, now), name=f"restart-{name}", daemon=True)
        self.in_flight[name] = thread
        thread.start()

    def _restart_stuck(self, name: str, at: float) -> None:
        """The restart is counted when it is done: the node is DOWN while it boots, and a
        restart made since that outage began is one the monitor gives time to boot."""
        if self._restart(name, at):
            self.store.record_restart(name, time.time())

    def _notice(self, node: NodeStatus, now: float) -> None:
        known = before = self.alive.get(node.name)
        if before is None and (node.name in self.causes or node.name in self.seen_up):
            before = True  # seen to crash (master.crashes ends only live agents), or seen up (saw)
        self.alive[node.name] = node.alive
        if before is None or before == node.alive:
            return
        if node.alive:
            since = self.down_since.pop(node.name, None)
            if since is not None:
                self.store.observe("node_recovery_seconds", now - since)
            self.store.incident("back", node.name, down_for=None if since is None else now - since)
            log.info("node %s: back", node.name)
        else:
            silent = now - node.last_heartbeat if node.last_heartbeat else None
            cause = self.causes.pop(node.name, None)
            # Met DOWN at the first look: it went down during the grace, when its key lapsed.
            self.down_since[node.name] = now if known is not None else lapsed_at(node.last_heartbeat,
                                                                                 self.node_timeout, now)
            self.store.incident("down", node.name, silent_for=silent, **({"cause": cause} if cause else {}))
            if cause:
                log.warning("node %s: DOWN (%s)", node.name, cause)
            else:
                log.warning("node %s: DOWN (no heartbeat for %.1fs)", node.name, silent or -1)

    def _restart(self, name: str, at: float) -> bool:
        """Whether the node was restarted (a refusal or a failure is an incident)."""
        try:
            self.restarter.restart(name)
            log.warning("node %s: restarted", name)
            return True
        except RestartRefused as exc:
            # Not restarted: ask again when the restarter said, not after a boot grace.
            if exc.retry_after is not None:
                self.store.forget_restart(name, at)
                self.not_before[name] = at + exc.retry_after
            self.store.incident("restart_failed", name, error=str(exc)[:300])
            log.warning("node %s: restart refused for now (%s)", name, exc)
            return False
        except Exception as exc:  # noqa: BLE001 - a failed restart is an incident, not a crash
            self.store.incident("restart_failed", name, error=str(exc)[:300])
            log.error("node %s: restart failed: %s", name, exc)
            return False
