"""Operator tools: fault drills and job reports."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from minihpc.cli.display import print_json
from minihpc.client import access, reading
from minihpc.client.jobs import parse_job_id
from minihpc.client.session import open_store
from minihpc.core.config import Settings, local_state_dir
from minihpc.core.errors import UsageError
from minihpc.core.models import JobState

TIMED_DEFAULTS = {"pause": 60.0, "disconnect": 30.0}
"""Seconds a timed drill lasts unless --duration says."""


def cmd_drill(args, settings: Settings) -> int:
    from minihpc.ops import drill, faults

    kind = faults.check_kind(args.kind)
    if kind != "redis-restart" and not args.node:
        raise UsageError(f"drill {kind} needs --node NAME (the node to hit)")
    store = open_store(settings)
    if args.node and args.node not in {n.name for n in store.node_statuses()}:
        raise UsageError(f"no node named {args.node!r} in this cluster")
    job_id = parse_job_id(args.job) if args.job else None
    injector = faults.ComposeFaults(args.compose) if args.compose else faults.LocalFaults(args.state_dir)
    duration = args.duration if args.duration is not None else TIMED_DEFAULTS.get(kind, 0.0)
    result = drill.run(store, injector, kind, args.node, job_id, duration=duration, timeout=args.timeout,
                       log=lambda line: print(line, file=sys.stderr, flush=True))
    if args.json:
        print_json(result.to_dict())
    else:
        print(drill.format_drill(result))
    return 0 if drill.finished(result) and result.job_state != JobState.FAILED.value else 1


def cmd_report(args, settings: Settings) -> int:
    from minihpc.ops import job_report

    job_id = parse_job_id(args.job_id)
    out = Path(args.out or f"minihpc-report-job-{job_id}")
    store = open_store(settings)
    reading.may_read(access.for_cli(store), store.get_job(job_id))
    summary = job_report.write(store, job_id, out)
    for name in job_report.PLOTS:
        print(out / name)
    print(summary)
    return 0


def add_parsers(sub) -> None:
    p = sub.add_parser("report", help="PNG plots (loss, throughput, step time per rank, timeline) and a summary of a job")
    p.add_argument("job_id")
    p.add_argument("--out", default=None, help="directory to write (default: minihpc-report-job-ID)")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("drill", help="inject a fault into a node and measure detection, restart and resume")
    p.add_argument("kind", help="stop, kill, pause, disconnect or redis-restart")
    p.add_argument("--node", default=None, help="the node to hit (not for redis-restart)")
    p.add_argument("--job", default=None, help="the job to follow (default: the one running on the node)")
    p.add_argument("--duration", type=float, default=None, help="seconds a pause (60) or disconnect (30) lasts")
    p.add_argument("--timeout", type=float, default=180.0, help="give up measuring after this many seconds")
    p.add_argument("--compose", metavar="PROJECT", default=os.environ.get("MINIHPC_COMPOSE_PROJECT"),
                   help="hit this Compose project's containers (run it on the Docker host); default: the local cluster")
    p.add_argument("--state-dir", default=str(local_state_dir()), help="the local cluster's state (without --compose)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_drill)
