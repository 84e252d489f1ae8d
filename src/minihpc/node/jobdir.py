"""A batch job's private directory on a node: ``bin/`` (first on the job's PATH) with the
commands a Slurm batch script calls -- ``srun``, and ``scontrol`` for ``show hostnames`` --
and, on the first node, the socket through which ``srun`` asks the node's agent to start a step.

The directory belongs to the job's user and no one else (0700): only the job reaches its
agent's step server, which also checks who connects (see node.stepserver).
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import tempfile

from minihpc.node import identity

COMMANDS = {
    "srun": "minihpc.job.srun",
    "scontrol": "minihpc.cli.slurm scontrol",
}
"""The job's own commands -> the module each runs (without the cluster's credentials)."""

LOCAL_COMMANDS = {"torchrun": "minihpc.job.localnames"}
"""Added in local mode, where node names are not host names (see job.localnames)."""

SOCKET = "srun.sock"


class JobDir:
    def __init__(self, path: str):
        self.path = path

    @property
    def bin(self) -> str:
        return os.path.join(self.path, "bin")

    @property
    def socket(self) -> str:
        return os.path.join(self.path, SOCKET)

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def create(job_id: int, attempt: int, who: identity.Identity | None, local: bool = False) -> JobDir:
    """A new private directory for the job's attempt, its ``bin/`` filled, owned by ``who``;
    ``local``: the nodes are processes of this machine (local mode)."""
    jobdir = JobDir(tempfile.mkdtemp(prefix=f"minihpc-job-{job_id}-{attempt}-"))
    os.mkdir(jobdir.bin, 0o755)
    python = shlex.quote(sys.executable)
    for name, module in {**COMMANDS, **(LOCAL_COMMANDS if local else {})}.items():
        path = os.path.join(jobdir.bin, name)
        with open(path, "w") as fh:
            fh.write(f'#!/bin/sh\nexec {python} -m {module} "$@"\n')
        os.chmod(path, 0o755)
    identity.give(jobdir.path, who)
    identity.give(jobdir.bin, who, 0o755)
    os.chmod(jobdir.path, 0o700)
    return jobdir
