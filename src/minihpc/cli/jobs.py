"""Job commands: queue, show, cancel, logs, wait, history (Slurm's squeue, scontrol show job,
scancel, sacct) -- thin over :mod:`minihpc.client`. Submitting is :mod:`minihpc.cli.submit`."""

from __future__ import annotations

import dataclasses
import sys
import time

from minihpc.cli.display import (
    HISTORY_HEADERS,
    QUEUE_HEADERS,
    by_start,
    history_rows,
    json_text,
    print_json,
    queue_rows,
    render,
    show_lines,
)
from minihpc.client import access, arrays, logs, reading
from minihpc.client import jobs as client_jobs
from minihpc.client import signals as client_signals
from minihpc.client.session import open_store
from minihpc.core.arrays import parse_job_ref, parse_job_refs
from minihpc.core.config import Settings
from minihpc.core.errors import MinihpcError, UsageError
from minihpc.core.models import JobState
from minihpc.core.outcome import format_exit
from minihpc.core.parsing import expand_hostlist
from minihpc.core.partitions import Partitions
from minihpc.core.signals import parse_signal
from minihpc.core.slurm_filters import JobFilter, parse_cancel_state, parse_slurm_time, parse_states, split_list
from minihpc.core.slurm_formats import (
    HISTORY_FIELDS,
    START_FORMAT,
    View,
    parse_sacct_fields,
    parse_squeue_format,
    sacct_lines,
    squeue_lines,
)
from minihpc.state.bulk import bulk_reading


def cmd_queue(args, settings: Settings) -> int:
    flt, fmt = queue_request(args)
    store = open_store(settings)
    if args.me:
        me = access.for_cli(store).user
        flt = dataclasses.replace(flt, users=frozenset({me}) & flt.users if flt.users is not None else frozenset({me}))
    if args.partition is not None:
        flt = dataclasses.replace(flt, default_partition=Partitions.from_record(store.cluster_info()).effective(""))
    if args.iterate is not None:
        if args.iterate <= 0:
            raise UsageError(f"--iterate must be a number of seconds over 0, got {args.iterate:g}")
        args.watch, args.interval = True, args.iterate

    @bulk_reading()  # a hundred thousand jobs read, ordered and shown: no cycle among them
    def once() -> str:
        now = time.time()
        jobs = client_jobs.queue_jobs(store, flt)
        needs_starts = args.start or (fmt is not None and any(c.field in "Se" for c in fmt[1]))
        view = View(now, client_jobs.pending_starts(store, now) if needs_starts else {})
        if args.start:
            jobs = by_start(jobs, view)
        if args.json:
            return json_text([dict(j.to_json(), expected_start=view.starts.get(j.id)) if args.start else j.to_json()
                              for j in jobs])
        if fmt is not None:
            return "\n".join(squeue_lines(*fmt, jobs, view, header=not args.noheader))
        return render(QUEUE_HEADERS, queue_rows(jobs, now), header=not args.noheader)

    if not args.watch:
        frame = once()
        if frame:  # --noheader and no jobs: print nothing, as squeue does
            print(frame)
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


def queue_request(args) -> tuple[JobFilter, tuple[str, list] | None]:
    """squeue's options as a filter and a parsed ``-o`` (None: minihpc's own table). Without
    ``-t``: pending and running jobs (``--start``: pending only; ``--all``: every state)."""
    if args.states is not None:
        states = parse_states(args.states, "--states")
    elif args.start:
        states = frozenset({JobState.PENDING})
    else:
        states = None if args.all else frozenset({JobState.PENDING, JobState.RUNNING})
    flt = JobFilter(
        refs=tuple(parse_job_refs(args.jobs, "--jobs")) if args.jobs is not None else None,
        users=client_jobs.user_names(split_list(args.users, "--user")) if args.users is not None else None,
        states=states,
        partitions=frozenset(split_list(args.partition, "--partition")) if args.partition is not None else None,
        nodes=frozenset(expand_hostlist(args.nodelist)) if args.nodelist is not None else None,
    )
    text = args.format if args.format is not None else (START_FORMAT if args.start else None)
    return flt, (parse_squeue_format(text) if text is not None else None)


def cmd_show(args, settings: Settings) -> int:
    """One job; for an array's id, each of its tasks (JSON: a list of them)."""
    store = open_store(settings)
    who = access.for_cli(store)  # another user's job: squeue's fields only (client.reading)
    jobs = [reading.redacted(who, job) for job in arrays.named_jobs(store, args.job_id)]
    if args.json:
        shown = [dict(job.to_json(), results={n: r.to_dict() for n, r in sorted(
            (store.job_results(job.id, job.attempts) if job.attempts and reading.can_read(who, job) else {}
             ).items())}) for job in jobs]
        print_json(shown[0] if len(shown) == 1 else shown)
        return 0
    for i, job in enumerate(jobs):
        if i:
            print()
        print("\n".join(show_lines(job)))
    return 0


