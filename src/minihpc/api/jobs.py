"""``/jobs``: submit, list, read, follow, cancel, delete and purge -- each a thin call into
:mod:`minihpc.client`, as the CLI makes it."""

from __future__ import annotations

import shlex
import time

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.concurrency import run_in_threadpool

from minihpc.api import sse, streams
from minihpc.api.auth import principal
from minihpc.api.views import job_json
from minihpc.client import jobs as client_jobs
from minihpc.client import options, reading
from minihpc.client.access import Principal
from minihpc.client.logs import log_files, tail_text
from minihpc.client.submit import SCRIPT_MAX, SPOOL_WORKDIR, STDIN, submit
from minihpc.client.summary import job_summary, running_summaries
from minihpc.core.errors import UsageError
from minihpc.ops import job_report

router = APIRouter(tags=["jobs"])

FIELDS = {
    "nodes": "--nodes", "ntasks": "--ntasks", "ntasks_per_node": "--ntasks-per-node",
    "tasks_per_node": "--ntasks-per-node", "priority": "--priority", "time": "--time",
    "time_limit": "--time", "job_name": "--job-name", "name": "--job-name",
    "dependency": "--dependency", "progress_timeout": "--progress-timeout", "launch": "--launch",
    "cpus_per_task": "--cpus-per-task", "output": "--output", "error": "--error", "export": "--export",
    "signal": "--signal", "begin": "--begin", "mem": "--mem", "gres": "--gres", "partition": "--partition",
    "array": "--array", "gpus_per_node": "--gpus-per-node", "gpus": "--gpus", "gpus_per_task": "--gpus-per-task",
    "constraint": "--constraint",
}
"""Submission fields and the sbatch option each stands for (a few have a second name)."""
OTHER_FIELDS = {"script", "script_name", "args", "file"}


def options_argv(fields: dict) -> list[str]:
    """The submission's option fields as sbatch flags, so they are read and checked by the very
    parser of ``minihpc submit`` and of #SBATCH lines."""
    argv = []
    for key, value in fields.items():
        if key in OTHER_FIELDS or value is None or value == "":
            continue
        if key == "requeue":  # a flag pair, not a value
            if not isinstance(value, bool):
                raise UsageError(f"field 'requeue' must be true or false, got {value!r}")
            argv.append("--requeue" if value else "--no-requeue")
            continue
        if key == "elastic":  # a flag
            if not isinstance(value, bool):
                raise UsageError(f"field 'elastic' must be true or false, got {value!r}")
            argv.extend(["--elastic"] if value else [])
            continue
        if key not in FIELDS:
            raise UsageError(f"unknown field {key!r}; expected script, script_name, args, requeue, elastic or one of "
                             f"{', '.join(sorted(FIELDS))}")
        if isinstance(value, (dict, list, bool)):
            raise UsageError(f"field {key!r} must be a number or a string, got {type(value).__name__}")
        argv.append(f"{FIELDS[key]}={value}")  # one word: a value may start with '-' 
    return argv


def submission(fields: dict, text: str, who: Principal, store, recent=None) -> tuple[object, list[str]]:
    """Submit ``text`` with ``fields`` for ``who``: (the job, the header's warnings). ``recent``:
    the nodes as the API read them lately (client.submit.checked)."""
    args = fields.get("args") or []
    if isinstance(args, str):
        try:
            args = shlex.split(args)
        except ValueError as exc:
            raise UsageError(f"field 'args': {exc} in {args!r}") from None
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise UsageError("field 'args' must be a list of strings (or one string in a form)")
    given = options.header_parser("POST /jobs").parse_args(options_argv(fields))
    header = options.parse_header(text)
    request = options.request(given, header, script=STDIN, text=text, args=args,
                              script_name=str(fields.get("script_name") or "script.py"))
    request.user, request.admin = who.user, who.admin
    request.workdir = SPOOL_WORKDIR
    return submit(store, request, recent), header.warnings


@router.post("/jobs", status_code=201)
async def post_job(request: Request, who: Principal = Depends(principal)):
    """Submit a job: JSON {"script": text, ...}, or a form with a ``file`` upload."""
    kind = request.headers.get("content-type", "")
    if kind.startswith("multipart/form-data") or kind.startswith("application/x-www-form-urlencoded"):
        form = await request.form()
        fields = {k: v for k, v in form.items() if k != "file"}
        upload = form.get("file")
        if upload is None or isinstance(upload, str):
            raise UsageError("the form needs a 'file' field with the script")
        raw = await upload.read(SCRIPT_MAX + 1)
        fields.setdefault("script_name", upload.filename or "script.py")
    else:
        try:
            fields = await request.json()
        except ValueError:
            raise UsageError("the body is not JSON (send application/json, or a multipart form with 'file')") from None
        if not isinstance(fields, dict) or not isinstance(fields.get("script"), str):
            raise UsageError("the body needs a 'script' field with the script's text")
        raw = fields["script"].encode()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError("the script is not UTF-8 text") from None
    store = request.app.state.store
    recent = request.app.state.nodes
    job, warnings = await run_in_threadpool(submission, fields, text, who, store, lambda: recent.read(store))
    return JSONResponse({"id": job.id, "job": job_json(job, time.time()), "warnings": warnings}, status_code=201)


