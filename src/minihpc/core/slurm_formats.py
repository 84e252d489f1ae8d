"""What squeue's and sacct's ``--format`` print, as pure functions, and when a pending job is
expected to start (squeue's ``--start`` and ``%S``).

squeue(1) ``-o "%[[.]size]type[suffix]"``: text before the first ``%`` is printed first,
text after a field follows it; ``.`` right-justifies, a size pads and cuts (node lists are
never cut), ``%%`` is a literal ``%``. ``-`` (``%-10j``) is taken as the default,
left-justified: squeue itself rejects it.

sacct(1) ``-o field[%N],...``: names as sacct spells them, in any case; each column is
right-justified to sacct's own width (JobID left-justified), ``%N`` sets the width and
``%-N`` left-justifies; a longer value is cut and ends in ``+``. ``-p``/``-P`` print the
values whole, ``|``-separated (``-p`` with a trailing ``|``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from minihpc.core import dependency as dependencies
from minihpc.core.arrays import collapse_pending
from minihpc.core.errors import UsageError
from minihpc.core.models import Job, JobState, NodeStatus, Priority
from minihpc.core.outcome import format_exit
from minihpc.core.parsing import compress_hostlist, format_duration, format_elapsed
from minihpc.core.partitions import Partitions
from minihpc.core.scheduler import plan
from minihpc.core.slurm_filters import local_time

PARTITION = "main"
"""The one partition minihpc has (every node): what squeue's %P and sacct's Partition show."""

PRIORITY_NUMBERS = {Priority.HIGH: 3, Priority.NORMAL: 2, Priority.LOW: 1}
"""squeue's %Q and sacct's Priority are numbers, larger first: minihpc's classes as 3, 2, 1."""

START_FORMAT = "%.18i %.9P %.8j %.8u %.2t %.19S %.6D %20Y %R"
"""squeue --start's format (squeue's own default for it)."""


@dataclass(frozen=True)
class Column:
    field: str  # squeue's letter, or sacct's field name as sacct spells it
    width: int = 0  # 0: the value as it is
    right: bool = False
    suffix: str = ""  # squeue: the literal text after the field


@dataclass(frozen=True)
class View:
    """What a row needs besides its job: the time now and the expected starts."""

    now: float
    starts: dict[int, float | None] = field(default_factory=dict)
    names: dict[int, str] = field(default_factory=dict)
    """The id shown by a row that stands for several pending array tasks (``12_[4-15]``, see
    core.arrays.collapse_pending), by the job id of the first of them."""


def _array_index(job: Job, view: View) -> str:
    """%K: the array index, the indexes of a collapsed row (``4-15%4``), N/A for no array."""
    if job.id in view.names:
        return view.names[job.id].partition("_[")[2].rstrip("]")
    return "N/A" if job.array_task_id is None else str(job.array_task_id)


def elapsed(job: Job, now: float) -> float:
    if job.started_at is None:
        return 0.0
    return (job.ended_at or now) - job.started_at


def _start(job: Job, view: View) -> str:
    if job.state is JobState.PENDING:
        expected = view.starts.get(job.id)
        return "N/A" if expected is None else local_time(expected)
    return local_time(job.started_at, "N/A")


def _end(job: Job, view: View) -> str:
    if job.state.terminal:
        return local_time(job.ended_at, "N/A")
    begin = job.started_at if job.state is JobState.RUNNING else view.starts.get(job.id)
    if begin is None:
        return "N/A"
    return "Unknown" if job.time_limit is None else local_time(begin + job.time_limit)


def _left(job: Job, view: View) -> str:
    if job.time_limit is None:
        return "UNLIMITED"
    return format_duration(max(0.0, job.time_limit - elapsed(job, view.now)))


def _reason_list(job: Job) -> str:
    """%R: "(reason)" for a pending, timed-out or failed job, else the node list."""
    if job.state in (JobState.PENDING, JobState.TIMEOUT, JobState.FAILED) or not job.nodes:
        return f"({job.reason})"
    return compress_hostlist(job.nodes)


