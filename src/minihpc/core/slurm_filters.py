"""Which jobs a Slurm-style filter selects, as pure functions: the comma lists squeue, sacct
and scancel take (job ids, users, states), sacct's time window and its time forms.

Lists are split as Slurm splits them: at commas, empty items skipped. States are Slurm's, by
name or short code, in any case (``PENDING``, ``pd``, ``R``); a Slurm state that minihpc
never enters (``SUSPENDED``, ``CG``, ...) is accepted and matches no job, so scripts written
for a real cluster keep working. Every mistake is one :class:`UsageError` naming the option,
the value and what was expected.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from minihpc.core.arrays import JobRef
from minihpc.core.errors import UsageError
from minihpc.core.models import Job, JobState

SLURM_ONLY_STATES = {
    "BOOT_FAIL": "BF", "COMPLETING": "CG", "CONFIGURING": "CF", "DEADLINE": "DL",
    "OUT_OF_MEMORY": "OOM", "PREEMPTED": "PR", "REQUEUED": "RQ", "REQUEUE_FED": "RF",
    "REQUEUE_HOLD": "RH", "RESIZING": "RS", "RESV_DEL_HOLD": "RD", "REVOKED": "RV",
    "SIGNALING": "SI", "SPECIAL_EXIT": "SE", "STAGE_OUT": "SO", "STOPPED": "ST", "SUSPENDED": "S",
}
"""Slurm's job states minihpc has no use for: accepted by ``-t``/``-s``, matching nothing."""

CANCEL_STATES = ("PENDING", "RUNNING", "SUSPENDED")
"""What scancel's ``--state`` takes: "PENDING", "RUNNING" or "SUSPENDED" (scancel(1))."""


def split_list(text: str, option: str) -> list[str]:
    """``a,b,,c`` -> [a, b, c]; UsageError if nothing is left."""
    items = [item.strip() for item in text.split(",") if item.strip()]
    if not items:
        raise UsageError(f"{option} needs a comma-separated list, got {text!r}")
    return items


def parse_states(text: str, option: str = "--states") -> frozenset[JobState] | None:
    """Slurm state names or codes, comma-separated, to states; ``all`` -> None (every state)."""
    if text.strip().lower() == "all":
        return None
    names = {s.value: s for s in JobState} | {s.code: s for s in JobState}
    unused = set(SLURM_ONLY_STATES) | set(SLURM_ONLY_STATES.values())
    states = set()
    for word in split_list(text, option):
        key = word.upper()
        if key in names:
            states.add(names[key])
        elif key not in unused:
            raise UsageError(f"invalid job state {word!r} for {option}: expected a Slurm state name or code "
                             f"({', '.join(f'{s.value} ({s.code})' for s in JobState)}) or all")
    return frozenset(states)


def parse_cancel_state(text: str) -> frozenset[JobState]:
    """scancel's ``--state``: one of PENDING, RUNNING, SUSPENDED (or PD, R, S)."""
    key = text.strip().upper()
    allowed = {"PENDING": JobState.PENDING, "PD": JobState.PENDING, "RUNNING": JobState.RUNNING,
               "R": JobState.RUNNING, "SUSPENDED": None, "S": None}
    if key not in allowed:
        raise UsageError(f"invalid job state {text!r} for --state: expected {', '.join(CANCEL_STATES)} "
                         "(or PD, R, S)")
    return frozenset() if allowed[key] is None else frozenset({allowed[key]})


@dataclass(frozen=True)
class JobFilter:
    """What a user asked to see or cancel; each part given narrows (Slurm ANDs them), a part
    left None does not filter. ``names`` match whole names, case-sensitively (scancel's -n).
    ``refs``: job ids as typed (``12``, ``12_3``, ``12_[1-3]``), which the client turns into
    ``ids`` (an array's id stands for its tasks) before the filter matches anything."""

    ids: frozenset[int] | None = None
    users: frozenset[str] | None = None
    states: frozenset[JobState] | None = None
    names: frozenset[str] | None = None
    refs: tuple[JobRef, ...] | None = None
    partitions: frozenset[str] | None = None
    """squeue -p: the job's partition, "" standing for ``default_partition``."""
    nodes: frozenset[str] | None = None
    """squeue -w: jobs that hold one of these nodes."""
    default_partition: str = ""

    def matches(self, job: Job) -> bool:
        return ((self.ids is None or job.id in self.ids)
                and (self.users is None or job.user in self.users)
                and (self.states is None or job.state in self.states)
                and (self.names is None or job.name in self.names)
                and (self.partitions is None or (job.partition or self.default_partition) in self.partitions)
                and (self.nodes is None or bool(self.nodes & set(job.nodes))))

    @property
    def empty(self) -> bool:
        """True when nothing narrows: scancel refuses that ("No job identification provided")."""
        return (self.ids is None and self.users is None and self.states is None and self.names is None
                and self.refs is None)

    def wants_ended(self) -> bool:
        """Whether the filter can select an ended job (so ended jobs must be looked at)."""
        return self.states is None or any(s.terminal for s in self.states)


# -- sacct's time window --------------------------------------------------------------------

