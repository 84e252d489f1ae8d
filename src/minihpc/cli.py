"""The ``minihpc`` command: Slurm's verbs, columns and state codes over the Redis state."""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import socket
import sys
import time
from pathlib import Path

from . import __version__
from .config import Settings, load_settings, local_state_dir
from .errors import MinihpcError, UsageError
from .models import Job, JobState, Priority
from .outcome import format_exit
from .parsing import (
    compress_hostlist,
    format_duration,
    header_options,
    parse_dependency,
    parse_time_limit,
)
from .store import Store, connect
from . import training
from .tables import human_bytes, render


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line on stderr and exit status 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\n")


# -- option parsing shared by `submit` and #MINIHPC header lines ---------------------------


def _add_job_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-N", "--nodes", type=int, default=None, help="nodes to run on (default 1)")
    p.add_argument("--ntasks-per-node", type=int, default=None, help="ranks per node (default 1)")
    p.add_argument(
        "--priority",
        choices=[p.value for p in Priority],
        default=None,
        help="queue priority (default normal)",
    )
    p.add_argument("-t", "--time", default=None, help="time limit: minutes, MM:SS, HH:MM:SS, D-HH:MM:SS")
    p.add_argument("-J", "--job-name", default=None, help="job name (default: the script's name)")
    p.add_argument("-d", "--dependency", default=None, help="afterok:ID[:ID...]")
    p.add_argument(
        "--progress-timeout", default=None,
        help="watchdog: requeue the job when its progress reports stop for this long (like --time)",
    )


def _header_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="#MINIHPC", add_help=False)
    _add_job_options(p)
    return p


def _merge(cli: argparse.Namespace, header: argparse.Namespace, name: str, default):
    value = getattr(cli, name)
    if value is None:
        value = getattr(header, name)
    return default if value is None else value


# -- helpers --------------------------------------------------------------------------------


def _store(settings: Settings) -> Store:
    return Store(connect(settings.redis_url))


