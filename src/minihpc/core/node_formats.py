"""Nodes and partitions in Slurm's words, as pure functions: the node states sinfo and
scontrol print, why a node is out of service (``sinfo -R``), ``scontrol show node`` and
``show partition`` as ``Key=Value`` lines, and the words of ``scontrol update NodeName=``.

minihpc knows less of a node than slurmd does: its CPUs, memory, GPUs, features, address, job,
drain reason and heartbeat -- no sockets, cores, threads, architecture, disk, weight or load. What it
does not know is left out (``scontrol show node`` prints no ``CoresPerSocket=``), never made up.
A node runs one job at a time on all of it (a partition's OverSubscribe=EXCLUSIVE), so a node
is idle or allocated, never mixed; it is DOWN while it sends no heartbeat, which Slurm calls
not responding (``down*``); a drain is Slurm's DRAIN flag (``drain``, or ``drng`` while its job
runs).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from minihpc.core.errors import UsageError
from minihpc.core.models import NodeStatus
from minihpc.core.parsing import compress_hostlist, expand_hostlist
from minihpc.core.partitions import Partitions

MIB = 1 << 20
"""Slurm counts memory in MiB (RealMemory, sinfo's %m)."""

NOT_RESPONDING = "Not responding"
"""Slurm's reason for a node that is DOWN without having been drained."""

NO_FEATURES = "(null)"
"""sinfo's %f and scontrol's AvailableFeatures of a node without features."""

# Slurm's numeric node states (slurm.h): the base state, and the flags over it. sinfo sorts
# its lines by this number, highest first, so drained and DOWN nodes come before busy ones.
_DOWN, _IDLE, _ALLOCATED = 1, 2, 3
_DRAIN, _NO_RESPOND = 0x200, 0x800


@dataclass(frozen=True)
class SlurmState:
    compact: str  # sinfo %t: idle alloc drain drng down* drain*
    long: str  # sinfo %T: idle allocated drained draining down* drained*
    complete: str  # scontrol's State=: IDLE, ALLOCATED+DRAIN, DOWN+NOT_RESPONDING ...
    number: int  # Slurm's node_state: base state | flags


def slurm_state(node: NodeStatus) -> SlurmState:
    """The node's state as Slurm would print it (see the module's docstring)."""
    base = _DOWN if not node.alive else _ALLOCATED if node.job is not None else _IDLE
    drain, star = node.drain_reason is not None, "" if node.alive else "*"
    if drain:
        busy = base == _ALLOCATED
        compact, long = ("drng", "draining") if busy else ("drain", "drained")
    else:
        compact, long = {_DOWN: ("down", "down"), _IDLE: ("idle", "idle"), _ALLOCATED: ("alloc", "allocated")}[base]
    complete = {_DOWN: "DOWN", _IDLE: "IDLE", _ALLOCATED: "ALLOCATED"}[base]
    complete += ("+DRAIN" if drain else "") + ("" if node.alive else "+NOT_RESPONDING")
    number = base | (_DRAIN if drain else 0) | (0 if node.alive else _NO_RESPOND)
    return SlurmState(compact + star, long + star, complete, number)


def allocated_cpus(node: NodeStatus) -> int:
    """A job holds all of its node's CPUs (minihpc never shares a node)."""
    return node.cpus if node.alive and node.job is not None else 0


def memory_mib(node: NodeStatus) -> int:
    return node.memory_bytes // MIB


def gres(node: NodeStatus) -> str:
    """sinfo's %G and scontrol's Gres=: ``gpu:2``, or ``(null)`` for a node without GPUs."""
    return f"gpu:{node.gpus}" if node.gpus else "(null)"


def features(partitions: Partitions, name: str) -> str:
    """The node's features (MINIHPC_NODE_FEATURES, published with the partitions), comma-separated,
    or ``(null)``. A Partitions without a ``features`` map (a record from before them) has none."""
    return ",".join(sorted(getattr(partitions, "features", {}).get(name, ()))) or NO_FEATURES


def reason(node: NodeStatus) -> str | None:
    """Why the node takes no jobs: its drain reason, else "Not responding" while DOWN."""
    if node.drain_reason is not None:
        return node.drain_reason
    return None if node.alive else NOT_RESPONDING


def natural_key(name: str) -> list:
    """Slurm's host order: worker-node-2 before worker-node-10."""
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]


def hostlist(nodes: list[NodeStatus]) -> str:
    """The nodes' names as one compact, sorted host list (``worker-node-[1-2]``)."""
    return compress_hostlist(sorted((n.name for n in nodes), key=natural_key))


# -- why a node is out (sinfo -R, Reason=) -------------------------------------------------------

def _last(incidents: list[dict], node: str, kind: str, undone_by: str) -> dict | None:
    """The newest ``kind`` incident of ``node`` (incidents come newest first), unless an
    ``undone_by`` incident came after it (a "drained" from before the last "resumed")."""
    for item in incidents:
        if item.get("node") == node and item.get("kind") in (kind, undone_by):
            return item if item["kind"] == kind else None
    return None


