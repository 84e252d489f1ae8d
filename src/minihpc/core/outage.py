"""Redis outages are nobody's fault: while Redis is silent no node can heartbeat, so the master
judges no node by its heartbeats until the nodes have had the time to beat again. Pure."""

from __future__ import annotations


def outage_grace(node_timeout: float, heartbeat_interval: float, reconnect: float = 0.0) -> float:
    """Seconds after Redis answers again before nodes are judged by their heartbeats: a node
    timeout and a heartbeat, plus ``reconnect``, the longest a node's client may still be in a
    call it began while Redis was away (its first beat comes that much later)."""
    return node_timeout + heartbeat_interval + reconnect


def in_outage_grace(back_at: float | None, now: float, node_timeout: float, heartbeat_interval: float,
                    reconnect: float = 0.0) -> bool:
    """Whether ``now`` is within the grace (:func:`outage_grace`) of Redis answering again
    at ``back_at`` (None: no outage seen): no node is judged DOWN, restarted, or blamed for a
    job meanwhile; a node that is really gone is judged once the grace is over."""
    return back_at is not None and now < back_at + outage_grace(node_timeout, heartbeat_interval, reconnect)


def lapsing_silence(node_timeout: float, heartbeat_interval: float) -> float:
    """The shortest Redis silence that can lapse a node's alive key: nodes beat every
    ``heartbeat_interval`` with a ``node_timeout`` TTL, so a key written a heartbeat before the
    silence began lapses once it lasts ``node_timeout - heartbeat_interval``. A shorter one (a
    blip, a slow pass on a busy machine) costs no heartbeat and is no outage."""
    return max(heartbeat_interval, node_timeout - heartbeat_interval)


def answered_late(took: float, expected: float, node_timeout: float, heartbeat_interval: float) -> bool:
    """Whether a Redis call that took ``took`` seconds (``expected`` for a blocking wait) means
    Redis was silent long enough for a node's alive key to lapse meanwhile (a stopped or
    swapping Redis answers late instead of failing)."""
    return took - expected > lapsing_silence(node_timeout, heartbeat_interval)
