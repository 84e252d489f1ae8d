"""When a job's torchrun may be forked from the node's warm launcher, and when it must start cold.

The warm launcher (minihpc.node.warm) is a process that imported torch once. What a new
interpreter reads only while it starts -- its flags, and the variables torch and its thread
libraries read at import -- is fixed there, so a job whose environment sets any of those
differently, whose own path brings a module the launcher imported already, or that asks for it
(``--cold``), starts cold, and its log says why.
"""

from __future__ import annotations

import os

READ_AT_START = ("PYTHON", "OMP_", "GOMP_", "KMP_", "MKL_", "OPENBLAS_", "TORCH", "PYTORCH_", "TRITON_", "LD_",
                 "MALLOC_", "LOGLEVEL")
"""Prefixes of what an interpreter, torch or its thread pools read once, at start or import."""

SET_FOR_EACH_JOB = ("PYTHONPATH", "PYTHONUNBUFFERED", "PYTHONSAFEPATH")
"""Of those, what the warm launcher applies to each job itself (sys.path, write-through
output) or what only its own start differs in (safe path: it never imports job files)."""


def read_at_start(name: str) -> bool:
    return name.startswith(READ_AT_START) and name not in SET_FOR_EACH_JOB


def cold_reason(asked_cold: bool, output_files: bool, warm_env: dict[str, str], job_env: dict[str, str]) -> str | None:
    """Why this job must start cold, or None when the warm launcher may fork it.

    ``output_files``: the job writes to -o/-e files, which a small shell wrapper opens as the
    job's user before torchrun starts; ``warm_env``: the environment the warm launcher started
    with; ``job_env``: the job's."""
    if asked_cold:
        return "the job asked for a cold start (--cold)"
    if output_files:
        return "its output goes to -o/-e files, opened by a wrapper before torchrun starts"
    differ = sorted(k for k in set(warm_env) | set(job_env) if read_at_start(k) and warm_env.get(k) != job_env.get(k))
    if differ:
        shown = ", ".join(differ[:5]) + (f" and {len(differ) - 5} more" if len(differ) > 5 else "")
        return f"its environment sets {shown} differently from the warm launcher's (read only when Python starts)"
    return None


def runs_direct(tasks_per_node: int, start_method: str) -> bool:
    """Whether a warm share's child runs its rank itself instead of becoming torchrun: a share
    of one task per node has one rank, and a static rendezvous needs no agent to find the
    others (the master gave every node the same address and port). Without torchrun's agent a
    job start is one fork of the launcher, not two, and nothing polls the rank while it runs.
    ``MINIHPC_START_METHOD=spawn`` (torchrun's own way) keeps torchrun."""
    return tasks_per_node == 1 and start_method == "fork"


def child_path(cwd: str, pythonpath: str, base: list[str]) -> list[str]:
    """sys.path of a forked job, as ``python -m`` started in ``cwd`` with its PYTHONPATH would
    have it: the working directory, then PYTHONPATH's entries, then the interpreter's own
    (``base``, the warm launcher's, which has neither). Nothing is merged: an entry may repeat,
    as it does in a new interpreter (the rank replaces the first with the script's folder)."""
    return [cwd, *(os.path.abspath(p) if p else cwd for p in pythonpath.split(os.pathsep)), *base] if pythonpath \
        else [cwd, *base]


def shadowed(imported: set[str], entries: dict[str, set[str]]) -> str | None:
    """Why the job must start cold because its own path provides a module the warm launcher
    has imported already (a new interpreter would import the job's copy), or None.

    ``imported``: top-level names the launcher imported (the standard library left out);
    ``entries``: each path entry the job adds, with the modules it provides (``x.py`` or a
    package ``x/__init__.py``)."""
    for entry, names in entries.items():
        hit = sorted(names & imported)
        if hit:
            return (f"{entry} has its own {', '.join(hit[:3])}, which the warm launcher has imported already "
                    "(a new interpreter imports the job's)")
    return None