def _job_id(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise UsageError(f"invalid job id {text!r}: expected a number") from None
    if value < 1:
        raise UsageError(f"invalid job id {text!r}: expected a positive number")
    return value


def _elapsed(job: Job, now: float) -> float:
    if job.started_at is None:
        return 0.0
    return (job.ended_at or now) - job.started_at


def _nodelist_or_reason(job: Job) -> str:
    if job.state is JobState.PENDING:
        return f"({job.reason})"
    return compress_hostlist(job.nodes) if job.nodes else f"({job.reason})"


def _print_json(data) -> None:
    print(json.dumps(data, indent=2, sort_keys=True))


def _clock(ts: float) -> str:
    """HH:MM:SS.mmm, for event streams."""
    return time.strftime("%H:%M:%S", time.localtime(ts)) + f".{int(ts * 1000) % 1000:03d}"


def _fmt_time(ts: float | None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(ts)) if ts else "Unknown"


# -- commands ---------------------------------------------------------------------------------


def cmd_submit(args, settings: Settings) -> int:
    from .submit import STDIN, Request, read_script, read_stdin, submit

    text = read_stdin(sys.stdin) if args.script == STDIN else read_script(args.script)
    header = _header_parser().parse_args(header_options(text))
    nodes = _merge(args, header, "nodes", 1)
    request = Request(
        script=args.script,
        text=text,
        args=list(args.script_args),
        nodes=int(nodes),
        tasks_per_node=int(_merge(args, header, "ntasks_per_node", 1)),
        priority=Priority(_merge(args, header, "priority", Priority.NORMAL.value)),
        time_limit=parse_time_limit(_merge(args, header, "time", "UNLIMITED")),
        progress_timeout=parse_time_limit(pt) if (pt := _merge(args, header, "progress_timeout", None)) else None,
        name=_merge(args, header, "job_name", None),
        dependency=parse_dependency(dep) if (dep := _merge(args, header, "dependency", None)) else [],
        script_name=args.script_name,
    )
    job = submit(_store(settings), request)
    print(job.id if args.parsable else f"Submitted batch job {job.id}")
    return 0


QUEUE_HEADERS = ["JOBID", "NAME", "USER", "ST", "TIME", "NODES", "NODELIST(REASON)"]


def _queue_rows(jobs: list[Job], now: float) -> list[list[str]]:
    return [
        [
            str(j.id),
            j.name[:20],
            j.user[:10],
            j.state.code,
            format_duration(_elapsed(j, now)),
            str(len(j.nodes) or j.nodes_requested),
            _nodelist_or_reason(j),
        ]
        for j in jobs
    ]


def _queue_jobs(store: Store, include_ended: bool) -> list[Job]:
    from .scheduler import queue_order_key

    running = sorted(store.running_jobs(), key=lambda j: j.id)
    pending = sorted(store.pending_jobs(), key=queue_order_key)
    ended = sorted(store.ended_jobs(limit=50), key=lambda j: j.id) if include_ended else []
    return running + pending + ended


def cmd_queue(args, settings: Settings) -> int:
    store = _store(settings)

    def once() -> str:
        jobs = _queue_jobs(store, args.all)
        if args.json:
            return json.dumps([j.to_json() for j in jobs], indent=2, sort_keys=True)
        return render(QUEUE_HEADERS, _queue_rows(jobs, time.time()))

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


def _nodes_table(nodes, now: float) -> str:
    rows = [
        [
            n.name,
            n.state.value,
            str(n.cpus),
            human_bytes(n.memory_bytes),
            str(n.job) if n.job is not None else "-",
            f"{now - n.last_heartbeat:.1f}s ago" if n.last_heartbeat else "never",
        ]
        for n in nodes
    ]
    return render(["NODE", "STATE", "CPUS", "MEMORY", "JOB", "LAST-HEARTBEAT"], rows)


def cmd_monitor(args, settings: Settings) -> int:
    store = _store(settings)
    tty = sys.stdout.isatty()
    try:
        while True:
            now = time.time()
            nodes = store.node_statuses()
            jobs = _queue_jobs(store, include_ended=False)
            up = sum(1 for n in nodes if n.alive)
            running = [j for j in jobs if j.state is JobState.RUNNING]
            reports = store.progress(j.id for j in running)
            trained = [training.row(j.id, j.name, reports.get(j.id), store.attempt_steps(j.id).get(j.attempts))
                       for j in running]
            frame = (
                f"minihpc  {time.strftime('%H:%M:%S')}  nodes {up}/{len(nodes)} up  "
                f"jobs {len(running)} running, "
                f"{sum(j.state is JobState.PENDING for j in jobs)} pending  (Ctrl-C to stop)\n\n"
                f"{_nodes_table(nodes, now)}\n\n{render(QUEUE_HEADERS, _queue_rows(jobs, now))}\n"
                + (f"\n{render(training.HEADERS, trained)}\n" if trained else "")
            )
            sys.stdout.write(("\x1b[H\x1b[2J" if tty else "\n") + frame)
            sys.stdout.flush()
            if args.once:
                return 0
            time.sleep(args.interval)
    except KeyboardInterrupt:
        print()
        return 0


def cmd_show(args, settings: Settings) -> int:
    store = _store(settings)
    job = store.get_job(_job_id(args.job_id))
    if args.json:
        results = store.job_results(job.id, job.attempts) if job.attempts else {}
        _print_json(dict(job.to_json(), results={n: r.to_dict() for n, r in sorted(results.items())}))
        return 0
    rows = [
        ("JobId", job.id),
        ("JobName", job.name),
        ("UserId", job.user),
        ("JobState", job.state.value),
        ("Reason", job.reason),
        ("ExitCode", format_exit(job.exit_code, job.signal)),
        ("Priority", job.priority.value),
        ("Attempts", job.attempts),
        ("NumNodes", job.nodes_requested),
        ("NtasksPerNode", job.tasks_per_node),
        ("NodeList", ",".join(job.nodes) or "(null)"),
        ("TimeLimit", format_duration(job.time_limit)),
        ("Requeues", job.requeues),
        ("Dependency", ("afterok:" + ":".join(map(str, job.dependency))) if job.dependency else "(null)"),
        ("SubmitTime", _fmt_time(job.submitted_at)),
        ("StartTime", _fmt_time(job.started_at)),
        ("EndTime", _fmt_time(job.ended_at)),
        ("Command", " ".join([job.script_source, *job.args])),
        ("Script", f"{job.script} (sha256 {job.script_sha256[:12]})"),
        ("WorkDir", job.workdir),
    ]
    for key, value in rows:
        print(f"{key:>14} = {value}")
    return 0


def cmd_cancel(args, settings: Settings) -> int:
    store = _store(settings)
    failures = 0
    for text in args.job_ids:
        try:
            job_id = _job_id(text)
            cancelled = store.transition(
                job_id,
                JobState.CANCELLED,
                f"cancelled by {os.environ.get('USER', 'user')}",
                only_from=[JobState.PENDING, JobState.RUNNING],
            )
        except MinihpcError as exc:
            print(f"minihpc cancel: error: {exc}", file=sys.stderr)
            failures += 1
            continue
        if cancelled:
            print(f"Cancelled job {job_id}")
        else:
            job = store.get_job(job_id)
            print(f"minihpc cancel: error: job {job_id} already ended ({job.state.value})", file=sys.stderr)
            failures += 1
    return 1 if failures else 0


def _log_files(store: Store, job: Job, node: str | None) -> list[tuple[str, Path]]:
    log_dir = Path(store.cluster_info()["log_dir"]) / f"job-{job.id}"
    names = [node] if node else (job.nodes or [])
    if node and job.nodes and node not in job.nodes:
        raise UsageError(f"job {job.id} did not run on node {node!r} (nodes: {', '.join(job.nodes)})")
    return [(n, log_dir / f"{n}.log") for n in names]


def cmd_logs(args, settings: Settings) -> int:
    store = _store(settings)
    job_id = _job_id(args.job_id)
    job = store.get_job(job_id)
    if job.state is JobState.PENDING and job.attempts == 0 and not args.follow:
        print(f"job {job_id} is pending ({job.reason}); it has no logs yet", file=sys.stderr)
        return 0
    offsets: dict[str, int] = {}

    def pump() -> None:
        files = _log_files(store, store.get_job(job_id), args.node)
        many = len(files) > 1
        for name, path in files:
            if not path.exists():
                continue
            with path.open("rb") as fh:
                fh.seek(offsets.get(name, 0))
                data = fh.read()
                offsets[name] = fh.tell()
            if not data:
                continue
            text = data.decode(errors="replace")
            if many and args.follow:
                text = "".join(f"{name}: {line}" for line in text.splitlines(keepends=True))
            elif many:
                text = f"==> {name} <==\n{text}"
            sys.stdout.write(text)
        sys.stdout.flush()

    if not args.follow:
        pump()
        return 0
    try:
        while True:
            pump()
            if store.get_job(job_id).state.terminal and not store.requeue_undecided(job_id):
                time.sleep(0.3)
                pump()
                return 0
            time.sleep(0.3)
    except KeyboardInterrupt:
        return 130


def _watch_nodes(store: Store, interval: float) -> int:
    from .models import node_state_changes

    before: dict = {}
    print("watching node states; Ctrl-C to stop", flush=True)
    try:
        while True:
            nodes = {n.name: n for n in store.node_statuses()}
            after = {name: n.state for name, n in nodes.items()}
            for name, old, new in node_state_changes(before, after):
                seen = nodes[name].last_heartbeat if name in nodes else None
                beat = f" (last heartbeat {time.time() - seen:.1f}s ago)" if seen else ""
                was = old.value if old else "(new)"
                now = new.value if new else "(gone)"
                print(f"{_clock(time.time())} {name:<16} {was:>6} -> {now}{beat}", flush=True)
            before = after
            time.sleep(interval)
    except KeyboardInterrupt:
        return 0


def cmd_nodes(args, settings: Settings) -> int:
    if args.watch:
        return _watch_nodes(_store(settings), args.interval)
    if args.forget:
        store = _store(settings)
        known = {n.name for n in store.node_statuses()}
        for name in args.forget:
            if name not in known:
                raise UsageError(f"node {name!r} is not registered")
            if not store.forget_node(name):
                raise UsageError(f"node {name} is up; stop it before forgetting it")
            print(f"forgot node {name}")
        return 0
    if args.drain or args.resume:
        return _drain_or_resume(_store(settings), args.drain, args.resume, args.reason)
    nodes = _store(settings).node_statuses()
    if args.check:
        state = {n.name: n for n in nodes}.get(args.check)
        if state is None or not state.alive:
            why = "is not registered" if state is None else "is DOWN (no heartbeat)"
            print(f"minihpc nodes: node {args.check} {why}", file=sys.stderr)
            return 1
        print(f"{args.check} {state.state.value}")
        return 0
    if args.json:
        _print_json(
            [
                {
                    "name": n.name,
                    "state": n.state.value,
                    "addr": n.addr,
                    "cpus": n.cpus,
                    "memory_bytes": n.memory_bytes,
                    "job": n.job,
                    "drain_reason": n.drain_reason,
                    "last_heartbeat": n.last_heartbeat,
                    "metrics": n.metrics,
                }
                for n in nodes
            ]
        )
        return 0
    print(_nodes_table(nodes, time.time()))
    return 0


def _drain_or_resume(store: Store, drain: list[str] | None, resume: list[str] | None, reason: str) -> int:
    known = {n.name for n in store.node_statuses()}
    for name in (drain or []) + (resume or []):
        if name not in known:
            raise UsageError(f"node {name!r} is not registered")
    for name in drain or []:
        store.drain(name, reason)
        store.incident("drained", name, reason=reason)
        print(f"drained {name}: it takes no new jobs ({reason})")
    for name in resume or []:
        store.undrain(name)
        store.incident("resumed", name)
        print(f"resumed {name}: it takes jobs again; its restart history is cleared")
    return 0


def _incident_line(i: dict) -> str:
    extra = " ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}"
                     for k, v in sorted(i.items()) if k not in ("at", "kind", "node", "job") and v is not None)
    job = f"job {i['job']}" if i.get("job") is not None else ""
    return f"{_clock(i['at'])}  {i['kind']:<15} {i.get('node') or '-':<16} {job:<8} {extra}".rstrip()