TIME_FORMS = ("YYYY-MM-DD[THH:MM[:SS]], MM/DD[/YY][-HH:MM[:SS]], MMDD[YY], HH:MM[:SS] [AM|PM], "
              "today, midnight, noon, now[{+|-}N[seconds|minutes|hours|days|weeks]]")
_UNITS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400, "week": 7 * 86400}
_NAMED_HOURS = {"midnight": 0, "noon": 12, "elevenses": 11, "fika": 15, "teatime": 16}
_CLOCK = r"(?P<h>\d{1,2}):(?P<mi>\d{2})(?::(?P<s>\d{2}))?(?:\s*(?P<ampm>[AaPp][Mm]))?"
_ISO = re.compile(rf"(?P<y>\d{{4}})-(?P<mo>\d{{1,2}})-(?P<d>\d{{1,2}})(?:[t ]{_CLOCK})?")
_US = re.compile(rf"(?P<mo>\d{{1,2}})(?P<sep>[/.]?)(?P<d>\d{{1,2}})(?:(?P=sep)(?P<y>\d{{2}}))?(?:-{_CLOCK})?")
_TIME_ONLY = re.compile(_CLOCK)
_NOW = re.compile(r"now(?:\s*(?P<sign>[+-])\s*(?P<n>\d+)\s*(?P<unit>[a-z]*))?")


def parse_slurm_time(text: str, now: float, option: str = "--starttime") -> float:
    """sacct's -S/-E forms (parse_time() with its ``past`` flag, as sacct calls it) to a Unix
    time in the local time zone: a date without a year is this year unless its month is still
    to come (then last year); a time without a date is today; a date without a time is 00:00.
    Relative units are Slurm's, spelled out (``now-2hours``, ``now-1day``); a bare count is
    seconds."""
    raw = text.strip()
    try:
        value = _parse_time(raw.lower(), datetime.fromtimestamp(now))
    except ValueError:  # a field out of range (month 13, hour 25, Feb 30)
        value = None
    if value is None:
        raise UsageError(f"invalid time {text!r} for {option}: expected {TIME_FORMS}")
    return value


def _parse_time(raw: str, now: datetime) -> float | None:
    m = _NOW.fullmatch(raw)
    if m:
        return _relative(m, now)
    if raw in ("today", "tomorrow"):
        day = now + timedelta(days=raw == "tomorrow")
        return datetime(day.year, day.month, day.day).timestamp()
    if raw in _NAMED_HOURS:
        return datetime(now.year, now.month, now.day, _NAMED_HOURS[raw]).timestamp()
    m = _ISO.fullmatch(raw)
    if m:
        return _at(int(m["y"]), int(m["mo"]), int(m["d"]), m)
    m = _TIME_ONLY.fullmatch(raw)
    if m:
        return _at(now.year, now.month, now.day, m)
    m = _US.fullmatch(raw)
    if m and (m["sep"] or len(raw.split("-")[0]) in (4, 6)):  # MMDD[YY] has no separators
        month = int(m["mo"])
        year = 2000 + int(m["y"]) if m["y"] else (now.year - 1 if month > now.month else now.year)
        return _at(year, month, int(m["d"]), m)
    return None


def _relative(m: re.Match, now: datetime) -> float | None:
    if not m["sign"]:
        return now.timestamp()
    unit = m["unit"] or "second"
    unit = unit[:-1] if unit.endswith("s") and unit[:-1] in _UNITS else unit
    if unit not in _UNITS:
        return None
    delta = int(m["n"]) * _UNITS[unit]
    return now.timestamp() + (delta if m["sign"] == "+" else -delta)


def _at(year: int, month: int, day: int, m: re.Match) -> float:
    hour = int(m["h"]) if m["h"] else 0
    if m["ampm"]:
        if hour > 12:
            raise ValueError(f"hour {hour} with AM/PM")
        hour = hour % 12 + (12 if m["ampm"].lower() == "pm" else 0)
    return datetime(year, month, day, hour, int(m["mi"] or 0), int(m["s"] or 0)).timestamp()


def in_window(job: Job, start: float | None, end: float | None,
              states: frozenset[JobState] | None = None) -> bool:
    """sacct's time window (DEFAULT TIME WINDOW in sacct(1)): without ``-s``, a job that was
    in any state between ``start`` and ``end`` -- submitted by ``end`` and not ended before
    ``start``; with ``-s``, a job that was in one of those states then -- an ended one ended
    inside the window, a running one started by ``end``, a pending one submitted by ``end``.
    None is an open end."""
    lo = float("-inf") if start is None else start
    hi = float("inf") if end is None else end
    if states is None:
        return job.submitted_at <= hi and (job.ended_at is None or job.ended_at >= lo)
    if job.state.terminal:
        return job.ended_at is not None and lo <= job.ended_at <= hi
    if job.state is JobState.RUNNING:
        return (job.started_at or job.submitted_at) <= hi
    return job.submitted_at <= hi


def local_time(ts: float | None, missing: str = "Unknown") -> str:
    """Slurm's time stamps (``2024-01-31T09:05:00``, local time); ``missing`` for none."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(ts)) if ts else missing
