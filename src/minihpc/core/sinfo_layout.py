"""Which lines sinfo prints, as pure functions: nodes grouped into records by partition and
state (or one record a node with ``-N``), filtered by ``-p``, ``-n`` and ``-t``, in sinfo's order.

As sinfo(1) does it: a node is listed under each partition it is in (a node in none is not
listed); nodes of a partition fall into one record while they agree on what the format prints
of them -- their state if it prints %t or %T, their features (%f), GRES (%G) and reason (%E);
CPUs and memory may differ (``4+``). Without %P or %R in the format, records are not split by
partition, and a node is counted once. Every partition asked for gets a line even when none of
its nodes is left (``NODES 0``, state ``n/a``). Lines come in partition order, then by Slurm's
numeric node state, highest first (drained and DOWN before allocated before idle); with ``-N``
by node name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from minihpc.core.errors import UsageError
from minihpc.core.models import NodeStatus
from minihpc.core.node_formats import NO_FEATURES, features, gres, natural_key, reason, slurm_state
from minihpc.core.parsing import expand_hostlist
from minihpc.core.partitions import Partitions

PARTITION_FORMAT = "%#P %.5a %.10l %.6D %.6t %N"
"""sinfo's default: one line per partition and state (``#``: as wide as the longest partition
name, at least 9, as sinfo sizes it)."""

PARTITION_LONG_FORMAT = "%#P %.5a %.10l %.10s %.4r %.8h %.10g %.6D %.11T %N"
"""``sinfo -l``."""

SUMMARIZE_FORMAT = "%#P %.5a %.10l %.16F  %N"
"""``sinfo -s``: one line per partition, its nodes as allocated/idle/other/total."""

NODE_FORMAT = "%#N %.6D %#P %6t"
"""``sinfo -N``: one line per node (and partition)."""

NODE_LONG_FORMAT = "%#N %.6D %#P %.11T %.4c %.6m %.8f %20E"
"""``sinfo -N -l``, less the columns minihpc cannot fill (S:C:T, TMP_DISK, WEIGHT)."""


def default_format(summarize: bool, by_node: bool, long: bool) -> str:
    """The format sinfo uses without ``-o``: ``-s`` first, then ``-N``, then the partitions'."""
    if summarize:
        return SUMMARIZE_FORMAT
    if by_node:
        return NODE_LONG_FORMAT if long else NODE_FORMAT
    return PARTITION_LONG_FORMAT if long else PARTITION_FORMAT


@dataclass
class Record:
    """One sinfo line: the nodes it counts, of one partition (or the first one they were
    found in, when the format prints no partition)."""

    partition: str
    index: int  # the partition's place in sinfo's order
    default: bool
    nodes: list[NodeStatus] = field(default_factory=list)
    features: str = NO_FEATURES  # its first node's (sinfo's %f)

    @property
    def number(self) -> int:
        """Slurm's numeric state of its first node (0 for an empty record): the sort key."""
        return slurm_state(self.nodes[0]).number if self.nodes else 0


def _alike(record: Record, node: NodeStatus, feats: str, letters: str, by_node: bool) -> bool:
    """Whether ``node`` (with features ``feats``) belongs in ``record``'s line (its partition aside)."""
    if not record.nodes:
        return True
    first = record.nodes[0]
    if by_node:
        return first.name == node.name
    same = {
        "t": lambda: slurm_state(first).number == slurm_state(node).number,
        "G": lambda: gres(first) == gres(node),
        "E": lambda: reason(first) == reason(node),
        "f": lambda: record.features == feats,
    }
    states = [same["t"]] if ("t" in letters or "T" in letters) else []
    return all(check() for check in states + [same[c] for c in "GEf" if c in letters])


def records(nodes: list[NodeStatus], partitions: Partitions, letters: str, by_node: bool = False,
            wanted: Callable[[NodeStatus], bool] = lambda n: True, only: list[str] | None = None) -> list[Record]:
    """sinfo's lines (see the module's docstring). ``letters``: the format's field letters;
    ``wanted``: the ``-n``/``-t`` filter; ``only``: the ``-p`` partitions (None: all)."""
    by_partition = "P" in letters or "R" in letters
    names = [(i, p) for i, p in enumerate(partitions.names) if only is None or p in only]
    out = [] if by_node or not by_partition else [Record(p, i, p == partitions.default) for i, p in names]
    ordered = sorted(nodes, key=lambda n: natural_key(n.name))
    for i, name in names:
        for node in (n for n in ordered if partitions.contains(name, n.name) and wanted(n)):
            feats = features(partitions, node.name)
            home = next((r for r in out if (r.partition == name or not by_partition)
                         and _alike(r, node, feats, letters, by_node)), None)
            if home is None:
                out.append(Record(name, i, name == partitions.default, [node], feats))
            elif not home.nodes:
                home.nodes.append(node)
                home.features = feats
            elif all(n.name != node.name for n in home.nodes):
                home.nodes.append(node)
    if by_node:
        return sorted(out, key=lambda r: (natural_key(r.nodes[0].name), r.index))
    return sorted(out, key=lambda r: (r.index, -r.number))


# -- -n and -t ------------------------------------------------------------------------------------

def _flags(node: NodeStatus) -> dict[str, bool]:
    busy, drain = node.alive and node.job is not None, node.drain_reason is not None
    return {
        "idle": node.alive and node.job is None and not drain,
        "alloc": busy,
        "down": not node.alive,
        "drain": drain,
        "drained": drain and not busy,
        "draining": drain and busy,
        "no_respond": not node.alive,
    }


STATE_NAMES: dict[str, str | None] = {
    "idle": "idle", "alloc": "alloc", "allocated": "alloc", "down": "down", "drain": "drain",
    "drained": "drained", "draining": "draining", "drng": "draining", "no_respond": "no_respond",
    "mix": None, "mixed": None, "comp": None, "completing": None, "fail": None, "failing": None,
    "future": None, "maint": None, "reserved": None, "resv": None, "unknown": None, "unk": None,
    "planned": None, "power_down": None, "powered_down": None, "power_up": None, "reboot": None,
    "cloud": None, "inval": None, "blocked": None,
}
"""sinfo's ``-t`` names (sinfo(1), NODE STATE CODES) -> minihpc's flag it means; None for a
state a minihpc node is never in (it matches no node)."""


def parse_states(text: str) -> list[str | None] | None:
    """``-t idle,drain`` as flags to match (None: ``all``); UsageError naming a bad state."""
    items = [s.strip().lower() for s in text.split(",") if s.strip()]
    if not items:
        raise UsageError(f"invalid --states {text!r}: expected a comma-separated list such as idle,drain")
    if "all" in items:
        return None
    for item in items:
        if item not in STATE_NAMES:
            raise UsageError(f"Bad state string: {item!r} in --states; valid states: all, {', '.join(STATE_NAMES)}")
    return [STATE_NAMES[i] for i in items]


def node_filter(nodes_text: str | None, states_text: str | None) -> Callable[[NodeStatus], bool]:
    """``-n HOSTLIST`` and ``-t STATES`` as one test of a node (both must hold)."""
    names = set(expand_hostlist(nodes_text)) if nodes_text else None
    states = parse_states(states_text) if states_text else None

    def wanted(node: NodeStatus) -> bool:
        if names is not None and node.name not in names:
            return False
        return states is None or any(s is not None and _flags(node)[s] for s in states)

    return wanted


def partition_list(text: str | None) -> list[str] | None:
    """``-p debug,gpu`` as names (None: every partition)."""
    return None if not text else [p.strip() for p in text.split(",") if p.strip()]