SQUEUE_FIELDS: dict[str, tuple[str, Callable[[Job, View], str]]] = {
    "i": ("JOBID", lambda j, v: v.names.get(j.id, j.array_name)),
    "A": ("JOBID", lambda j, v: str(j.id)),
    "F": ("ARRAY_JOB_ID", lambda j, v: str(j.id if j.array_job_id is None else j.array_job_id)),
    "K": ("ARRAY_TASK_ID", _array_index),
    "j": ("NAME", lambda j, v: j.name),
    "u": ("USER", lambda j, v: j.user),
    "t": ("ST", lambda j, v: j.state.code),
    "T": ("STATE", lambda j, v: j.state.value),
    "M": ("TIME", lambda j, v: format_duration(elapsed(j, v.now))),
    "l": ("TIME_LIMIT", lambda j, v: format_duration(j.time_limit)),
    "L": ("TIME_LEFT", _left),
    "D": ("NODES", lambda j, v: str(len(j.nodes) or j.nodes_requested)),
    "R": ("NODELIST(REASON)", lambda j, v: _reason_list(j)),
    "N": ("NODELIST", lambda j, v: compress_hostlist(j.nodes)),
    "r": ("REASON", lambda j, v: j.reason),
    "P": ("PARTITION", lambda j, v: PARTITION),
    "Q": ("PRIORITY", lambda j, v: str(PRIORITY_NUMBERS[j.priority])),
    "V": ("SUBMIT_TIME", lambda j, v: local_time(j.submitted_at, "N/A")),
    "S": ("START_TIME", _start),
    "e": ("END_TIME", _end),
    "Y": ("SCHEDNODES", lambda j, v: "(null)"),
    "Z": ("WORK_DIR", lambda j, v: j.workdir),
    "o": ("COMMAND", lambda j, v: " ".join([j.script_source, *j.args])),
    "E": ("DEPENDENCY", lambda j, v: dependencies.to_text(j.dependency)),
}
"""squeue's %-letters minihpc can fill: (header, value). As squeue(1) has them for arrays: %i
``<base_job_id>_<index>`` (a collapsed row's ``12_[4-15]``), %A the task's own job id, %F the
array's id, %K the index."""

_SQUEUE_TOKEN = re.compile(r"%%|%(?P<right>\.)?-?(?P<width>\d*)(?P<field>.?)", re.S)


def parse_squeue_format(text: str) -> tuple[str, list[Column]]:
    """squeue's ``-o`` string -> (the text before the first field, the fields)."""
    prefix, columns, last = "", [], 0
    for m in _SQUEUE_TOKEN.finditer(text):
        literal = text[last:m.start()] + ("%" if m.group(0) == "%%" else "")
        last = m.end()
        if columns:
            columns[-1] = Column(columns[-1].field, columns[-1].width, columns[-1].right, columns[-1].suffix + literal)
        else:
            prefix += literal
        if m.group(0) == "%%":
            continue
        letter = m["field"]
        if letter not in SQUEUE_FIELDS or not letter:
            known = " ".join(f"%{k}" for k in SQUEUE_FIELDS)
            what = f"format field %{letter}" if letter else "a '%' with no field after it"
            raise UsageError(f"invalid --format {text!r}: {what}; expected one of {known}")
        columns.append(Column(letter, int(m["width"] or 0), bool(m["right"])))
    tail = text[last:]
    if columns:
        columns[-1] = Column(columns[-1].field, columns[-1].width, columns[-1].right, columns[-1].suffix + tail)
    else:
        prefix += tail
    if not columns:
        raise UsageError(f"invalid --format {text!r}: no %-field in it (e.g. \"%.18i %.8j %.2t\")")
    return prefix, columns


def _squeue_cell(text: str, column: Column, cut: bool) -> str:
    """squeue's _print_str(): a left-justified value is always cut to its size, a
    right-justified one only where ``cut``."""
    if not column.width:
        return text
    if column.right:
        padded = text.rjust(column.width)
        return padded[:column.width] if cut else padded
    return text[:column.width].ljust(column.width)


def squeue_lines(prefix: str, columns: list[Column], jobs: list[Job], view: View,
                 header: bool = True) -> list[str]:
    jobs, names = collapse_pending(jobs)  # an array's pending tasks: one row, as squeue shows them
    view = replace(view, names=names)
    lines = []
    if header:
        lines.append(prefix + "".join(
            _squeue_cell(SQUEUE_FIELDS[c.field][0], c, c.field not in "RN") + c.suffix for c in columns))
    for job in jobs:
        cells = []
        for c in columns:
            value = SQUEUE_FIELDS[c.field][1](job, view)
            node_list = c.field == "N" or (c.field == "R" and not value.startswith("("))
            cells.append(_squeue_cell(value, c, not node_list) + c.suffix)
        lines.append(prefix + "".join(cells))
    return lines


def _exit(job: Job) -> str:
    return "0:0" if job.exit_code is None else format_exit(job.exit_code, job.signal)