def reasons(nodes: list[NodeStatus], incidents: list[dict]) -> list[dict]:
    """Drained and DOWN nodes with why, who and since when, as ``sinfo -R`` lists them.

    Only the reason is stored with a drain; its time is that of its "drained" incident while
    the incident log still holds it, and who drained it is known only if that incident names
    a ``user``. A DOWN node that is not drained is "Not responding" since its "down"
    incident, or else since its last heartbeat."""
    out = []
    for n in nodes:
        if n.drain_reason is not None:
            why, seen = n.drain_reason, _last(incidents, n.name, "drained", "resumed")
            since = seen["at"] if seen else None
        elif not n.alive:
            why, seen = NOT_RESPONDING, _last(incidents, n.name, "down", "back")
            since = seen["at"] if seen else n.last_heartbeat
        else:
            continue
        out.append({"node": n.name, "state": n.state.value, "reason": why,
                    "user": (seen or {}).get("user"), "since": since})
    return out


# -- scontrol show node / partition ---------------------------------------------------------------

def node_lines(node: NodeStatus, partitions: Partitions, why: dict | None, stamp) -> list[str]:
    """``scontrol show node``'s lines for ``node`` (Slurm's order, unknown keys left out).
    ``why``: its :func:`reasons` item, if it is out; ``stamp(ts)`` prints a time."""
    rows = [
        f"NodeName={node.name}",
        f"CPUAlloc={allocated_cpus(node)} CPUTot={node.cpus}",
        f"AvailableFeatures={features(partitions, node.name)}",
        f"ActiveFeatures={features(partitions, node.name)}",
        f"Gres={gres(node)}",
        f"NodeAddr={node.addr}",
        f"RealMemory={memory_mib(node)}",
        f"State={slurm_state(node).complete}",
    ]
    member = partitions.of_node(node.name)
    if member:
        rows.append(f"Partitions={','.join(member)}")
    if why is not None:
        since = f" [{why['user'] or 'Unknown'}@{stamp(why['since'])}]" if why["since"] else ""
        rows.append(f"Reason={why['reason']}{since}")
    return rows


def partition_nodes(name: str, partitions: Partitions, nodes: list[NodeStatus]) -> list[NodeStatus]:
    """The registered nodes of partition ``name``, in host order."""
    return sorted((n for n in nodes if partitions.contains(name, n.name)), key=lambda n: natural_key(n.name))


def partition_lines(name: str, partitions: Partitions, nodes: list[NodeStatus]) -> list[str]:
    """``scontrol show partition``'s lines: what minihpc's partitions are -- open to every
    user, no node-count or time limit, whole nodes per job, always UP."""
    members = partition_nodes(name, partitions, nodes)
    return [
        f"PartitionName={name}",
        "AllowGroups=ALL",
        f"Default={'YES' if name == partitions.default else 'NO'}",
        "MaxNodes=UNLIMITED MaxTime=UNLIMITED",
        f"Nodes={hostlist(members) or '(null)'}",
        "RootOnly=NO OverSubscribe=EXCLUSIVE",
        f"State=UP TotalCPUs={sum(n.cpus for n in members)} TotalNodes={len(members)}",
    ]


# -- scontrol update NodeName=... -----------------------------------------------------------------

NODE_STATES = ("DRAIN", "RESUME", "UNDRAIN")
"""The states ``scontrol update NodeName=`` may set here. UNDRAIN is RESUME: a node here is
DOWN only while it sends no heartbeat, which no command can change."""

_SLURM_ONLY_STATES = {"DOWN", "IDLE", "FAIL", "FUTURE", "NORESP", "NO_RESP", "POWER_DOWN", "POWER_DOWN_ASAP",
                      "POWER_DOWN_FORCE", "POWER_UP", "REBOOT", "CANCEL_REBOOT", "MAINT"}

REASON_REQUIRED = "You must specify a reason when DOWNING or DRAINING a node. Request denied"
"""scontrol's own words for a drain without ``Reason=``."""


@dataclass(frozen=True)
class NodeUpdate:
    names: list[str]
    state: str  # one of NODE_STATES
    reason: str = ""


def is_node_update(words: list[str]) -> bool:
    """Whether ``scontrol update``'s words name nodes (``NodeName=``) rather than a job."""
    return any(w.partition("=")[0].lower() == "nodename" for w in words)


def parse_node_update(words: list[str]) -> NodeUpdate:
    """``NodeName=LIST State=DRAIN|RESUME|UNDRAIN [Reason=TEXT]`` (keys in any case) as a
    NodeUpdate; UsageError naming the first word minihpc cannot honour."""
    found: dict[str, str] = {}
    for word in words:
        key, eq, value = word.partition("=")
        key = key.lower()
        if not eq or key not in ("nodename", "state", "reason"):
            raise UsageError(f"Update of this parameter is not supported: {word} "
                             "(minihpc updates NodeName=LIST State=DRAIN|RESUME|UNDRAIN Reason=TEXT)")
        if key in found:
            raise UsageError(f"{word.partition('=')[0]} given twice in the update")
        found[key] = value.strip()
    names = expand_hostlist(found.get("nodename", ""))
    if not names:
        raise UsageError("no node in NodeName=: scontrol update NodeName=LIST State=DRAIN Reason=TEXT")
    state = found.get("state", "").upper()
    if not state:
        raise UsageError("no State= in the update: minihpc sets State=DRAIN, RESUME or UNDRAIN")
    if state in _SLURM_ONLY_STATES:
        raise UsageError(f"State={state} is not supported by minihpc: a node is DOWN only while it sends no "
                         "heartbeat; use State=DRAIN, RESUME or UNDRAIN")
    if state not in NODE_STATES:
        raise UsageError(f"invalid node state {found['state']!r} in State=: expected DRAIN, RESUME or UNDRAIN")
    if state == "DRAIN" and not found.get("reason"):
        raise UsageError(REASON_REQUIRED)
    return NodeUpdate(names, state, found.get("reason", ""))
