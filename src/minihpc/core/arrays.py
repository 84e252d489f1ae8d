"""Job arrays (``sbatch --array``) as pure functions: the index forms Slurm takes, and the
array's figures its tasks see (SLURM_ARRAY_TASK_COUNT, _MIN, _MAX, _STEP)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from minihpc.core.errors import UsageError

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
