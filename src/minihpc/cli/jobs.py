"""Job commands: submit, queue, show, cancel, logs, wait, history (Slurm's sbatch, squeue,
scontrol show job, scancel, sacct) -- thin over :mod:`minihpc.client`."""

from __future__ import annotations

import argparse
import sys
import time

from minihpc.cli.display import (
    QUEUE_HEADERS,
    print_json,
    queue_rows,
    render,
    timestamp,
)
from minihpc.client import access
from minihpc.client import jobs as client_jobs
from minihpc.client import options
from minihpc.client import logs
from minihpc.client.session import open_store
from minihpc.client.submit import STDIN, read_script, read_stdin, submit
from minihpc.core.config import Settings
from minihpc.core.errors import MinihpcError
from minihpc.core.models import JobState
from minihpc.core.outcome import format_exit
from minihpc.core.parsing import compress_hostlist, format_duration, format_elapsed


def cmd_submit(args, settings: Settings) -> int:
    text = read_stdin(sys.stdin) if args.script == STDIN else read_script(args.script)
    header = options.parse_header(text)
    for warning in header.warnings:
        print(f"minihpc submit: warning: {warning}", file=sys.stderr)
    request = options.request(args, header, script=args.script, text=text, args=args.script_args,
                              script_name=args.script_name)
    store = open_store(settings)
    request.user = access.for_cli(store).user
    job = submit(store, request)
    print(job.id if args.parsable else f"Submitted batch job {job.id}")
    return 0


def cmd_queue(args, settings: Settings) -> int:
    store = open_store(settings)

    def once() -> str:
        jobs = client_jobs.queue(store, args.all)
        if args.json:
            import json

            return json.dumps([j.to_json() for j in jobs], indent=2, sort_keys=True)
        return render(QUEUE_HEADERS, queue_rows(jobs, time.time()))

    if not args.watch:
        print(once())
        return 0
    try:
        while True:
            frame = once()
            sys.stdout.write("\x1b[H\x1b[2J" if sys.stdout.isatty() else "\n")
            sys.stdout.write(f"{time.strftime('%H:%M:%S')}  every {args.interval:g}s, Ctrl-C to stop\n{frame}\n")
            sys.stdout.flush()
            time.sleep(args.interval)
    except KeyboardInterrupt:
        print()
        return 130


def cmd_show(args, settings: Settings) -> int:
    store = open_store(settings)
    job = store.get_job(client_jobs.parse_job_id(args.job_id))
    if args.json:
        results = store.job_results(job.id, job.attempts) if job.attempts else {}
        print_json(dict(job.to_json(), results={n: r.to_dict() for n, r in sorted(results.items())}))
        return 0
    rows = [
        ("JobId", job.id), ("JobName", job.name), ("UserId", job.user), ("JobState", job.state.value),
        ("Reason", job.reason), ("ExitCode", format_exit(job.exit_code, job.signal)),
        ("Priority", job.priority.value), ("Attempts", job.attempts), ("NumNodes", job.nodes_requested),
        ("NtasksPerNode", job.tasks_per_node), ("NodeList", ",".join(job.nodes) or "(null)"),
        ("TimeLimit", format_duration(job.time_limit)), ("Requeues", job.requeues),
        ("Dependency", ("afterok:" + ":".join(map(str, job.dependency))) if job.dependency else "(null)"),
        ("SubmitTime", timestamp(job.submitted_at)), ("StartTime", timestamp(job.started_at)),
        ("EndTime", timestamp(job.ended_at)), ("Command", " ".join([job.script_source, *job.args])),
        ("Script", f"{job.script} (sha256 {job.script_sha256[:12]})"), ("WorkDir", job.workdir),
    ]
    for key, value in rows:
        print(f"{key:>14} = {value}")
    return 0


def cmd_cancel(args, settings: Settings) -> int:
    store = open_store(settings)
    who = access.for_cli(store)
    failures = 0
    for text in args.job_ids:
        try:
            job_id = client_jobs.parse_job_id(text)
            client_jobs.cancel(store, job_id, who)
        except MinihpcError as exc:
            print(f"minihpc cancel: error: {exc}", file=sys.stderr)
            failures += 1
            continue
        print(f"Cancelled job {job_id}")
    return 1 if failures else 0


