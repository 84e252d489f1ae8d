"""``/queue`` and ``/history``: the web page's two job panels, as squeue shows a queue (pending
array tasks that wait alike as one row, ``2017_[3-1000%4]``; running tasks one by one) and ended
jobs apart, newest first, each panel with honest counts (core.queue_rows decides the rows).
``POST /queue/cancel`` cancels what one row stands for, as scancel takes it."""

from __future__ import annotations

import time

from fastapi import APIRouter, Depends, Query, Request
from starlette.concurrency import run_in_threadpool

from minihpc.api.auth import principal
from minihpc.api.views import panel_json
from minihpc.client import arrays, reading
from minihpc.client import jobs as client_jobs
from minihpc.client.access import Principal
from minihpc.core.arrays import MAX_ARRAY_SIZE, parse_job_refs
from minihpc.core.errors import UsageError
from minihpc.core.queue_rows import Panel, history_panel, queue_panel
from minihpc.core.slurm_filters import JobFilter
from minihpc.state.store import Store

router = APIRouter(tags=["jobs"])

HISTORY_FIRST_READ = 200
"""Ended jobs the history reads first (newest first): enough for 50 rows of plain jobs."""
HISTORY_READ_MAX = 2 * MAX_ARRAY_SIZE + HISTORY_FIRST_READ
"""The most ended jobs one answer reads, a few times more each time while the last row shown
may go on past the oldest one read: two whole arrays of Slurm's largest size and more."""


def history(store: Store, limit: int) -> Panel:
    _, total = store.oldest_ended(0)  # (none of them, how many jobs have ended)
    count = min(HISTORY_READ_MAX, max(HISTORY_FIRST_READ, 4 * limit))
    while True:
        panel = history_panel(store.ended_jobs(limit=count), total, limit)
        if panel.complete or count >= min(total, HISTORY_READ_MAX):
            return panel
        count = min(HISTORY_READ_MAX, 4 * count)


@router.get("/queue")
def get_queue(request: Request, limit: int = Query(50, ge=1, le=1000), who: Principal = Depends(principal)):
    """Pending and running jobs in squeue's order and rows: ``rows`` (each a job's fields, of
    the first job it stands for, with ``row_id`` as squeue shows it, ``ref`` as scancel takes it
    and ``count`` jobs), ``total_rows``, ``total_jobs``, ``shown_jobs``, ``more_jobs``."""
    panel = queue_panel(client_jobs.queue(request.app.state.store, pending=request.app.state.pending), limit)
    return panel_json(panel, limit, time.time(), lambda job: reading.redacted(who, job))


@router.get("/history")
def get_history(request: Request, limit: int = Query(50, ge=1, le=500), who: Principal = Depends(principal)):
    """Ended jobs, newest first, as rows (an array's tasks that never ran and ended alike as
    one, ``2017_[0-1000]``): the fields of ``/queue``; ``total_rows`` is null unless every
    ended job was read, ``more_jobs`` counts the ended jobs no row shown stands for."""
    panel = history(request.app.state.store, limit)
    return panel_json(panel, limit, time.time(), lambda job: reading.redacted(who, job))


@router.post("/queue/cancel")
async def cancel_row(request: Request, who: Principal = Depends(principal)):
    """Cancel the pending and running jobs a queue row stands for: JSON {"jobs": "2017_[3-1000]"}
    (a row's ``ref``; any list scancel takes: ``12,13_2,14_[1-3]``). Answers {"cancelled":
    [job ids], "errors": [lines]}, or the first error's status when none was cancelled."""
    try:
        body = await request.json()
    except ValueError:
        body = None
    text = body.get("jobs") if isinstance(body, dict) else None
    if not isinstance(text, str):
        raise UsageError('the body must be JSON: {"jobs": "12,13_2,14_[1-3]"}')
    return await run_in_threadpool(_cancel, request.app.state.store, text, who)


def _cancel(store: Store, text: str, who: Principal) -> dict:
    ids, unknown = arrays.resolve(store, parse_job_refs(text, "field 'jobs'"), live_only=True)
    report = client_jobs.cancel_matching(store, ids, JobFilter(), who) if ids else client_jobs.CancelReport()
    errors = [*unknown, *(exc for _, exc in report.errors)]
    if errors and not report.cancelled:
        raise errors[0]
    return {"cancelled": report.cancelled, "errors": [str(exc) for exc in errors]}