def cmd_incidents(args, settings: Settings) -> int:
    store = _store(settings)
    items = store.incidents(args.limit)
    if args.json:
        _print_json(items)
        return 0
    for item in reversed(items):
        print(_incident_line(item))
    if not args.follow:
        return 0
    last = items[0]["at"] if items else 0.0
    try:
        while True:
            time.sleep(0.2)
            fresh = [i for i in store.incidents(50) if i["at"] > last]
            for item in reversed(fresh):
                print(_incident_line(item), flush=True)
            if fresh:
                last = fresh[0]["at"]
    except KeyboardInterrupt:
        return 0


def cmd_history(args, settings: Settings) -> int:
    jobs = _store(settings).ended_jobs(limit=args.limit)
    if args.json:
        _print_json([j.to_json() for j in jobs])
        return 0
    rows = [
        [
            str(j.id),
            j.name[:20],
            j.user[:10],
            j.state.value,
            format_exit(j.exit_code, j.signal),
            format_duration(_elapsed(j, j.ended_at or 0)),
            str(len(j.nodes) or j.nodes_requested),
            compress_hostlist(j.nodes) or "None assigned",
            str(j.attempts),
        ]
        for j in jobs
    ]
    headers = ["JOBID", "JOBNAME", "USER", "STATE", "EXITCODE", "ELAPSED", "NNODES", "NODELIST", "ATTEMPTS"]
    print(render(headers, rows))
    return 0


