"""Partitions: named groups of nodes a job may ask for with ``-p/--partition`` (man sbatch:
"Request a specific partition for the resource allocation"), as slurm.conf's
``PartitionName=... Nodes=...`` lines define them.

minihpc reads them from one setting (MINIHPC_PARTITIONS, see core.config), ``NAME=HOSTLIST``
items separated by ``;``: ``debug=worker-node-[1-2];gpu=worker-node-3`` (host lists as
``scontrol show hostnames`` expands them). The *default partition* (MINIHPC_DEFAULT_PARTITION,
``main`` unless set; slurm.conf's ``Default=YES``) is where a job without ``-p`` goes. When the
setting does not name it, it is the implicit partition of *every* node, so a cluster with no
partitions configured behaves as it always did; when it does, it has just the nodes listed.
A node may be in several partitions. The master publishes both settings in the cluster record
(:meth:`Partitions.to_record`), so the scheduler and every face read the same groups; node
features (MINIHPC_NODE_FEATURES, core.features) travel with them, the other way nodes are
grouped for a job (``--constraint``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from minihpc.core import simulation
from minihpc.core.errors import UsageError
from minihpc.core.features import features_record, parse_features, satisfies
from minihpc.core.parsing import expand_hostlist

DEFAULT_PARTITION = "main"
"""The default partition's name when nothing else says."""

_NAME = re.compile(r"[A-Za-z0-9_.-]+")


@dataclass(frozen=True)
class Partitions:
    default: str = DEFAULT_PARTITION
    groups: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Configured partitions in the order given: name -> node names."""
    features: dict[str, frozenset[str]] = field(default_factory=dict)
    """Node -> its features (core.features); a node not named has none."""

    def meets(self, constraint: str, node: str, simulated: bool = False) -> bool:
        """Whether ``node``'s features satisfy ``constraint`` ("" : any real node). A simulated
        node (core.simulation) has the feature ``simulated`` and meets only a constraint that
        asks for it."""
        if not simulation.takes(constraint, simulated):
            return False
        have = self.features.get(node, frozenset())
        return satisfies(constraint, have | {simulation.FEATURE} if simulated else have)

    @property
    def names(self) -> list[str]:
        """Every partition a job may name; an implicit default first (sinfo's order)."""
        return list(self.groups) if self.default in self.groups else [self.default, *self.groups]

    def effective(self, requested: str) -> str:
        """The partition a job runs in: the one it asked for, or the default."""
        return requested or self.default

    def has(self, name: str) -> bool:
        return name in self.names

    def contains(self, name: str, node: str) -> bool:
        """Whether ``node`` is in partition ``name`` (the implicit default holds every node)."""
        if name in self.groups:
            return node in self.groups[name]
        return name == self.default

    def of_node(self, node: str) -> list[str]:
        """The partitions ``node`` is in, in :attr:`names` order."""
        return [name for name in self.names if self.contains(name, node)]

    def unknown(self, requested: str) -> str | None:
        """One line for a partition that does not exist; None when it does (or none is asked)."""
        if not requested or self.has(requested):
            return None
        return f"partition {requested!r} does not exist; partitions: {', '.join(self.names)}"

    def to_record(self) -> dict[str, str]:
        """The cluster record's fields (see :func:`from_record`)."""
        spec = ";".join(f"{name}={','.join(nodes)}" for name, nodes in self.groups.items())
        return {"partitions": spec, "default_partition": self.default, "node_features": features_record(self.features)}

    @classmethod
    def from_record(cls, cluster: dict[str, str]) -> Partitions:
        """The partitions a cluster record publishes (a record from before them: every node
        in the default partition)."""
        return parse(cluster.get("partitions", ""), cluster.get("default_partition") or DEFAULT_PARTITION,
                     cluster.get("node_features", ""))


def parse(spec: str, default: str = DEFAULT_PARTITION, features: str = "") -> Partitions:
    """``debug=worker-node-[1-2];gpu=worker-node-3`` as Partitions; UsageError naming the
    first item that is not ``NAME=HOSTLIST`` or a name given twice."""
    if not _NAME.fullmatch(default):
        raise UsageError(f"invalid default partition {default!r}: expected letters, digits, '_', '-' or '.'")
    groups: dict[str, tuple[str, ...]] = {}
    for item in (i.strip() for i in spec.split(";") if i.strip()):
        name, eq, hosts = (part.strip() for part in item.partition("="))
        if not eq or not _NAME.fullmatch(name):
            raise UsageError(f"invalid partition {item!r}: expected NAME=HOSTLIST such as debug=worker-node-[1-2]")
        if name in groups:
            raise UsageError(f"partition {name!r} is given twice in {spec!r}")
        nodes = tuple(dict.fromkeys(expand_hostlist(hosts)))
        if not nodes:
            raise UsageError(f"partition {name!r} has no nodes (in {item!r})")
        groups[name] = nodes
    return Partitions(default, groups, parse_features(features))
