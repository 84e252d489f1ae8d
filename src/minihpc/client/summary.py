"""A job's training at a glance -- steps, loss, throughput, ETA, attempts and incidents --
for every face that shows it (the REST API's summaries, the web page)."""

from __future__ import annotations

from minihpc.core import training
from minihpc.core.models import Job, JobState
from minihpc.state.store import Store

HISTORY_POINTS = 60
"""Loss points a summary carries for its sparkline (the newest, oldest first)."""

SERIES_READ = 4 * HISTORY_POINTS
"""Progress reports read for them: every node reports, so a step may appear several times."""


def loss_history(series: list[dict], points: int = HISTORY_POINTS) -> list[list[float]]:
    """[[step, loss], ...] of the newest attempt's reports, one per step, oldest first."""
    if not series:
        return []
    attempt = max(r.get("attempt", 0) for r in series)
    by_step: dict[float, float] = {}
    for report in series:
        if report.get("attempt", 0) == attempt and "loss" in report and "step" in report:
            by_step[report["step"]] = report["loss"]
    return [[step, by_step[step]] for step in sorted(by_step)][-points:]


def summarize(job: Job, report: dict | None, marks: dict[int, dict], series: list[dict],
              incidents: list[dict]) -> dict:
    """The summary of ``job`` from its newest progress report, per-attempt marks, recent
    reports and incidents (a pure function of what the store holds)."""
    report = report or {}
    step, total = report.get("step"), report.get("total")
    current = marks.get(job.attempts, {})
    eta = training.eta(step, total, current.get("first"), current.get("last")) if step is not None else None
    if job.state is not JobState.RUNNING:
        eta = None
    return {
        "id": job.id, "name": job.name, "user": job.user, "state": job.state.value,
        "state_code": job.state.code, "step": step, "total": total,
        "percent": min(100.0, 100.0 * step / total) if step is not None and total else None,
        "loss": report.get("loss"), "samples_per_second": report.get("samples_per_second"),
        "eta_seconds": eta, "attempts": job.queue_attempts, "requeues": job.requeues, "resizes": job.resizes,
        "loss_history": loss_history(series),
        "attempt_marks": {str(a): m for a, m in sorted(marks.items())},
        # An elastic job's launches after a resize, by launch (the marks' keys): its size over time.
        "launch_nodes": {str(i["launch"]): i["nodes"] for i in incidents
                         if i.get("kind") == "resized" and "launch" in i and "nodes" in i},
        "incidents": incidents,
    }


INCIDENTS_READ = 200
"""Newest incidents a summary looks through for its job's."""


def job_summary(store: Store, job: Job) -> dict:
    return _summaries(store, [job])[0]


def running_summaries(store: Store, readable=lambda job: True) -> list[dict]:
    """A summary of every running job ``readable(job)`` allows (client.reading), by id."""
    return _summaries(store, sorted((j for j in store.running_jobs() if readable(j)), key=lambda j: j.id))


def _summaries(store: Store, jobs: list[Job]) -> list[dict]:
    """:func:`summarize` of each job, reading the progress reports and incidents once."""
    reports = store.progress(j.id for j in jobs)
    recent = store.incidents(INCIDENTS_READ)
    return [
        summarize(j, reports.get(j.id), store.attempt_steps(j.id), store.series(j.id, SERIES_READ),
                  [i for i in recent if i.get("job") == j.id])
        for j in jobs
    ]
