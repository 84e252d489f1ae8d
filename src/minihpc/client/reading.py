"""Reading is owned (issue 33), as Slurm's ``PrivateData=jobs`` has it: anyone sees that a job
is there and where it is -- its id, name, user, state, nodes, times and reason, what squeue
shows -- but what it runs and what it wrote (its script, args, environment, directories,
outputs, logs, log stream, progress summary and report) are its owner's and the admins'.
The one rule every face asks: the API, the web page and the CLI.
"""

from __future__ import annotations

import dataclasses

from minihpc.client.access import Principal
from minihpc.core.errors import Forbidden
from minihpc.core.models import Job

PRIVATE = frozenset({
    "script", "script_source", "script_sha256", "args", "workdir", "submit_dir", "output", "error",
    "environment", "environment_id", "warn_signal", "stdin",
})
"""A job's fields only its owner and admins read; every other field is squeue's to show."""

PUBLIC = frozenset(f.name for f in dataclasses.fields(Job)) - PRIVATE


def can_read(who: Principal, job: Job) -> bool:
    """Whether ``who`` reads all of ``job``: its owner or an admin."""
    return who.admin or job.user == who.user


def may_read(who: Principal, job: Job) -> None:
    """Forbidden unless ``who`` may read all of ``job`` (its logs, its report)."""
    if not can_read(who, job):
        raise Forbidden(f"job {job.id} belongs to {job.user}; its logs, args and reports are its owner's and "
                        f"admins' ({who.user} is neither)")


def redacted(who: Principal, job: Job) -> Job:
    """``job`` as ``who`` may see it: whole for its owner and admins, else with the
    :data:`PRIVATE` fields emptied."""
    if can_read(who, job):
        return job
    # Each emptied as its own type has it: "" for text, [] for args, {} for the environment.
    return dataclasses.replace(job, **{name: None if getattr(job, name) is None else type(getattr(job, name))()
                                       for name in PRIVATE})
