"""Stragglers: the rank of a data-parallel job that the others wait for. Pure functions over a
job's progress series (what the agents forwarded: one reporting rank per node, each report
carrying that rank's step time by phase, minihpc.job.progress.StepTimer).

A rank's own work in a step is its compute: data + forward + backward + optimizer. The all-reduce
is left out, because a fast rank spends there the time it waits for the slow one (the phase
timer already takes the all-reduce out of the backward pass). Each rank's compute time is
smoothed with an exponentially weighted moving average over its latest reports, so one slow
step (a checkpoint, a page fault) is not a straggler; a rank whose average is above
:data:`RATIO` times the median of the other ranks', and whose last :data:`SUSTAIN` reports each
were too, is. A job balanced by measured speed
(minihpc.job.balance) gives a slow rank fewer samples, so its steps take as long as the others'
and it stops being one.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

OWN_PHASES = ("data", "forward", "backward", "optimizer")
"""The phases a rank spends on its own work (not waiting for the others)."""

ALPHA = 0.3
"""Weight of the newest report in the moving average (about the last 6 reports count)."""

RATIO = 1.5
"""A rank this many times slower than the median of the others is a straggler (the alert rule
MinihpcStraggler in config/alerts.yml uses the same figure)."""

MIN_REPORTS = 5
"""Reports a rank needs before it is judged (the first steps include warm-up)."""

WINDOW = 30
"""Newest reports per rank that the average is taken over."""

SUSTAIN = 3
"""Reports in a row that must each be over the ratio: one slow step, however slow, lifts the
average for a few reports, a slowed node every report."""


@dataclass(frozen=True)
class RankPace:
    """One rank's smoothed compute time per step, and how it compares with the other ranks'."""

    rank: int
    node: str
    seconds: float
    reports: int
    others: float | None = None  # the median of the other ranks' seconds (None: no other rank)
    floor: float = 0.0  # the lowest of its last SUSTAIN reports' seconds

    @property
    def ratio(self) -> float | None:
        if self.others is None or self.others <= 0:
            return None
        return self.seconds / self.others


def own_seconds(report: dict) -> float | None:
    """A report's compute time per step (the sum of :data:`OWN_PHASES`), or None when it has
    none of them."""
    parts = [report.get(f"{p}_seconds") for p in OWN_PHASES]
    values = [v for v in parts if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)]
    if not values:
        return None
    return float(sum(values))


def ewma(values: list[float], alpha: float = ALPHA) -> float:
    """The exponentially weighted moving average of ``values``, oldest first (non-empty)."""
    return averages(values, alpha)[-1]


def averages(values: list[float], alpha: float = ALPHA) -> list[float]:
    """The moving average after each of ``values`` (non-empty), oldest first."""
    out = [values[0]]
    for value in values[1:]:
        out.append(alpha * value + (1 - alpha) * out[-1])
    return out


def paces(series: list[dict], attempt: int | None = None, window: int = WINDOW) -> list[RankPace]:
    """Each reporting rank's pace from a job's progress series (oldest first), counting only
    reports of ``attempt`` when given; a report without a rank, a node or phase times is
    skipped. Sorted by rank."""
    times: dict[int, list[float]] = {}
    nodes: dict[int, str] = {}
    for report in series:
        if attempt is not None and report.get("attempt") != attempt:
            continue
        rank, node, seconds = report.get("rank"), report.get("node"), own_seconds(report)
        if not isinstance(rank, (int, float)) or isinstance(rank, bool) or not float(rank).is_integer():
            continue
        if not isinstance(node, str) or seconds is None:
            continue
        times.setdefault(int(rank), []).append(seconds)
        nodes[int(rank)] = node
    trails = {rank: averages(values[-window:]) for rank, values in times.items()}
    out = []
    for rank, trail in sorted(trails.items()):
        rest = [t[-1] for r, t in trails.items() if r != rank]
        out.append(RankPace(rank, nodes[rank], trail[-1], len(times[rank]), statistics.median(rest) if rest else None,
                            min(times[rank][-SUSTAIN:])))
    return out


def stragglers(ranks: list[RankPace], ratio: float = RATIO, min_reports: int = MIN_REPORTS) -> list[RankPace]:
    """The ranks whose average, and each of whose last :data:`SUSTAIN` reports, is over
    ``ratio`` times the median of the others' averages, once every rank has ``min_reports``
    reports."""
    if len(ranks) < 2 or any(r.reports < min_reports for r in ranks):
        return []
    return [r for r in ranks if r.others and r.seconds > ratio * r.others and r.floor > ratio * r.others]
