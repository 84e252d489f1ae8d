"""What a job needs of each of its nodes, as sbatch says it -- ``--mem``, ``--gres=gpu:N``,
``-c/--cpus-per-task`` with ``--ntasks-per-node`` -- and whether a node has it (:func:`fits`,
which the scheduler and submit's checks share)."""

from __future__ import annotations

import re
from typing import Protocol

from minihpc.core import simulation
from minihpc.core.errors import UsageError
from minihpc.core.models import NodeStatus
from minihpc.core.partitions import Partitions

_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_mem(text: str) -> int:
    """``--mem=4G`` -> bytes (K, M, G, T; a bare number is megabytes, as in Slurm; 0 : any)."""
    m = re.fullmatch(r"(\d+)([KMGTkmgt]?)[Bb]?", text.strip())
    if not m:
        raise UsageError(f"invalid --mem {text!r}: expected a size such as 4G, 512M or 2048 (megabytes)")
    return int(m.group(1)) * _UNITS[(m.group(2) or "M").upper()]


def parse_gres(text: str) -> int:
    """``--gres=gpu:2`` (or ``gpu``, ``gpu:TYPE:2``) -> GPUs per node. Other resources have no
    meaning on a minihpc node: a UsageError names them."""
    gpus = 0
    for item in (i.strip() for i in text.split(",") if i.strip()):
        parts = item.split(":")
        if parts[0] != "gpu":
            raise UsageError(f"invalid --gres {text!r}: minihpc nodes offer only gpu (gpu:N)")
        count = parts[-1] if len(parts) > 1 else "1"
        if len(parts) > 3 or not count.isdigit():
            raise UsageError(f"invalid --gres {text!r}: expected gpu:N or gpu:TYPE:N")
        gpus += int(count)
    return gpus


class Needs(Protocol):
    """What a job asks of each node: a Job record, or a submit Request before it is one."""

    mem_bytes: int
    gpus: int
    tasks_per_node: int
    cpus_per_task: int
    nodelist: list[str]
    exclude: list[str]
    constraint: str
    max_nodes: int  # -N MIN-MAX: the most; 0: exactly the -N given


def format_mem(count: int) -> str:
    """Bytes as ``--mem`` takes them: the largest unit that divides them (``4G``, ``1536M``)."""
    for unit in "TGMK":
        if count and count % _UNITS[unit] == 0:
            return f"{count // _UNITS[unit]}{unit}"
    return f"{count}B"


def cpus_needed(job: Needs) -> int:
    """CPUs the job needs on each node: ``--ntasks-per-node`` x ``-c/--cpus-per-task``."""
    return job.tasks_per_node * job.cpus_per_task


def published_cpus(cluster: dict[str, str]) -> int:
    """MINIHPC_MAX_TASKS_PER_NODE as the cluster record publishes it: when set (not 0) it
    stands for every node's CPU count, as it does for submit's ``--ntasks-per-node`` check
    (an operator lets more ranks share a node than it has CPUs); 0: each node's own CPUs."""
    try:
        return max(int(cluster.get("max_tasks_per_node") or 0), 0)
    except ValueError:
        return 0


def fits(job: Needs, node: NodeStatus, cpus_override: int = 0) -> bool:
    """Whether one node could ever hold the job's share: ``--mem`` at most its memory (when
    both are known), ``--gres=gpu:N`` at most its GPUs, and tasks x cpus-per-task at most its
    CPUs (``cpus_override`` when not 0, see :func:`published_cpus`; a node that reported no
    CPU count is not judged by it)."""
    if job.mem_bytes and node.memory_bytes and node.memory_bytes < job.mem_bytes:
        return False
    if node.gpus < job.gpus:
        return False
    cpus = cpus_override or node.cpus
    return not cpus or cpus >= cpus_needed(job)


