"""What a progress record may hold: the one check between a job script's progress file and
the cluster state (the agent applies it before forwarding; the readers trust nothing else).

A record is a JSON object with ``step`` (a whole number >= 0), ``at`` (Unix time, close to the
node's clock) and metrics named like identifiers (the cluster shows :data:`METRICS`; a job may
report others, e.g. ``lr``), each a number. A bad ``step`` or ``at``, or a record that is too
big, rejects the whole record; a metric that is not a number, or a key the cluster writes
itself (``node``, ``attempt``), is dropped and said so; a NaN or infinite metric (a diverging
loss) is left out quietly: it is the job's news, not a malformed record.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field

PHASES = ("data", "forward", "backward", "allreduce", "optimizer")
"""The step phases a job times (the same names as minihpc.job.progress.PHASES, which the job
layer keeps for itself: core imports nothing of ours)."""

METRICS = frozenset({"total", "loss", "samples_per_second", "grad_norm", "rank", *(f"{p}_seconds" for p in PHASES)})
"""The metrics the cluster knows how to show (exporter, monitor, report)."""

RESERVED = frozenset({"node", "attempt"})
"""Keys the agent adds to every report itself; a job may not set them."""

KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
"""What a metric's name looks like."""

MAX_BYTES = 4096
"""The largest record accepted, as JSON text."""

MAX_KEYS = 32
"""The most keys a record may have."""

CLOCK_SLACK = 300.0
"""Seconds a record's ``at`` may lie from the forwarding node's clock: the ranks write on that
node, so only the forwarding delay (a Redis outage) separates them. A record dated far in the
past would make the watchdog tear the job down as stalled; far in the future, never."""


@dataclass
class Checked:
    """A record as forwarded (None when rejected) and what was wrong with it."""

    record: dict | None
    problems: list[str] = field(default_factory=list)


def check_record(text: bytes | str, now: float) -> Checked:
    """Parse and check one progress record read from a job's progress file. Pure."""
    if len(text) > MAX_BYTES:
        return Checked(None, [f"record is {len(text)} bytes; at most {MAX_BYTES}"])
    try:
        data = json.loads(text)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        return Checked(None, [f"not JSON ({type(exc).__name__}: {str(exc)[:60]})"])
    if not isinstance(data, dict):
        return Checked(None, [f"not a JSON object but {type(data).__name__}"])
    if len(data) > MAX_KEYS:
        return Checked(None, [f"{len(data)} keys; at most {MAX_KEYS}"])
    step, at = data.get("step"), data.get("at")
    if not (_number(step) and float(step).is_integer() and step >= 0):
        return Checked(None, [f"step {_show(step)} is not a whole number >= 0"])
    if not _number(at):
        return Checked(None, [f"at {_show(at)} is not a finite number"])
    if abs(at - now) > CLOCK_SLACK:
        return Checked(None, [f"at {at:.0f} is {at - now:+.0f}s from the node's clock (at most ±{CLOCK_SLACK:g}s)"])
    record: dict = {"step": int(step), "at": float(at)}
    problems = []
    for key, value in data.items():
        if key in ("step", "at"):
            continue
        if key in RESERVED or not KEY.match(key):
            problems.append(f"key {_show(key)} dropped (reserved, or not a metric name)")
        elif _number(value):
            record[key] = value
        elif not _is_number(value):
            problems.append(f"{key} {_show(value)} is not a number; dropped")
        # a NaN or infinite metric is left out quietly
    return Checked(record, problems)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _number(value) -> bool:
    """A finite int or float (a bool is not a number here)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an int too big for a float
        return False


def _show(value) -> str:
    """A value for a message, never longer than a short line."""
    shown = repr(value)
    return shown if len(shown) <= 40 else shown[:37] + "..."
