"""Job arrays (``sbatch --array``) as pure functions: the index forms Slurm takes, and the
array's figures its tasks see (SLURM_ARRAY_TASK_COUNT, _MIN, _MAX, _STEP)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from minihpc.core.errors import UsageError
from minihpc.core.models import Job, JobState

MAX_ARRAY_SIZE = 1001
"""Slurm's default MaxArraySize: indexes run from 0 to 1000."""

_FORMS = "indexes such as 0-15, 1,3,5 or 0-10:2, optionally with %N (at most N at once)"
_TERM = re.compile(r"(\d+)(?:-(\d+)(?::(\d+))?)?")


@dataclass(frozen=True)
class ArraySpec:
    indexes: tuple[int, ...]
    """Sorted, without repeats."""
    limit: int = 0
    """%N: at most N tasks run at once; 0 : no limit."""
    text: str = ""
    """The indexes as given, without %N."""

    @property
    def step(self) -> int:
        """SLURM_ARRAY_TASK_STEP: the step of a single ``a-b:s`` range, else 1."""
        m = _TERM.fullmatch(self.text)
        return int(m.group(3)) if m and m.group(3) else 1


def parse_array(text: str) -> ArraySpec:
    """``0-15%4``, ``1,3,5``, ``0-10:2`` -> an :class:`ArraySpec`; UsageError for anything else
    (an index past MAX_ARRAY_SIZE - 1, a range that ends before it starts, a zero step)."""
    raw = text.strip()
    body, pct, limit_text = raw.partition("%")
    limit = 0
    if pct:
        if not limit_text.isdigit() or int(limit_text) < 1:
            raise UsageError(f"invalid --array {text!r}: %N needs a whole number of at least 1")
        limit = int(limit_text)
    indexes: set[int] = set()
    for term in body.split(","):
        m = _TERM.fullmatch(term.strip())
        if not m:
            raise UsageError(f"invalid --array {text!r}: {term!r} is not one of {_FORMS}")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        step = int(m.group(3)) if m.group(3) is not None else 1
        if hi < lo:
            raise UsageError(f"invalid --array {text!r}: range {term!r} ends before it starts")
        if step < 1:
            raise UsageError(f"invalid --array {text!r}: the step in {term!r} must be at least 1")
        if hi >= MAX_ARRAY_SIZE:
            raise UsageError(f"invalid --array {text!r}: index {hi} is over the largest, {MAX_ARRAY_SIZE - 1}")
        indexes.update(range(lo, hi + 1, step))
    return ArraySpec(tuple(sorted(indexes)), limit, body.strip())


def array_env(array_job_id: int, task_id: int | None, spec_text: str) -> dict[str, str]:
    """An array task's SLURM_ARRAY_* variables (``man sbatch``, OUTPUT ENVIRONMENT VARIABLES)."""
    spec = parse_array(spec_text)
    return {
        "SLURM_ARRAY_JOB_ID": str(array_job_id),
        "SLURM_ARRAY_TASK_ID": str(task_id),
        "SLURM_ARRAY_TASK_COUNT": str(len(spec.indexes)),
        "SLURM_ARRAY_TASK_MIN": str(spec.indexes[0]),
        "SLURM_ARRAY_TASK_MAX": str(spec.indexes[-1]),
        "SLURM_ARRAY_TASK_STEP": str(spec.step),
    }


def format_indexes(indexes: list[int] | tuple[int, ...], limit: int = 0) -> str:
    """Indexes as squeue shows a pending array's: runs of consecutive ones as ``a-b``, joined by
    ``,`` (``1,3,5-7``), and ``%N`` after them for a throttled array (``4-15%4``)."""
    runs: list[list[int]] = []
    for index in sorted(set(indexes)):
        if runs and index == runs[-1][1] + 1:
            runs[-1][1] = index
        else:
            runs.append([index, index])
    text = ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)
    return f"{text}%{limit}" if limit else text


# -- job ids as users type them: 12, 12_3, 12_[1-3,5] ----------------------------------------