def _signalling(args):
    """``scancel -s SIG [-b|-f]``: (what to do to each job instead of cancelling it, or None)."""
    if args.signal is None:
        if args.batch or args.full:
            raise UsageError("-b/--batch and -f/--full choose whom --signal reaches; give --signal too")
        return None
    sig, to = parse_signal(args.signal), client_signals.scope(args.batch, args.full)
    return lambda store, job_id, who: client_signals.signal_job(store, job_id, who, sig, to)


def cmd_cancel(args, settings: Settings) -> int:
    act = _signalling(args)
    flt = JobFilter(
        names=frozenset({args.name}) if args.name is not None else None,
        states=parse_cancel_state(args.state) if args.state is not None else None,
        users=client_jobs.user_names([args.user]) if args.user is not None else None,
    )
    client_jobs.require_selection(bool(args.job_ids), flt)
    failures, refs = 0, []
    for text in args.job_ids:
        try:
            refs.append(parse_job_ref(text))  # 12, an array task 12_3, or 12_[1-3]
        except MinihpcError as exc:
            print(f"minihpc cancel: error: {exc}", file=sys.stderr)
            failures += 1
    if failures and not refs:
        return 1
    store = open_store(settings)
    ids, unknown = arrays.resolve(store, refs, live_only=True)  # an array's id: its pending and running tasks
    for exc in unknown:
        print(f"minihpc cancel: error: {exc}", file=sys.stderr)
    failures += len(unknown)
    if unknown and not ids:
        return 1
    if act is not None and not ids:  # by filters, signal the running jobs they match: pending ones cannot be
        flt = dataclasses.replace(flt, states=(flt.states or frozenset({JobState.RUNNING})) & {JobState.RUNNING})
    report = client_jobs.cancel_matching(store, ids, flt, access.for_cli(store), act=act)
    shown = {j.id: j.array_name for j in store.get_jobs(report.cancelled)} if act is None else {}
    # scancel says nothing when it worked; minihpc cancel names what it cancelled.
    for job_id in report.cancelled if act is None and not getattr(args, "slurm", None) else ():
        print(f"Cancelled job {shown.get(job_id, job_id)}")
    for _job_id, exc in report.errors:
        print(f"minihpc cancel: error: {exc}", file=sys.stderr)
    if report.not_yours:
        print(f"minihpc cancel: left alone {len(report.not_yours)} matching job(s) of other users "
              f"({', '.join(map(str, report.not_yours))}): only their owner or an admin may "
              f"{'cancel' if act is None else 'signal'} them",
              file=sys.stderr)
    return 1 if failures or report.errors else 0


def cmd_logs(args, settings: Settings) -> int:
    store = open_store(settings)
    job_id = arrays.one_job(store, args.job_id)  # an array task as 12_3, too
    job = store.get_job(job_id)
    reading.may_read(access.for_cli(store), job)
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
    job_id = args.job_id  # an array's id waits for every task (the first that failed is reported)
    try:
        job, ended = client_jobs.wait_all(store, [j.id for j in arrays.named_jobs(store, job_id)], args.timeout)
    except KeyboardInterrupt:
        return 130
    if not ended:
        print(f"minihpc wait: job {job_id} still {job.state.value} after {args.timeout:g}s", file=sys.stderr)
        return 124
    if job.state is JobState.COMPLETED:
        print(f"job {job_id} COMPLETED")
        return 0
    print(f"job {job.array_name} {job.state.value} (exit code {format_exit(job.exit_code, job.signal)}, "
          f"reason {job.reason})", file=sys.stderr)
    return 1


def cmd_history(args, settings: Settings) -> int:
    now = time.time()
    flt = JobFilter(
        refs=tuple(parse_job_refs(args.jobs, "--jobs")) if args.jobs is not None else None,
        users=client_jobs.user_names(split_list(args.user, "--user")) if args.user is not None else None,
        states=parse_states(args.state, "--state") if args.state is not None else None,
    )
    start = parse_slurm_time(args.starttime, now, "--starttime") if args.starttime is not None else None
    end = parse_slurm_time(args.endtime, now, "--endtime") if args.endtime is not None else None
    fields = parse_sacct_fields(args.format) if args.format is not None else None
    if args.limit < 1:
        raise UsageError(f"--limit must be 1 or more, got {args.limit}")
    jobs = client_jobs.history(open_store(settings), flt, start, end, args.limit)
    if args.json:
        print_json([j.to_json() for j in jobs])
        return 0
    if fields is None and not args.parsable:
        text = render(HISTORY_HEADERS, history_rows(jobs, now), header=not args.noheader)
    else:
        text = "\n".join(sacct_lines(fields or parse_sacct_fields(HISTORY_FIELDS), jobs, now,
                                     header=not args.noheader, parsable=args.parsable))
    if text:  # --noheader and no jobs: print nothing, as sacct does
        print(text)
    return 0