def cmd_wait(args, settings: Settings) -> int:
    store = _store(settings)
    job_id = _job_id(args.job_id)
    deadline = None if args.timeout is None else time.time() + args.timeout
    try:
        while True:
            job = store.get_job(job_id)
            if job.state.terminal and not store.requeue_undecided(job_id):
                break
            if deadline is not None and time.time() >= deadline:
                print(f"minihpc wait: job {job_id} still {job.state.value} after {args.timeout:g}s", file=sys.stderr)
                return 124
            time.sleep(0.1)
    except KeyboardInterrupt:
        return 130
    if job.state is JobState.COMPLETED:
        print(f"job {job_id} COMPLETED")
        return 0
    print(
        f"job {job_id} {job.state.value} (exit code {format_exit(job.exit_code, job.signal)}, "
        f"reason {job.reason})",
        file=sys.stderr,
    )
    return 1


def cmd_up(args, settings: Settings) -> int:
    from . import local

    if not args.local:
        raise UsageError(
            "'minihpc up' without --local starts nothing; use 'make up' for the Compose cluster"
        )
    url = local.up(Path(args.state_dir), args.workers, args.port, log=lambda m: print(m, file=sys.stderr))
    print(f"export MINIHPC_REDIS_URL={url}")
    return 0


def cmd_down(args, settings: Settings) -> int:
    from . import local

    local.down(Path(args.state_dir))
    return 0