SACCT_FIELDS: dict[str, tuple[int, Callable[[Job, float], str]]] = {
    "AllocNodes": (10, lambda j, now: str(len(j.nodes))),
    "Elapsed": (10, lambda j, now: format_elapsed(elapsed(j, now))),
    "ElapsedRaw": (10, lambda j, now: str(int(elapsed(j, now)))),
    "End": (19, lambda j, now: local_time(j.ended_at)),
    "ExitCode": (8, lambda j, now: _exit(j)),
    "JobID": (-12, lambda j, now: j.array_name),
    "JobIDRaw": (-12, lambda j, now: str(j.id)),
    "JobName": (10, lambda j, now: j.name),
    "NNodes": (8, lambda j, now: str(len(j.nodes) or j.nodes_requested)),
    "NodeList": (15, lambda j, now: compress_hostlist(j.nodes) or "None assigned"),
    "NTasks": (8, lambda j, now: str((len(j.nodes) or j.nodes_requested) * j.tasks_per_node)),
    "Partition": (10, lambda j, now: PARTITION),
    "Priority": (10, lambda j, now: str(PRIORITY_NUMBERS[j.priority])),
    "Reason": (22, lambda j, now: j.reason),
    "ReqNodes": (8, lambda j, now: str(j.nodes_requested)),
    "Start": (19, lambda j, now: local_time(j.started_at)),
    "State": (10, lambda j, now: j.state.value),
    "Submit": (19, lambda j, now: local_time(j.submitted_at)),
    "Timelimit": (10, lambda j, now: "UNLIMITED" if j.time_limit is None else format_elapsed(j.time_limit)),
    "TimelimitRaw": (10, lambda j, now: "UNLIMITED" if j.time_limit is None else str(math.ceil(j.time_limit / 60))),
    "User": (9, lambda j, now: j.user),
    "WorkDir": (20, lambda j, now: j.workdir),
}
"""sacct's fields minihpc can fill: (sacct's width, negative for left-justified; value)."""

HISTORY_FIELDS = "JobID,JobName,User,State,ExitCode,Elapsed,NNodes,NodeList"
"""What ``history -P`` prints without ``-o``: the default table's columns, by sacct's names."""


def parse_sacct_fields(text: str) -> list[Column]:
    """sacct's ``-o JobID,JobName%30,State%-12`` -> columns."""
    by_lower = {name.lower(): name for name in SACCT_FIELDS}
    columns = []
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        name, percent, width_text = item.partition("%")
        if name.lower() not in by_lower:
            raise UsageError(f"invalid field {name!r} in --format: expected one of {', '.join(SACCT_FIELDS)} "
                             "(any case, optionally %WIDTH)")
        if percent and not re.fullmatch(r"-?\d+", width_text):
            raise UsageError(f"invalid width {item!r} in --format: expected FIELD%N or FIELD%-N")
        name = by_lower[name.lower()]
        width = int(width_text) if percent and int(width_text) else SACCT_FIELDS[name][0]
        columns.append(Column(name, abs(width), width > 0))
    if not columns:
        raise UsageError(f"--format needs a comma-separated list of fields, got {text!r}")
    return columns


def _sacct_cell(text: str, column: Column) -> str:
    if len(text) > column.width:
        text = text[:column.width - 1] + "+"
    return (text.rjust(column.width) if column.right else text.ljust(column.width)) + " "


def sacct_lines(columns: list[Column], jobs: list[Job], now: float, header: bool = True,
                parsable: str | None = None) -> list[str]:
    """sacct's output: fixed-width columns under a header and a dashed line, or with
    ``parsable`` "p" or "P" the whole values ``|``-separated (``p`` ends each line with ``|``)."""
    rows = [[SACCT_FIELDS[c.field][1](job, now) for c in columns] for job in jobs]
    names = [c.field for c in columns]
    if parsable:
        end = "|" if parsable == "p" else ""
        return ["|".join(row) + end for row in ([names] if header else []) + rows]
    lines = []
    if header:
        lines.append("".join((c.field.rjust if c.right else c.field.ljust)(c.width)[:c.width] + " " for c in columns))
        lines.append("".join("-" * c.width + " " for c in columns))
    lines.extend("".join(_sacct_cell(v, c) for v, c in zip(row, columns)) for row in rows)
    return lines


def expected_starts(pending: list[Job], nodes: list[NodeStatus], running: list[Job],
                    dependency_states: dict[int, JobState | None], now: float,
                    partitions: Partitions | None = None, cpus_override: int = 0) -> dict[int, float | None]:
    """When each pending job is expected to start, by the backfill plan the master follows
    (:func:`scheduler.plan`, with the same partitions and CPU override): ``now`` for a job it
    starts now, the start it promises a job waiting for nodes. None where no start can be
    promised: a dependency, a hold, ``--begin`` or an array throttle, more nodes than its
    eligible ones, or only jobs without a time limit ahead of it."""
    decided = plan(pending, nodes, running, dependency_states, now, partitions, cpus_override)
    out: dict[int, float | None] = {job.id: decided.promised.get(job.id) for job in pending}
    out.update({job_id: now for job_id, _ in decided.starts})
    return out