def add_parsers(sub) -> None:
    p = sub.add_parser("queue", help="pending and running jobs (like squeue)", add_help=False)
    p.add_argument("--help", action="help", help="show this help message and exit")
    p.add_argument("--all", action="store_true", help="include recently ended jobs")
    p.add_argument("--json", action="store_true")
    p.add_argument("--watch", action="store_true", help="refresh until Ctrl-C")
    p.add_argument("--interval", type=float, default=2.0, help="seconds between refreshes")
    p.add_argument("-i", "--iterate", type=float, default=None, metavar="SECONDS",
                   help="squeue's --iterate: print the queue every SECONDS until Ctrl-C")
    add_queue_filters(p)
    p.set_defaults(func=cmd_queue)

    p = sub.add_parser("show", help="one job in detail (like scontrol show job)")
    p.add_argument("job_id")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("cancel", help="cancel jobs (like scancel): by id, and/or by name, state, user")
    p.add_argument("job_ids", nargs="*", metavar="ID")
    p.add_argument("-n", "--name", "--jobname", default=None, help="only jobs of this name")
    p.add_argument("-t", "--state", default=None, help="only jobs in this state: PENDING, RUNNING (or PD, R)")
    p.add_argument("-u", "--user", default=None, help="only this user's jobs")
    p.add_argument("-s", "--signal", default=None, metavar="SIG",
                   help="send SIG (USR1, TERM, 10...) to the running jobs' tasks instead of cancelling them")
    p.add_argument("-b", "--batch", action="store_true", help="with --signal: the batch shell only, no step")
    p.add_argument("-f", "--full", action="store_true",
                   help="with --signal: the batch shell, its children and every step's tasks")
    p.set_defaults(func=cmd_cancel)

    p = sub.add_parser("logs", help="a job's output, per node")
    p.add_argument("job_id")
    p.add_argument("-f", "--follow", action="store_true", help="keep printing until the job ends")
    p.add_argument("--node", default=None, help="only this node's log")
    p.set_defaults(func=cmd_logs)

    p = sub.add_parser("history", help="ended jobs (like sacct)", add_help=False)
    p.add_argument("--help", action="help", help="show this help message and exit")
    p.add_argument("--json", action="store_true")
    p.add_argument("--limit", type=int, default=100, help="how many, newest first")
    add_history_filters(p)
    p.set_defaults(func=cmd_history)

    p = sub.add_parser("wait", help="block until a job ends; exit 0 only if it COMPLETED")
    p.add_argument("job_id")
    p.add_argument("--timeout", type=float, default=None, help="give up after this many seconds (exit 124)")
    p.set_defaults(func=cmd_wait)


def add_queue_filters(p) -> None:
    """squeue's options (squeue(1)); -h is --noheader as in squeue (help is --help)."""
    p.add_argument("-u", "--user", "--users", dest="users", default=None, metavar="LIST",
                   help="only these users' jobs (comma-separated names or uids)")
    p.add_argument("-t", "--states", default=None, metavar="LIST",
                   help="only these states: PENDING,RUNNING or PD,R ..., or all (default: PD,R)")
    p.add_argument("-j", "--jobs", default=None, metavar="LIST", help="only these job ids (comma-separated; an array's id: all its tasks, 12_3: one task)")
    p.add_argument("-o", "--format", default=None, metavar="FMT", help='squeue fields, e.g. "%%.18i %%.8j %%.2t %%R"')
    p.add_argument("--start", action="store_true", help="pending jobs with their expected start, soonest first")
    p.add_argument("-h", "--noheader", action="store_true", help="no header line")
    p.add_argument("--me", action="store_true", help="only your own jobs (as -u with your name)")
    p.add_argument("-p", "--partition", default=None, metavar="LIST", help="only jobs in these partitions")
    p.add_argument("-w", "--nodelist", default=None, metavar="HOSTLIST",
                   help="only jobs running on these nodes (node[1-3],login)")


def add_history_filters(p) -> None:
    """sacct's options (sacct(1)); -n and -h are --noheader as in sacct (help is --help; the
    count is --limit)."""
    p.add_argument("-j", "--jobs", default=None, metavar="LIST", help="these job ids, in any state (an array's id: all its tasks, 12_3: one task)")
    p.add_argument("-S", "--starttime", default=None, metavar="TIME", help="jobs in the window from TIME")
    p.add_argument("-E", "--endtime", default=None, metavar="TIME", help="jobs in the window until TIME")
    p.add_argument("-s", "--state", default=None, metavar="LIST", help="only these states (CD,F,CA,TO,NF,R,PD)")
    p.add_argument("-u", "--user", default=None, metavar="LIST", help="only these users' jobs")
    p.add_argument("-o", "--format", default=None, metavar="LIST", help="sacct fields, e.g. JobID,JobName%%30,State")
    p.add_argument("-n", "-h", "--noheader", action="store_true", help="no header lines")
    p.add_argument("-P", "--parsable2", dest="parsable", action="store_const", const="P",
                   help="|-separated, nothing after the last field")
    p.add_argument("-p", "--parsable", dest="parsable", action="store_const", const="p",
                   help="|-separated, with a | after the last field")
    p.add_argument("-X", "--allocations", action="store_true", help="accepted: minihpc jobs have no steps")
    p.add_argument("-a", "--allusers", action="store_true", help="accepted: history shows every user's jobs")
