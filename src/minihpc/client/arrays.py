"""Job arrays (``sbatch --array``) for every face: an array's tasks as job records, and job ids
as users type them (``12``, ``12_3``, ``12_[1-3]``) resolved to the jobs they name.

An array of N tasks takes N job ids in a row (one INCRBY), A to A+N-1, numbered as real Slurm
numbers them (checked against it: tests/integration/test_slurm_oracle.py): the last index keeps
the array's own id A and the others take A+1, A+2... in index order (Slurm splits tasks off the
array's record as they start; the last one left is that record). ``A`` alone names the whole
array wherever a job id is typed (scancel, squeue -j, sacct -j, scontrol show job,
--dependency). Each task has a spool directory of its own, hard links to the read-only files
spooled for A, so forgetting one task never takes another's script or working tree."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import replace

from minihpc.core.arrays import ArraySpec, JobRef, parse_job_ref
from minihpc.core.errors import MinihpcError, NotFound
from minihpc.core.models import Job
from minihpc.core.slurm_filters import JobFilter
from minihpc.machine import files
from minihpc.state.store import Store


def task_id(array_id: int, offset: int, count: int) -> int:
    """The job id of the array's ``offset``-th index (of ``count``): Slurm's numbering."""
    return array_id if offset == count - 1 else array_id + 1 + offset


def spool_tasks(first: Job, spec: ArraySpec, spool_root: str) -> list[Job]:
    """The array's task records in index order: ``first`` (already spooled, in
    ``job-<first.id>``) becomes the last index's, and every other index gets its id
    (:func:`task_id`), its spool directory a linked copy of the first's (made durable here),
    its paths moved there."""
    import shutil  # here: a command that only reads jobs need not import it

    first_dir = os.path.join(spool_root, f"job-{first.id}")
    tasks = []
    count = len(spec.indexes)
    for offset, index in enumerate(spec.indexes):
        own = task_id(first.id, offset, count)
        task_dir = os.path.join(spool_root, f"job-{own}")
        if own != first.id:
            shutil.copytree(first_dir, task_dir, copy_function=_link)
            files.fsync_dir(task_dir)

        def moved(path: str, task_dir=task_dir) -> str:
            inside = path == first_dir or path.startswith(first_dir + os.sep)
            return task_dir + path[len(first_dir):] if inside else path

        tasks.append(replace(
            first, id=own, script=moved(first.script), script_source=moved(first.script_source),
            workdir=moved(first.workdir), submit_dir=moved(first.submit_dir), array_job_id=first.id,
            array_task_id=index, array_spec=spec.text, array_limit=spec.limit,
        ))
    if len(tasks) > 1:
        files.fsync_dir(spool_root)
    return tasks


def _link(src: str, dst: str) -> None:
    """A spooled file is read-only: a hard link is as good as a copy and costs no space."""
    import shutil

    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def resolve(store: Store, refs: list[JobRef], live_only: bool = False) -> tuple[list[int], list[MinihpcError]]:
    """The job ids ``refs`` name, in order without repeats, and an error for each ref that names
    none: a plain id, that job -- or every task when it is an array's id (``live_only``: the
    pending and running ones, as scancel reaches; the array's id itself when none is left, so
    the caller reports it ended); ``A_i``, task i of array A."""
    ids: dict[int, None] = {}
    errors: list[MinihpcError] = []
    for ref in refs:
        tasks = store.array_tasks(ref.job)
        if ref.tasks is None:
            chosen = list(tasks.values()) or [ref.job]
            if live_only and tasks:
                chosen = [j.id for j in store.get_jobs(chosen) if not j.state.terminal] or [ref.job]
        else:
            chosen = [tasks[i] for i in ref.tasks if i in tasks]
            if not chosen:
                what = "is no job array" if not tasks else f"has no task {ref.tasks[0]}"
                errors.append(NotFound(f"job {ref}: job {ref.job} {what}"))
        ids.update(dict.fromkeys(chosen))
    return list(ids), errors


def named_jobs(store: Store, text: str) -> list[Job]:
    """The jobs one typed id names (``show``, ``scontrol show job``, ``wait``): the job, an
    array's tasks in index order, or one task. UsageError for a malformed id, NotFound for one
    that names no job."""
    ids, errors = resolve(store, [parse_job_ref(text)])
    if errors:
        raise errors[0]
    jobs = store.get_jobs(ids)
    if not jobs:
        raise NotFound(f"job {text} does not exist")
    return jobs


def one_job(store: Store, text: str) -> int:
    """The id of the one job ``text`` names (``logs``): a job's, or an array task's (``12_3``);
    a whole array's id names the task whose id it is (its last index's)."""
    ref = parse_job_ref(text)
    if ref.tasks is None:
        return ref.job
    ids, errors = resolve(store, [ref])
    if errors:
        raise errors[0]
    return ids[0]


def resolve_filter(store: Store, flt: JobFilter) -> JobFilter:
    """``flt`` with the job ids it was typed with (``refs``) turned into the jobs they name
    (squeue -j, sacct -j); a ref that names none selects nothing, as before."""
    if flt.refs is None:
        return flt
    ids, _ = resolve(store, list(flt.refs))
    named = frozenset(ids) if flt.ids is None else flt.ids & frozenset(ids)
    return dataclasses.replace(flt, ids=named, refs=None)
