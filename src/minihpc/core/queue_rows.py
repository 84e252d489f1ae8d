"""The rows of the web page's queue and history panels, as squeue shows a queue: a row a job,
but one row for an array's pending tasks that wait alike (``2017_[3-1000%4]``, the very rule of
``minihpc squeue``: core.arrays.collapse_pending) and running tasks one by one. Ended jobs go to
the history, newest first, where an array's tasks that ended alike without ever running are one
row too: Slurm keeps such tasks as the array's one record, so a pending array cancelled whole
shows as ``2017_[0-1000]  CA``, while tasks that ran show one by one, as sacct shows them.
Pure: the API reads the jobs, these decide the rows."""

from __future__ import annotations

import re
from dataclasses import dataclass

from minihpc.core.arrays import collapse_pending, format_indexes, parse_array
from minihpc.core.models import Job

_THROTTLE = re.compile(r"%\d+\]$")


@dataclass(frozen=True)
class Row:
    job: Job
    """The first job the row stands for: its place and its fields."""
    shown: str
    """The id the row shows: ``42``, ``2017_5``, ``2017_[3-1000%4]``."""
    count: int = 1
    """How many jobs the row stands for."""

    @property
    def ref(self) -> str:
        """The row's jobs as scancel takes them: the shown id without ``%N``."""
        return _THROTTLE.sub("]", self.shown)


@dataclass(frozen=True)
class Panel:
    rows: list[Row]
    """The rows shown, at most the limit asked for."""
    total_jobs: int
    """Every job the panel is about (the history: every ended job, read or not)."""
    total_rows: int | None
    """Every row; None where not every job was read (a long history)."""
    complete: bool = True
    """False where the last row shown may lack tasks that ended before the oldest job read."""

    @property
    def shown_jobs(self) -> int:
        return sum(row.count for row in self.rows)

    @property
    def more_jobs(self) -> int:
        """The jobs no row shown stands for: the panel's honest "N more"."""
        return max(0, self.total_jobs - self.shown_jobs)


def _rows(kept: list[Job], names: dict[int, str]) -> list[Row]:
    """Rows from a collapse's answer; a collapsed row counts the indexes its id shows."""
    rows = []
    for job in kept:
        name = names.get(job.id)
        if name is None:
            rows.append(Row(job, job.array_name))
        else:
            rows.append(Row(job, name, len(parse_array(name.partition("_[")[2].rstrip("]")).indexes)))
    return rows


def queue_panel(jobs: list[Job], limit: int) -> Panel:
    """The queue panel for ``jobs`` in squeue's order (client.jobs.queue): pending and running
    jobs only, pending array tasks collapsed as squeue collapses them."""
    active = [j for j in jobs if not j.state.terminal]
    rows = _rows(*collapse_pending(active))
    return Panel(rows[:limit], len(active), len(rows))


def _ended_key(job: Job) -> tuple | None:
    """What an ended array task that never ran shares with the tasks its row holds; None for a
    job that keeps a row of its own."""
    if job.array_job_id is None or not job.state.terminal or job.attempts:
        return None
    return job.array_job_id, job.state, job.reason


def collapse_ended(jobs: list[Job]) -> tuple[list[Job], dict[int, str]]:
    """:func:`core.arrays.collapse_pending` for ended jobs (newest first): the tasks of one array
    that never ran and ended in the same state for the same reason become one row, at the first
    one's place (``2017_[0-1000]``, ``2017_[4-1000%4]`` when throttled, as squeue shows the
    array's record); every other job stays. Same answer: (the jobs that keep a row, {job id:
    the id shown} for each row that stands for several tasks)."""
    groups: dict[tuple, list[Job]] = {}
    for job in jobs:
        key = _ended_key(job)
        if key is not None:
            groups.setdefault(key, []).append(job)
    kept, shown = [], {}
    for job in jobs:
        key = _ended_key(job)
        group = groups[key] if key is not None else None
        if group is None or group[0] is job:
            kept.append(job)
        if group is not None and group[0] is job and len(group) > 1:
            indexes = [j.array_task_id for j in group if j.array_task_id is not None]
            shown[job.id] = f"{job.array_job_id}_[{format_indexes(indexes, job.array_limit)}]"
    return kept, shown


def history_panel(ended: list[Job], total: int, limit: int) -> Panel:
    """The history panel from the newest ended jobs read (newest first) and how many jobs have
    ended in all (``total``). It is ``complete`` when every ended job was read or the oldest one
    read belongs to no row shown (read more while it is not: its row may go on past it). A job
    requeued since it was read (no longer ended) is the queue's and is left out."""
    done = [j for j in ended if j.state.terminal]
    rows = _rows(*collapse_ended(done))
    shown = rows[:limit]
    read_all = len(ended) >= total
    complete = read_all or not done or _ended_key(done[-1]) is None or not any(
        _ended_key(row.job) == _ended_key(done[-1]) for row in shown)
    return Panel(shown, max(total, len(done)), len(rows) if read_all else None, complete)
