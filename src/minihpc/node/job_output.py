"""Where a job's output goes with sbatch's ``-o/--output`` and ``-e/--error`` (``man sbatch``,
"filename pattern"): the file each process writes, and the wrapper that opens it.

The file is opened by the job's own user, never by the agent (root in the containers): the
job's process is started through a tiny ``/bin/sh`` that opens it and then ``exec``s the job's
command, so the job user's permissions apply and a link the job planted cannot make the agent
write where the job may not. An absolute name is used as given. A relative name is taken in the
job's output directory on the logs volume, ``logs/job-N/output/`` (:func:`output_dir`), where
Slurm takes the working directory: a node's working directory is often not the job's to write
(the source tree in the Compose containers, the read-only copy of ``submit --tree``), and the
logs volume is what every node shares and what ``minihpc delete`` cleans up. Friendlier than
Slurm, which fails a job whose output directory is missing: missing directories are created
(as the job user).

Slurm truncates the file when a job starts (``--open-mode=truncate``, its default) and
appends on a requeue. Here several nodes may write one file (a shared file system, local mode),
so every writer appends (O_APPEND: no one overwrites another's lines), and a file is truncated
only where one writer has it from the start: the batch script's, and a torchrun node's whose
name no other node's shares, on the job's first attempt.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from minihpc.core.batch import BATCH
from minihpc.core.launch_spec import LaunchSpec
from minihpc.core.output_names import Names, expand, output_dir

SHELL = "/bin/sh"

WRAPPER = """o=$1 e=$2 t=$3; shift 3
for f in ${o:+"$o"} ${e:+"$e"}; do mkdir -p -- "${f%/*}/" || exit 1; [ "$t" != 1 ] || : >"$f"; done
[ -z "$o" ] || exec >>"$o"
[ -z "$e" ] || exec 2>>"$e"
[ -n "$e" ] || [ -z "$o" ] || exec 2>&1
exec "$@"
"""
"""Run as the job user: ``sh -c WRAPPER sh OUT ERR TRUNCATE CMD...`` (OUT "" : stdout stays
where it was; ERR "" : stderr goes with stdout). A file that cannot be opened ends it (sh's
exit status 2), sh's line saying why going where stderr went before (the node's job log)."""


@dataclass(frozen=True)
class Output:
    """The files one process of the job writes ("" : that stream is not redirected)."""

    output: str
    error: str = ""
    truncate: bool = False

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv``, started through the wrapper that opens the files as whoever runs it."""
        return [SHELL, "-c", WRAPPER, "sh", self.output, self.error, "1" if self.truncate else "0", *argv]

    def describe(self) -> str:
        """For the node's job log, so ``minihpc logs`` users know where to look."""
        where = [f"output goes to {self.output}"] if self.output else []
        return ", ".join(where + ([f"errors to {self.error}"] if self.error else []))


def names(spec: LaunchSpec, node_rank: int, task: int, step: str) -> Names:
    """What the patterns expand with for a process of ``spec``'s job on its ``node_rank``-th node."""
    return Names(spec.job_id, spec.name, spec.user, spec.nodes[node_rank], node_id=node_rank, task=task, step=step,
                 array_job_id=spec.array_job_id, array_task_id=spec.array_task_id)


def paths(spec: LaunchSpec, values: Names) -> tuple[str, str]:
    """(output, error) for ``values``: each pattern expanded, a relative name taken in the job's
    output directory; "" where the option is not given."""
    def resolve(pattern: str) -> str:
        return os.path.join(output_dir(spec.log_path), expand(pattern, values)) if pattern else ""

    return resolve(spec.output), resolve(spec.error)


def files(spec: LaunchSpec, values: Names, truncate: bool = False) -> Output | None:
    """The files for a process expanded with ``values``; None with neither ``-o`` nor ``-e``
    (the node's job log gets its output, as always)."""
    if not spec.output and not spec.error:
        return None
    return Output(*paths(spec, values), truncate=truncate)


def batch_script(spec: LaunchSpec) -> Output | None:
    """The batch script's files (first node, task 0), truncated on the first attempt: it is
    the job's first writer, before any step."""
    return files(spec, names(spec, 0, 0, "batch"), truncate=spec.attempt == 1)


def torchrun_node(spec: LaunchSpec) -> Output | None:
    """This node's torchrun output (``%t``: its first rank), truncated on the first attempt
    when no other node's files have its names."""
    def values(rank: int) -> Names:
        return names(spec, rank, rank * spec.tasks_per_node, "0")

    mine = set(paths(spec, values(spec.node_rank))) - {""}
    shared = any(mine & set(paths(spec, values(rank))) for rank in range(spec.nnodes) if rank != spec.node_rank)
    return files(spec, values(spec.node_rank), truncate=spec.attempt == 1 and not shared)


def for_launch(spec: LaunchSpec) -> Output | None:
    """The files of what this node's share starts: the batch script (first node of a batch
    job; the others start only srun tasks), or torchrun."""
    if spec.launch == BATCH:
        return batch_script(spec) if spec.node_rank == 0 else None
    return torchrun_node(spec)


def log_line(spec: LaunchSpec) -> str:
    """Where this node's output goes, for its job log ("" without ``-o``/``-e``)."""
    if not spec.output and not spec.error:
        return ""
    if spec.launch != BATCH:
        return torchrun_node(spec).describe()
    patterns = Output(*(os.path.join(output_dir(spec.log_path), p) if p else "" for p in (spec.output, spec.error)))
    tasks = f"srun tasks' {patterns.describe()} (expanded per task)"
    return f"the batch script's {batch_script(spec).describe()}; {tasks}" if spec.node_rank == 0 else tasks
