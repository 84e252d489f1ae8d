"""Operating on nodes: drain, resume, forget -- the same checks from every face."""

from __future__ import annotations

from minihpc.client.access import Principal, must_be_admin
from minihpc.core.errors import NotFound, UsageError
from minihpc.core.models import NodeStatus
from minihpc.state.store import Store


def known(store: Store, names: list[str]) -> dict[str, NodeStatus]:
    """The statuses of ``names``; UsageError naming the first that is not registered."""
    nodes = {n.name: n for n in store.node_statuses()}
    for name in names:
        if name not in nodes:
            raise NotFound(f"node {name!r} is not registered")
    return {name: nodes[name] for name in names}


def drain(store: Store, names: list[str], reason: str, who: Principal) -> None:
    must_be_admin(who, "draining a node")
    known(store, names)
    for name in names:
        store.drain(name, reason, {"kind": "drained", "node": name, "reason": reason})


def resume(store: Store, names: list[str], who: Principal) -> None:
    """Back in service; their restart history is cleared."""
    must_be_admin(who, "resuming a node")
    known(store, names)
    for name in names:
        store.undrain(name, {"kind": "resumed", "node": name})


def forget(store: Store, names: list[str], who: Principal, done=lambda name: None) -> None:
    """Remove DOWN nodes from the registry (workers scaled away); ``done(name)`` after each."""
    must_be_admin(who, "forgetting a node")
    known(store, names)
    for name in names:
        if not store.forget_node(name):
            raise UsageError(f"node {name} is up; stop it before forgetting it")
        done(name)


def set_state(store: Store, names: list[str], state: str, reason: str, who: Principal) -> None:
    """``scontrol update NodeName=... State=...``: DRAIN is :func:`drain` (with ``reason``),
    RESUME and UNDRAIN are :func:`resume` -- the same checks as every other face's."""
    if state == "DRAIN":
        drain(store, names, reason, who)
    elif state in ("RESUME", "UNDRAIN"):
        resume(store, names, who)
    else:
        raise UsageError(f"node state {state!r} cannot be set: expected DRAIN, RESUME or UNDRAIN")