def cmd_logs(args, settings: Settings) -> int:
    store = open_store(settings)
    job_id = client_jobs.parse_job_id(args.job_id)
    job = store.get_job(job_id)
    if job.state is JobState.PENDING and job.attempts == 0 and not args.follow:
        print(f"job {job_id} is pending ({job.reason}); it has no logs yet", file=sys.stderr)
        return 0
    files = logs.log_files(store, job, args.node)
    many = len(files) > 1 or (args.node is None and max(len(job.nodes), job.nodes_requested) > 1)
    if not args.follow:
        for name, path in files:
            if many:
                sys.stdout.write(f"==> {name} <==\n")
            for data in logs.chunks(path):
                sys.stdout.write(data.decode(errors="replace"))
        sys.stdout.flush()
        return 0
    try:
        for name, line in logs.follow(store, job_id, args.node):
            print(f"{name}: {line}" if many else line, flush=True)
    except KeyboardInterrupt:
        return 130
    return 0


def cmd_wait(args, settings: Settings) -> int:
    store = open_store(settings)
    job_id = client_jobs.parse_job_id(args.job_id)
    try:
        job, ended = client_jobs.wait(store, job_id, args.timeout)
    except KeyboardInterrupt:
        return 130
    if not ended:
        print(f"minihpc wait: job {job_id} still {job.state.value} after {args.timeout:g}s", file=sys.stderr)
        return 124
    if job.state is JobState.COMPLETED:
        print(f"job {job_id} COMPLETED")
        return 0
    print(f"job {job_id} {job.state.value} (exit code {format_exit(job.exit_code, job.signal)}, "
          f"reason {job.reason})", file=sys.stderr)
    return 1


def cmd_history(args, settings: Settings) -> int:
    jobs = open_store(settings).ended_jobs(limit=args.limit)
    if args.json:
        print_json([j.to_json() for j in jobs])
        return 0
    rows = [
        [str(j.id), j.name[:20], j.user[:10], j.state.value, format_exit(j.exit_code, j.signal),
         format_elapsed(client_jobs.elapsed(j, j.ended_at or 0)), str(len(j.nodes) or j.nodes_requested),
         compress_hostlist(j.nodes) or "None assigned", str(j.attempts)]
        for j in jobs
    ]
    headers = ["JOBID", "JOBNAME", "USER", "STATE", "EXITCODE", "ELAPSED", "NNODES", "NODELIST", "ATTEMPTS"]
    print(render(headers, rows))
    return 0


def add_parsers(sub) -> None:
    p = sub.add_parser("submit", help="queue a job script")
    options.add_job_options(p)
    p.add_argument("--parsable", action="store_true", help="print only the job id")
    p.add_argument("--script-name", default=None, help="file name for a script read from standard input (SCRIPT is -)")
    p.add_argument("script", help="the job script, or - to read it from standard input")
    p.add_argument("script_args", nargs=argparse.REMAINDER, metavar="ARGS")
    p.set_defaults(func=cmd_submit)

    p = sub.add_parser("queue", help="pending and running jobs (like squeue)")
    p.add_argument("--all", action="store_true", help="include recently ended jobs")
    p.add_argument("--json", action="store_true")
    p.add_argument("--watch", action="store_true", help="refresh until Ctrl-C")
    p.add_argument("--interval", type=float, default=2.0, help="seconds between refreshes")
    p.set_defaults(func=cmd_queue)

    p = sub.add_parser("show", help="one job in detail (like scontrol show job)")
    p.add_argument("job_id")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("cancel", help="cancel jobs (like scancel)")
    p.add_argument("job_ids", nargs="+", metavar="ID")
    p.set_defaults(func=cmd_cancel)

    p = sub.add_parser("logs", help="a job's output, per node")
    p.add_argument("job_id")
    p.add_argument("-f", "--follow", action="store_true", help="keep printing until the job ends")
    p.add_argument("--node", default=None, help="only this node's log")
    p.set_defaults(func=cmd_logs)

    p = sub.add_parser("history", help="ended jobs (like sacct)")
    p.add_argument("--json", action="store_true")
    p.add_argument("-n", "--limit", type=int, default=100, help="how many, newest first")
    p.set_defaults(func=cmd_history)

    p = sub.add_parser("wait", help="block until a job ends; exit 0 only if it COMPLETED")
    p.add_argument("job_id")
    p.add_argument("--timeout", type=float, default=None, help="give up after this many seconds (exit 124)")
    p.set_defaults(func=cmd_wait)