def cmd_master(args, settings: Settings) -> int:
    from .config import shared_layout
    from .master import Master
    from .restart import from_spec

    sd_file = None
    if args.shared_dir:
        # A cluster on shared volumes (the containers, or hosts with a shared mount): the master
        # publishes the layout every node and the CLI use, and Prometheus's targets beside it.
        store = _store(settings)
        store.set_cluster_info(dict(shared_layout(args.shared_dir, args.mode), created_at=str(time.time())))
        sd_file = os.path.join(args.shared_dir, "prometheus", "targets.json")
    master = Master(settings, sd_file=args.prometheus_sd_file or sd_file, restarter=from_spec(args.restarter))
    if args.metrics_port is not None:
        from . import exporter
        from .cluster_exporter import ClusterCollector

        port = exporter.serve(args.metrics_port, ClusterCollector(master.store))
        master.cluster_metrics = f"{args.addr or socket.gethostname()}:{port}"
    signal.signal(signal.SIGTERM, lambda *_: master.stop.set())
    try:
        master.run()
    except KeyboardInterrupt:
        pass
    return 0


def cmd_agent(args, settings: Settings) -> int:
    from .agent import NodeAgent

    NodeAgent(settings, args.name, args.addr, args.metrics_port).run()
    return 0


def cmd_node(args, settings: Settings) -> int:
    from .node import commands, supervise

    return supervise(
        commands(args.name, args.master, args.shared_dir, args.metrics_port, args.addr, args.restarter,
                 args.cluster_metrics_port)
    )