@dataclass(frozen=True)
class JobRef:
    """A job id as typed: job ``job`` (the whole array when ``job`` is an array's id, as Slurm
    reads it), or with ``tasks`` the array tasks of those indexes."""

    job: int
    tasks: tuple[int, ...] | None = None

    def __str__(self) -> str:
        if self.tasks is None:
            return str(self.job)
        if len(self.tasks) == 1:
            return f"{self.job}_{self.tasks[0]}"
        return f"{self.job}_[{format_indexes(self.tasks)}]"


_REF = re.compile(r"(\d+)(?:_(\d+|\[([^\]]*)\]))?")


def parse_job_ref(word: str, option: str = "") -> JobRef:
    """``12`` / ``12_3`` / ``12_[1-3,5]`` -> a :class:`JobRef`; UsageError otherwise (a step,
    ``12.0``, is refused: minihpc jobs have none)."""
    m = _REF.fullmatch(word.strip())
    if not m or int(m.group(1)) < 1:
        hint = "; minihpc jobs have no steps" if "." in word else ""
        where = f" for {option}" if option.startswith("-") else ""
        raise UsageError(f"invalid job id {word!r}{where}: expected a positive number, "
                         f"or an array task as ID_INDEX or ID_[INDEXES]{hint}")
    if m.group(2) is None:
        return JobRef(int(m.group(1)))
    if m.group(3) is None:
        return JobRef(int(m.group(1)), (int(m.group(2)),))
    if "%" in m.group(3):
        raise UsageError(f"invalid job id {word!r}: %N belongs to --array, not to a job id")
    try:
        return JobRef(int(m.group(1)), parse_array(m.group(3)).indexes)
    except UsageError as exc:
        raise UsageError(f"invalid job id {word!r}: {str(exc).partition(': ')[2]}") from None


def parse_job_refs(text: str, option: str = "--jobs") -> list[JobRef]:
    """A comma list of job ids (``12,13_2,14_[1-3,5]``; a comma inside brackets stays in its
    id), in order without repeats; UsageError if one is wrong or none is given."""
    words, depth, word = [], 0, ""
    for ch in text:
        depth += (ch == "[") - (ch == "]")
        if ch == "," and depth == 0:
            words.append(word)
            word = ""
        else:
            word += ch
    words = [w.strip() for w in [*words, word] if w.strip()]
    if not words:
        raise UsageError(f"{option or 'a job list'} needs a comma-separated list of job ids, got {text!r}")
    return list(dict.fromkeys(parse_job_ref(w, option) for w in words))


# -- an array as one job: its dependency state, its pending tasks in squeue -----------------

def array_state(states: list[JobState | None]) -> JobState | None:
    """The state a dependency on a whole array sees (``afterok:A``, Slurm's
    ``test_job_array_*``): PENDING while a task is pending, RUNNING while one runs, then
    COMPLETED when every task completed, else the first other end (FAILED, CANCELLED, ...);
    None when no task has a record."""
    known = [s for s in states if s is not None]
    if not known:
        return None
    for waiting in (JobState.PENDING, JobState.RUNNING):
        if waiting in known:
            return waiting
    failed = [s for s in known if s is not JobState.COMPLETED]
    return failed[0] if failed else JobState.COMPLETED


def collapse_pending(jobs: list[Job]) -> tuple[list[Job], dict[int, str]]:
    """squeue's rows for ``jobs``: the pending tasks of one array waiting for the same reason
    become one row, at the first one's place, shown as ``A_[4-15]`` (``A_[4-15%4]`` when
    throttled); every other job stays. Returns (the jobs that keep a row, {job id: the id shown}
    for each row that stands for several tasks)."""
    groups: dict[tuple[int, str], list[Job]] = {}
    for job in jobs:
        if job.state is JobState.PENDING and job.array_job_id is not None:
            groups.setdefault((job.array_job_id, job.reason), []).append(job)
    kept, shown = [], {}
    for job in jobs:
        group = groups.get((job.array_job_id, job.reason)) if job.state is JobState.PENDING else None
        if group is None:
            kept.append(job)
        elif group[0] is job:
            kept.append(job)
            if len(group) > 1:
                indexes = [j.array_task_id for j in group if j.array_task_id is not None]
                shown[job.id] = f"{job.array_job_id}_[{format_indexes(indexes, job.array_limit)}]"
    return kept, shown
