"""What a running job's progress reports say about its training: pure functions for the
monitor's view (and the report)."""

from __future__ import annotations

from minihpc.core.parsing import format_duration


def eta(step: float, total: float | None, first: dict | None, last: dict | None) -> float | None:
    """Seconds to the last step at the pace of this attempt so far, or None if unknown."""
    if not total or first is None or last is None or step >= total:
        return 0.0 if total and step >= total else None
    steps, seconds = last["step"] - first["step"], last["at"] - first["at"]
    if steps <= 0 or seconds <= 0:
        return None
    return (total - step) * seconds / steps


def row(job_id: int, name: str, report: dict | None, marks: dict | None) -> list[str]:
    """JOBID NAME STEP PROGRESS LOSS SAMPLES/S ETA for one running job."""
    if not report:
        return [str(job_id), name[:20], "-", "-", "-", "-", "(no progress reported yet)"]
    step, total = report["step"], report.get("total")
    marks = marks or {}
    left = eta(step, total, marks.get("first"), marks.get("last"))
    return [
        str(job_id),
        name[:20],
        f"{step:.0f}" + (f"/{total:.0f}" if total else ""),
        f"{100 * step / total:.0f}%" if total else "-",
        f"{report['loss']:.4f}" if "loss" in report else "-",
        f"{report['samples_per_second']:.0f}" if "samples_per_second" in report else "-",
        format_duration(left) if left is not None else "-",
    ]


HEADERS = ["JOBID", "NAME", "STEP", "PROGRESS", "LOSS", "SAMPLES/S", "ETA"]
