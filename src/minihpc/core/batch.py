"""How a job's script is started, as pure functions: through torchrun (a Python training
script, minihpc's default) or as a Slurm batch script (once, on the first node, with ``srun``
on its PATH to start tasks across the allocation).

A user chooses with ``--launch=torchrun|batch``; without it the script decides: a shebang that
names an interpreter other than Python (``#!/bin/bash``), or ``--wrap``, makes a batch job; a
Python script (``#!/usr/bin/env python3``, or no shebang and a ``.py`` name) runs through
torchrun, as it always has. Slurm refuses a script without a shebang; so does minihpc, for a
script that is not Python.
"""

from __future__ import annotations

import os
import shlex

from minihpc.core.errors import UsageError

TORCHRUN = "torchrun"
BATCH = "batch"
LAUNCHES = (TORCHRUN, BATCH)

SHELL_SUFFIXES = (".sh", ".bash", ".zsh", ".slurm", ".sbatch", ".job")
"""Names of scripts that are surely not Python: without a #! line they are refused, not run
through torchrun."""

WRAP_SHELL = "/bin/sh"
"""What runs a ``--wrap`` command, as sbatch does (``#!/bin/sh``)."""


def shebang(text: str) -> list[str] | None:
    """The interpreter line's words (``#!/usr/bin/env bash -l`` -> ["/usr/bin/env", "bash",
    "-l"]), or None without one."""
    first = text.split("\n", 1)[0]
    if not first.startswith("#!"):
        return None
    words = first[2:].strip().split()
    return words or None


def is_python(words: list[str]) -> bool:
    """Whether an interpreter line runs Python (``python``, ``python3.11``, via ``env``)."""
    names = [os.path.basename(w) for w in words if not w.startswith("-")]
    if names and names[0] == "env":
        names = names[1:]
    return bool(names) and names[0].startswith("python")


def launch_mode(text: str, name: str, forced: str | None = None) -> str:
    """How the script ``name`` with ``text`` runs: ``forced`` (``--launch``) when given, else
    batch for a non-Python interpreter line, else torchrun (Python, or no #! line: minihpc's
    scripts have always been Python). A shell script without a #! line is refused, with
    sbatch's reason."""
    if forced is not None:
        if forced not in LAUNCHES:
            raise UsageError(f"--launch {forced!r}: expected one of {', '.join(LAUNCHES)}")
        if forced == BATCH and shebang(text) is None:
            raise UsageError(f"script {name!r} has no #! line: a batch script's first line must name "
                             "its interpreter (#!/bin/bash), as sbatch requires")
        return forced
    words = shebang(text)
    if words is not None:
        return TORCHRUN if is_python(words) else BATCH
    if name.endswith(SHELL_SUFFIXES):
        raise UsageError(f"script {name!r} does not look like a batch script: its first line must start "
                         "with #! and name the interpreter (#!/bin/bash), as sbatch requires")
    return TORCHRUN


def wrap_script(command: str) -> str:
    """The batch script sbatch makes of ``--wrap=COMMAND``."""
    if not command.strip():
        raise UsageError("--wrap needs a command")
    return f"#!{WRAP_SHELL}\n# This script was created by minihpc submit --wrap.\n\n{command}\n"


def batch_argv(text: str, script: str, args: list[str]) -> list[str]:
    """The command that runs a batch script: its interpreter line, the script, its arguments
    (the spooled copy is read-only, so it is handed to its interpreter rather than executed)."""
    words = shebang(text)
    if words is None:
        raise UsageError(f"script {script!r} has no #! line")
    return [*words, script, *args]


def tasks_per_node_text(counts: list[int]) -> str:
    """Slurm's SLURM_TASKS_PER_NODE form: runs of equal counts as ``2(x3)``, joined by commas."""
    out: list[str] = []
    i = 0
    while i < len(counts):
        j = i
        while j < len(counts) and counts[j] == counts[i]:
            j += 1
        out.append(f"{counts[i]}(x{j - i})" if j - i > 1 else str(counts[i]))
        i = j
    return ",".join(out)


def batch_env(nodes: list[str], tasks_per_node: int, user: str, uid: int | None) -> dict[str, str]:
    """What a batch script's environment adds to every job's (see launch_spec.job_env): it is
    task 0 on node 0, and the allocation's layout (``man sbatch``, OUTPUT ENVIRONMENT VARIABLES)."""
    env = {
        "SLURM_NODEID": "0",
        "SLURM_PROCID": "0",
        "SLURM_LOCALID": "0",
        "SLURM_TASKS_PER_NODE": tasks_per_node_text([tasks_per_node] * len(nodes)),
        "SLURM_JOB_CPUS_PER_NODE": tasks_per_node_text([tasks_per_node] * len(nodes)),
        "SLURM_CPUS_ON_NODE": str(tasks_per_node),
        "SLURM_GTIDS": "0",
        "SLURM_JOB_USER": user,
        "ENVIRONMENT": "BATCH",
    }
    if uid is not None:
        env["SLURM_JOB_UID"] = str(uid)
    return env


def quote(argv: list[str]) -> str:
    return " ".join(shlex.quote(a) for a in argv)
