"""sbatch's ``-o``/``-e`` file name patterns (``man sbatch``, "filename pattern"), expanded as
pure functions: the node that opens the file knows the values (its name, the task)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from minihpc.core.errors import UsageError

NO_VAL = "4294967294"
"""What Slurm writes for %a in a job that is not an array task."""

_PATTERN = re.compile(r"\\\\|%%|%(\d*)([AabJjNnstux])")


@dataclass(frozen=True)
class Names:
    """What one file's pattern is expanded with."""

    job_id: int
    name: str
    user: str
    node: str
    node_id: int = 0
    task: int = 0
    step: str = "batch"
    array_job_id: int | None = None
    array_task_id: int | None = None


def check_pattern(text: str, option: str) -> str:
    """The pattern as given, or a UsageError for one that cannot name a file."""
    if not text.strip():
        raise UsageError(f"{option} needs a file name (a pattern such as slurm-%j.out)")
    if "\0" in text:
        raise UsageError(f"invalid {option} {text!r}: a file name cannot hold a NUL")
    return text


def expand(pattern: str, names: Names) -> str:
    """``%x-%j.out`` -> ``train-42.out``. A number after % zero-pads (``%3a`` -> 007); ``\\\\``
    anywhere turns expansion off, as in Slurm; letters Slurm does not define stay as typed."""
    if "\\\\" in pattern:
        return pattern.replace("\\\\", "")
    values = {
        "A": str(names.array_job_id if names.array_job_id is not None else names.job_id),
        "a": str(names.array_task_id) if names.array_task_id is not None else NO_VAL,
        "b": str(names.array_task_id % 10) if names.array_task_id is not None else "0",
        "J": f"{names.job_id}.{names.step}",
        "j": str(names.job_id),
        "N": names.node.split(".")[0],
        "n": str(names.node_id),
        "s": names.step,
        "t": str(names.task),
        "u": names.user,
        "x": names.name,
    }

    def one(m: re.Match) -> str:
        if m.group(0) == "%%":
            return "%"
        value = values[m.group(2)]
        width = int(m.group(1)) if m.group(1) else 0
        return value.zfill(width) if value.isdigit() else value

    return _PATTERN.sub(one, pattern)


OUTPUT_DIR = "output"
"""The folder of a job's log directory where relative ``-o``/``-e`` names go."""


def output_dir(log_path: str) -> str:
    """Where a job whose node log is ``log_path`` writes relative ``-o``/``-e`` files: a folder
    of its own (the agent hands it to the job's user; the node logs beside it stay the agent's,
    so no link the job plants there can redirect the agent's writes)."""
    return os.path.join(os.path.dirname(log_path), OUTPUT_DIR)


def shown(pattern: str, log_dir: str, names: Names) -> str:
    """``scontrol show job``'s StdOut/StdErr for a ``-o``/``-e`` pattern: the batch script's file
    (a relative name in the job's output directory under ``log_dir``, the job's log folder)."""
    name = expand(pattern, names)
    return name if os.path.isabs(name) else os.path.join(log_dir, OUTPUT_DIR, name)
