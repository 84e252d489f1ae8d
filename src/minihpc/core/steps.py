"""Job steps, as pure functions: where ``srun`` puts its tasks inside a batch job's
allocation, what each task's environment says, and what srun makes of their ends.

Placement is Slurm's default ``block`` distribution (``man srun``, -m/--distribution): tasks
are numbered in order over the step's nodes, the first nodes taking one more when they do not
divide evenly (``-n 3 -N 2``: tasks 0,1 on the first node, 2 on the second).
"""

from __future__ import annotations

import signal as _signal
from dataclasses import dataclass

from minihpc.core.batch import tasks_per_node_text
from minihpc.core.errors import UsageError
from minihpc.core.parsing import compress_hostlist


@dataclass(frozen=True)
class Layout:
    """A step's nodes and, for each, the global task ids (SLURM_PROCID) it runs."""

    nodes: list[str]
    tasks: list[list[int]]

    @property
    def ntasks(self) -> int:
        return sum(len(t) for t in self.tasks)


MAX_TASKS_PER_NODE = 512
"""Most tasks one step may start on one node: Slurm's MaxTasksPerNode default. It bounds what
``srun -n 15000000`` would make the agent build (every task id) before anything starts."""


def layout(allocation: list[str], tasks_per_node: int, nodes: int | None = None, ntasks: int | None = None,
           per_node: int | None = None) -> Layout:
    """Where a step's tasks run: ``-N nodes`` (default: all the job's, fewer when ``-n`` asks
    for fewer tasks than nodes), ``-n ntasks`` (default: ``--ntasks-per-node`` on each, else the
    job's tasks per node on each). UsageError with srun's reason where it cannot run."""
    for flag, value in (("-N/--nodes", nodes), ("-n/--ntasks", ntasks), ("--ntasks-per-node", per_node)):
        if value is not None and value < 1:
            raise UsageError(f"{flag} must be at least 1, got {value}")
    if nodes is not None and nodes > len(allocation):
        raise UsageError(f"only {len(allocation)} node{'s' if len(allocation) != 1 else ''} allocated, "
                         f"-N {nodes} asked for more")
    count = nodes if nodes is not None else len(allocation)
    if ntasks is None:
        ntasks = count * (per_node or tasks_per_node)
    elif nodes is None:
        count = min(count, ntasks)
        if per_node is not None:
            count = min(count, -(-ntasks // per_node))
    if ntasks < count:
        raise UsageError(f"cannot run {ntasks} task{'s' if ntasks != 1 else ''} on {count} nodes")
    base, extra = divmod(ntasks, count)
    most = base + (1 if extra else 0)
    if most > MAX_TASKS_PER_NODE:
        raise UsageError(f"{ntasks} tasks on {count} node{'s' if count != 1 else ''} is {most} on a node; a step "
                         f"runs at most {MAX_TASKS_PER_NODE} tasks per node (MaxTasksPerNode)")
    tasks, first = [], 0
    for i in range(count):
        n = base + (1 if i < extra else 0)
        tasks.append(list(range(first, first + n)))
        first += n
    return Layout(list(allocation[:count]), tasks)


def task_env(lay: Layout, step_id: int, node_index: int, procid: int) -> dict[str, str]:
    """The SLURM_* variables of one task of step ``step_id`` (``man srun``, OUTPUT ENVIRONMENT
    VARIABLES), over the batch script's own."""
    here = lay.tasks[node_index]
    counts = [len(t) for t in lay.tasks]
    nodelist = compress_hostlist(lay.nodes)
    per_node = tasks_per_node_text(counts)
    return {
        "SLURM_STEP_ID": str(step_id),
        "SLURM_STEPID": str(step_id),
        "SLURM_PROCID": str(procid),
        "SLURM_LOCALID": str(here.index(procid)),
        "SLURM_NODEID": str(node_index),
        "SLURM_NTASKS": str(lay.ntasks),
        "SLURM_NPROCS": str(lay.ntasks),
        "SLURM_NNODES": str(len(lay.nodes)),
        "SLURM_NODELIST": nodelist,
        "SLURM_TASKS_PER_NODE": per_node,
        "SLURM_STEP_NUM_TASKS": str(lay.ntasks),
        "SLURM_STEP_NUM_NODES": str(len(lay.nodes)),
        "SLURM_STEP_NODELIST": nodelist,
        "SLURM_STEP_TASKS_PER_NODE": per_node,
        "SLURM_GTIDS": ",".join(str(t) for t in here),
        "SLURM_CPUS_ON_NODE": str(len(here)),
        "SLURM_DISTRIBUTION": "block",
        "SLURMD_NODENAME": lay.nodes[node_index],
    }


@dataclass(frozen=True)
class TaskEnd:
    """How one task ended: its exit code, or the signal that killed it."""

    procid: int
    node: str
    exit_code: int
    signal: str | None = None

    @property
    def failed(self) -> bool:
        return self.exit_code != 0 or self.signal is not None

    def to_dict(self) -> dict:
        return {"procid": self.procid, "node": self.node, "exit_code": self.exit_code, "signal": self.signal}

    @classmethod
    def from_dict(cls, d: dict) -> TaskEnd:
        return cls(int(d["procid"]), str(d["node"]), int(d["exit_code"]), d.get("signal"))

    def describe(self) -> str:
        """srun's line for a failed task: ``srun: error: node2: task 1: Exited with exit code 3``,
        or the signal in strsignal()'s words, ``...: task 1: Killed``, as srun prints it."""
        how = _strsignal(self.signal) if self.signal else f"Exited with exit code {self.exit_code}"
        return f"srun: error: {self.node}: task {self.procid}: {how}"


def _strsignal(name: str) -> str:
    try:
        return _signal.strsignal(_signal.Signals[name]) or name
    except (KeyError, ValueError):
        return f"Killed by signal {name}"


def step_exit(ends: list[TaskEnd]) -> int:
    """srun's exit status: the first failed task's (by when it was reported), else 0 -- under
    gang semantics the others were killed because of it, so theirs says nothing."""
    for end in ends:
        if end.failed:
            return end.exit_code
    return 0
