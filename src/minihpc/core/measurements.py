"""What the cluster measures of a node, and where each figure goes in the node's record.

Two sources, both measured on the node itself:

- the **speed probe** (``python -m minihpc.machine.speed_probe``), which the agent runs when it
  starts on hardware not measured yet (:func:`needs_probe`: a restarted agent on the same CPUs
  and CPU limit does not probe again, so a recovery never competes with a second of busy CPU):
  float32 matrix multiplies for about a second, with as many threads as the node may use; it
  prints one JSON line, whose GFLOP/s become the node's ``gflops``;
- the **benchmark job** (``jobs/benchmark.py``), whose local rank 0 on each node reports
  ``allreduce_busbw_gbps`` (the all-reduce bus bandwidth at its largest size) and ``gflops``
  through the progress file; the agent forwarding that report copies both to the node.

Only a report carrying a bus bandwidth counts as a benchmark's: a training job may well report
a ``gflops`` of its own meaning (its model's achieved FLOP/s), which says nothing of the node.
Pure: no I/O here.
"""

from __future__ import annotations

import json
import math

GFLOPS = "gflops"
"""Node field: GFLOP/s of float32 matrix multiplies, as last measured (probe or benchmark)."""
GFLOPS_AT = "gflops_measured_at"
"""Node field: when ``gflops`` was measured (Unix time)."""
GFLOPS_JOB = "gflops_job"
"""Node field: the benchmark job that measured ``gflops``; absent when the probe did."""
GFLOPS_FOR = "gflops_for"
"""Node field: the hardware the probe measured (:func:`signature`)."""

ALLREDUCE = "allreduce_gbps"
"""Node field: all-reduce bus bandwidth (GB/s) of the last benchmark job the node ran in."""
ALLREDUCE_AT = "allreduce_measured_at"
"""Node field: when ``allreduce_gbps`` was measured (the report's time)."""
ALLREDUCE_JOB = "allreduce_job"
"""Node field: the job that measured ``allreduce_gbps``."""

REPORTED_BUSBW = "allreduce_busbw_gbps"
"""The progress-report metric of a benchmark: bus bandwidth (GB/s) at its largest all-reduce."""
REPORTED_GFLOPS = "gflops"
"""The progress-report metric of a benchmark: this node's GFLOP/s."""


def positive(value) -> bool:
    """A finite number above zero (a bool is not a number here)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value) and value > 0
    except OverflowError:  # an int too big for a float
        return False


def node_updates(report: dict, job_id: int) -> dict[str, float | int]:
    """The node-record fields a forwarded progress report of job ``job_id`` sets: none unless
    it carries a bus bandwidth > 0 (a benchmark's report), then that and its ``gflops`` when
    that is > 0 too, each with the report's time and the job. ``report`` has passed
    :func:`minihpc.core.telemetry.check_record`."""
    busbw, at = report.get(REPORTED_BUSBW), report.get("at")
    if not positive(busbw) or not positive(at):
        return {}
    out: dict[str, float | int] = {ALLREDUCE: float(busbw), ALLREDUCE_AT: float(at), ALLREDUCE_JOB: job_id}
    gflops = report.get(REPORTED_GFLOPS)
    if positive(gflops):
        out.update({GFLOPS: float(gflops), GFLOPS_AT: float(at), GFLOPS_JOB: job_id})
    return out


class ProbeError(ValueError):
    """The speed probe's output says nothing usable (the message says why)."""


def probe_gflops(output: str) -> float:
    """The GFLOP/s in the speed probe's output: its last non-empty line, a JSON object with
    ``gflops`` a number > 0. Raises :class:`ProbeError` otherwise."""
    lines = [line for line in output.splitlines() if line.strip()]
    if not lines:
        raise ProbeError("the probe printed nothing")
    try:
        data = json.loads(lines[-1])
    except (ValueError, RecursionError):
        raise ProbeError(f"the probe's last line is not JSON: {lines[-1][:80]!r}") from None
    gflops = data.get("gflops") if isinstance(data, dict) else None
    if not positive(gflops):
        raise ProbeError(f"the probe's gflops {gflops!r} is not a number > 0")
    return float(gflops)


def probe_fields(gflops: float, at: float, hardware: str) -> dict[str, float | str]:
    """The node-record fields the speed probe sets (it also clears :data:`GFLOPS_JOB`)."""
    return {GFLOPS: gflops, GFLOPS_AT: at, GFLOPS_FOR: hardware}


def signature(cpu_model: str, cpus: int, cpu_limit: float | None) -> str:
    """What a speed figure depends on: the CPU model, the CPUs the node may use and its quota."""
    return f"{cpu_model}|{cpus}|{cpu_limit if cpu_limit is not None else '-'}"


def needs_probe(record: dict[str, str], hardware: str) -> bool:
    """Whether the node's record lacks a probe's figure for this hardware: none yet, or one
    measured on other CPUs or under another limit (a benchmark job's figure does not count)."""
    return number(record.get(GFLOPS)) is None or record.get(GFLOPS_FOR) != hardware


def number(value: str | None) -> float | None:
    """A node-record field read back: a finite float, or None when absent or not a number."""
    try:
        result = float(value) if value not in (None, "") else None
    except (TypeError, ValueError, OverflowError):
        return None
    return result if result is not None and math.isfinite(result) else None