def cmd_drill(args, settings: Settings) -> int:
    from . import drill, faults

    kind = faults.check_kind(args.kind)
    if kind != "redis-restart" and not args.node:
        raise UsageError(f"drill {kind} needs --node NAME (the node to hit)")
    store = _store(settings)
    if args.node and args.node not in {n.name for n in store.node_statuses()}:
        raise UsageError(f"no node named {args.node!r} in this cluster")
    job_id = _job_id(args.job) if args.job else None
    injector = faults.ComposeFaults(args.compose) if args.compose else faults.LocalFaults(args.state_dir)
    duration = args.duration if args.duration is not None else {"pause": 60.0, "disconnect": 30.0}.get(kind, 0.0)
    result = drill.run(store, injector, kind, args.node, job_id, duration=duration, timeout=args.timeout,
                       log=lambda line: print(line, file=sys.stderr, flush=True))
    if args.json:
        _print_json(result.to_dict())
    else:
        print(drill.format_drill(result))
    return 0 if drill.finished(result) and result.job_state != JobState.FAILED.value else 1


def cmd_report(args, settings: Settings) -> int:
    from . import report

    job_id = _job_id(args.job_id)
    out = Path(args.out or f"minihpc-report-job-{job_id}")
    summary = report.write(_store(settings), job_id, out)
    for name in ("loss.png", "throughput.png", "step_time.png", "timeline.png"):
        print(out / name)
    print(summary)
    return 0


def cmd_restart_proxy(args, settings: Settings) -> int:
    from .restart_proxy import serve

    serve(args.port, args.docker_socket)
    return 0