def refusal(job: Needs, nodes_requested: int, partition: str, nodes: list[NodeStatus], partitions: Partitions,
            cpus_override: int = 0) -> str | None:
    """One line saying why no set of the registered ``nodes`` (up or not) could ever run the
    job, or None: an unknown ``-p`` partition, ``--gres=gpu:N``, ``--mem`` or ``-c`` x
    ``--ntasks-per-node`` more than any node of its partition has, or ``-N`` more nodes than
    have all of it together."""
    unknown = partitions.unknown(partition)
    if unknown:
        return unknown
    name = partitions.effective(partition)
    why = _named_nodes(job, nodes_requested, name, nodes, partitions, cpus_override)
    if why:
        return why
    # A simulated node is none of a real job's, and a simulated job has only those (core.simulation).
    members = [n for n in nodes if partitions.contains(name, n.name) and n.name not in job.exclude
               and simulation.takes(job.constraint, n.simulated)]
    if job.constraint:
        having = [n for n in members if partitions.meets(job.constraint, n.name, n.simulated)]
        if len(having) < nodes_requested:
            known = sorted({f for n in members for f in partitions.features.get(n.name, ())}
                           | ({simulation.FEATURE} if any(n.simulated for n in members) else set()))
            return (f"--constraint={job.constraint}: {len(having)} node(s) in partition {name!r} have these features, "
                    f"the job needs {nodes_requested} (features there: {', '.join(known) or 'none'})")
        members = having
    where = f" in partition {name!r}" if partition or partitions.groups else ""
    most_gpus = max((n.gpus for n in members), default=0)
    if job.gpus > most_gpus:
        what = "GPUs" if not most_gpus else f"{job.gpus} GPUs"
        return f"--gres=gpu:{job.gpus}: no node{where} has {what} (the most on one node: {most_gpus})"
    most_mem = max((n.memory_bytes for n in members), default=0)
    if job.mem_bytes and most_mem and job.mem_bytes > most_mem:
        return (f"--mem={format_mem(job.mem_bytes)} is more than any node{where} has "
                f"(the most on one node: {format_mem(most_mem)})")
    most_cpus = cpus_override or max((n.cpus for n in members), default=0)
    if most_cpus and cpus_needed(job) > most_cpus:
        return (f"--ntasks-per-node {job.tasks_per_node} x --cpus-per-task {job.cpus_per_task} needs "
                f"{cpus_needed(job)} CPUs per node; the largest node{where} has {most_cpus}")
    fitting = sum(1 for n in members if fits(job, n, cpus_override))
    if nodes_requested > fitting:
        plural = "s" if nodes_requested != 1 else ""
        if fitting == len(members):
            besides = " besides the ones -x excludes" if job.exclude else ""
            return f"job needs {nodes_requested} node{plural}; partition {name!r} has {fitting}{besides}"
        return (f"job needs {nodes_requested} node{plural}{where} with its --mem, --gres and CPUs; "
                f"{fitting} of the {len(members)} have them")
    return None


def _named_nodes(job: Needs, nodes_requested: int, partition: str, nodes: list[NodeStatus], partitions: Partitions,
                 cpus_override: int) -> str | None:
    """Why ``-w``/``-x`` can never be met, or None: a name no node has, a node in both, one
    outside the partition or lacking what the job needs, or more nodes named than ``-N``."""
    known = {n.name: n for n in nodes}
    for option, listed in (("-w/--nodelist", job.nodelist), ("-x/--exclude", job.exclude)):
        missing = [x for x in listed if x not in known]
        if missing:
            return f"{option}: invalid node name specified: {','.join(missing)}"
    both = sorted(set(job.nodelist) & set(job.exclude))
    if both:
        return f"{','.join(both)} is both required (-w) and excluded (-x)"
    most = max(job.max_nodes, nodes_requested)
    if len(job.nodelist) > most:
        return f"-w names {len(job.nodelist)} nodes, more than the job's {most} (-N)"
    for x in job.nodelist:
        if not partitions.contains(partition, x):
            return f"-w/--nodelist: {x} is not in partition {partition!r}"
        if not fits(job, known[x], cpus_override) or not partitions.meets(job.constraint, x, known[x].simulated):
            return f"-w/--nodelist: {x} lacks what the job needs on each node (--mem, --gres, CPUs, --constraint)"
    return None