@router.get("/jobs")
def list_jobs(request: Request, state: str | None = None, user: str | None = None, name: str | None = None,
              limit: int = Query(50, ge=1, le=1000), offset: int = Query(0, ge=0),
              who: Principal = Depends(principal)):
    jobs = client_jobs.listing(request.app.state.store, client_jobs.parse_states(state), user, name,
                               pending=request.app.state.pending)
    now = time.time()
    return {"jobs": [job_json(reading.redacted(who, j), now) for j in jobs[offset:offset + limit]], "total": len(jobs),
            "limit": limit, "offset": offset}


@router.get("/jobs/summaries")
def summaries(request: Request, who: Principal = Depends(principal)):
    return {"summaries": running_summaries(request.app.state.store, lambda job: reading.can_read(who, job))}


@router.get("/jobs/{job_id}")
def get_job(request: Request, job_id: str, who: Principal = Depends(principal)):
    store = request.app.state.store
    job = store.get_job(client_jobs.parse_job_id(job_id))
    if not reading.can_read(who, job):  # squeue's fields only; its results say what failed and how
        return job_json(reading.redacted(who, job), time.time())
    results = store.job_results(job.id, job.attempts) if job.attempts else {}
    return dict(job_json(job, time.time()), results={n: r.to_dict() for n, r in sorted(results.items())})


@router.get("/jobs/{job_id}/summary")
def get_summary(request: Request, job_id: str, who: Principal = Depends(principal)):
    store = request.app.state.store
    job = store.get_job(client_jobs.parse_job_id(job_id))
    reading.may_read(who, job)
    return job_summary(store, job)


@router.get("/jobs/{job_id}/report")
def get_report(request: Request, job_id: str, who: Principal = Depends(principal)):
    """The data of ``minihpc report``'s charts: loss by attempt, samples/s, step time per rank
    and phase, attempts and incidents."""
    store = request.app.state.store
    job = store.get_job(client_jobs.parse_job_id(job_id))
    reading.may_read(who, job)
    return job_report.job_charts(store, job.id)


@router.get("/jobs/{job_id}/logs")
def get_logs(request: Request, job_id: str, node: str | None = None, tail: int | None = Query(None, ge=0),
             who: Principal = Depends(principal)):
    store = request.app.state.store
    job = store.get_job(client_jobs.parse_job_id(job_id))
    reading.may_read(who, job)
    return {"job": job.id, "logs": [{"node": name, "text": tail_text(path, tail)}
                                    for name, path in log_files(store, job, node)]}


@router.get("/jobs/{job_id}/logs/stream")
async def stream_logs(request: Request, job_id: str, node: str | None = None,
                      last_event_id: str | None = Header(None), who: Principal = Depends(principal)):
    """Server-Sent Events: ``line`` per log line (resumable with Last-Event-ID), ``state`` on
    each change, ``end`` with the final state."""
    store = request.app.state.store
    job = await run_in_threadpool(store.get_job, client_jobs.parse_job_id(job_id))
    reading.may_read(who, job)
    if node is not None:
        await run_in_threadpool(log_files, store, job, node)  # an unknown node is a 404 now, not mid-stream
    body = streams.job_log(store, request.app.state.hub, job, node, sse.decode_cursor(last_event_id))
    return StreamingResponse(body, media_type="text/event-stream", headers=sse.HEADERS)


@router.post("/jobs/{job_id}/cancel")
@router.post("/jobs/{job_id}/stop")
def cancel_job(request: Request, job_id: str, who: Principal = Depends(principal)):
    store = request.app.state.store
    number = client_jobs.parse_job_id(job_id)
    client_jobs.cancel(store, number, who)
    return {"id": number, "state": store.get_job(number).state.value}


@router.delete("/jobs/{job_id}")
def delete_job(request: Request, job_id: str, who: Principal = Depends(principal)):
    number = client_jobs.parse_job_id(job_id)
    client_jobs.delete(request.app.state.store, number, who)
    return {"deleted": number}


@router.post("/jobs/purge")
async def purge_jobs(request: Request, who: Principal = Depends(principal)):
    """Delete the caller's ended jobs (everyone's for an admin) older than ``older_than`` s."""
    try:
        body = await request.json()
    except ValueError:
        raise UsageError('the body must be JSON: {"older_than": SECONDS}') from None
    older = body.get("older_than") if isinstance(body, dict) else None
    if isinstance(older, bool) or not isinstance(older, (int, float)):
        raise UsageError('the body must be JSON: {"older_than": SECONDS}')
    deleted = await run_in_threadpool(client_jobs.purge, request.app.state.store, float(older), who)
    return {"deleted": deleted}