# -- wiring -------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="minihpc", description="A mini HPC cluster with a Slurm-like CLI.")
    parser.add_argument("--version", action="version", version=f"minihpc {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks and debug logs")
    parser.add_argument("--config", default=None, help="a TOML config file (also MINIHPC_CONFIG)")
    parser.add_argument("--redis-url", default=None, help="the cluster's Redis (also MINIHPC_REDIS_URL)")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("submit", help="queue a job script")
    _add_job_options(p)
    p.add_argument("--parsable", action="store_true", help="print only the job id")
    p.add_argument(
        "--script-name", default=None, help="file name for a script read from standard input (SCRIPT is -)"
    )
    p.add_argument("script", help="the job script, or - to read it from standard input")
    p.add_argument("script_args", nargs=argparse.REMAINDER, metavar="ARGS")
    p.set_defaults(func=cmd_submit)

    p = sub.add_parser("queue", help="pending and running jobs (like squeue)")
    p.add_argument("--all", action="store_true", help="include recently ended jobs")
    p.add_argument("--json", action="store_true")
    p.add_argument("--watch", action="store_true", help="refresh until Ctrl-C")
    p.add_argument("--interval", type=float, default=2.0, help="seconds between refreshes")
    p.set_defaults(func=cmd_queue)

    p = sub.add_parser("monitor", help="live view of nodes and jobs, refreshing in place")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between refreshes")
    p.add_argument("--once", action="store_true", help="print one frame and exit")
    p.set_defaults(func=cmd_monitor)

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

    p = sub.add_parser("nodes", help="the nodes and their state (like sinfo -N)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--check", metavar="NODE", default=None, help="exit 0 only if NODE is up (healthchecks)")
    p.add_argument("--watch", action="store_true", help="print every node state change until Ctrl-C")
    p.add_argument("--forget", nargs="+", metavar="NODE", default=None, help="remove DOWN nodes from the registry")
    p.add_argument("--drain", nargs="+", metavar="NODE", default=None, help="take no new jobs on NODE (a running job ends normally)")
    p.add_argument("--reason", default="drained by an operator", help="why (with --drain)")
    p.add_argument("--resume", nargs="+", metavar="NODE", default=None,
                   help="put drained NODEs back in service and clear their restart history (like scontrol ... state=resume)")
    p.add_argument("--interval", type=float, default=0.2, help="seconds between looks (with --watch)")
    p.set_defaults(func=cmd_nodes)

    p = sub.add_parser("incidents", help="node down / restarted / back / drained, jobs requeued")
    p.add_argument("--json", action="store_true")
    p.add_argument("-n", "--limit", type=int, default=50, help="how many, newest last")
    p.add_argument("-f", "--follow", action="store_true", help="keep printing new ones until Ctrl-C")
    p.set_defaults(func=cmd_incidents)

    p = sub.add_parser("history", help="ended jobs (like sacct)")
    p.add_argument("--json", action="store_true")
    p.add_argument("-n", "--limit", type=int, default=100, help="how many, newest first")
    p.set_defaults(func=cmd_history)

    p = sub.add_parser("wait", help="block until a job ends; exit 0 only if it COMPLETED")
    p.add_argument("job_id")
    p.add_argument("--timeout", type=float, default=None, help="give up after this many seconds (exit 124)")
    p.set_defaults(func=cmd_wait)

    state_default = str(local_state_dir())
    p = sub.add_parser("up", help="start a local cluster (--local)")
    p.add_argument("--local", action="store_true", help="run every node as a local process")
    p.add_argument("--workers", type=int, default=2, help="worker nodes besides master-node")
    p.add_argument("--port", type=int, default=6379, help="port for the local redis-server")
    p.add_argument("--state-dir", default=state_default, help="where the local cluster keeps its state")
    p.set_defaults(func=cmd_up)

    p = sub.add_parser("down", help="stop the local cluster")
    p.add_argument("--state-dir", default=state_default)
    p.set_defaults(func=cmd_down)

    p = sub.add_parser("master", help="run the scheduler (a cluster daemon)")
    p.add_argument("--shared-dir", default=None, help="publish this shared tree as the cluster's layout")
    p.add_argument("--mode", default="compose", help="the cluster's mode as shown to users (with --shared-dir)")
    p.add_argument("--prometheus-sd-file", default=None, help="keep Prometheus file-SD targets here")
    p.add_argument(
        "--restarter", default=None, help="how DOWN nodes are restarted: local:STATE_DIR, docker:URL or none"
    )
    p.add_argument("--metrics-port", type=int, default=None,
                   help="serve the cluster's metrics (nodes, queue, jobs, training) on this port (0: any free one)")
    p.add_argument("--addr", default=None, help="address Prometheus reaches the metrics at (default: hostname)")
    p.set_defaults(func=cmd_master)

    p = sub.add_parser("agent", help="run a node agent (a cluster daemon)")
    p.add_argument("--name", required=True, help="the node's name")
    p.add_argument("--addr", default=None, help="address peers reach this node at (default: hostname)")
    p.add_argument(
        "--metrics-port", type=int, default=None, help="serve Prometheus metrics on this port (0: any free one)"
    )
    p.set_defaults(func=cmd_agent)

    p = sub.add_parser("node", help="run a node's daemons: its agent, and the master with --master")
    p.add_argument("name", help="the node's name")
    p.add_argument("--master", action="store_true", help="also run the scheduler on this node")
    p.add_argument("--shared-dir", default=None, help="the shared tree (with --master)")
    p.add_argument("--metrics-port", type=int, default=None, help="serve Prometheus metrics on this port")
    p.add_argument("--addr", default=None, help="address peers reach this node at (default: hostname)")
    p.add_argument("--restarter", default=None, help="the master's restarter (with --master)")
    p.add_argument("--cluster-metrics-port", type=int, default=None, help="the master's cluster metrics port (with --master)")
    p.set_defaults(func=cmd_node)

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
    p.add_argument("--state-dir", default=state_default, help="the local cluster's state (without --compose)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_drill)

    p = sub.add_parser("restart-proxy", help="restart this Compose project's node containers on request")
    p.add_argument("--port", type=int, default=8700)
    p.add_argument("--docker-socket", default="/var/run/docker.sock")
    p.set_defaults(func=cmd_restart_proxy)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.debug else (
            logging.INFO if args.command in ("master", "agent", "node", "restart-proxy") else logging.WARNING
        ),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        settings = load_settings(args.config).with_overrides(redis_url=args.redis_url)
        return args.func(args, settings)
    except MinihpcError as exc:
        if args.debug:
            raise
        print(f"minihpc {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (| head); stay quiet like other Unix tools.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
