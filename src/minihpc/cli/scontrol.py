"""``minihpc scontrol``: Slurm's scontrol(1) for what minihpc has -- show job / node /
partition / hostnames / hostlist, hold, release, requeue, requeuehold, update of a job or of
nodes' state -- thin over :mod:`minihpc.client.control` and :mod:`minihpc.client.nodes`.

Like scontrol, a change that succeeds prints nothing; each one that fails prints one line, and
the exit status is non-zero if any did."""

from __future__ import annotations

import pwd
import sys
import time

from minihpc.cli.display import timestamp
from minihpc.client import access, arrays, control, logs
from minihpc.client import jobs as client_jobs
from minihpc.client import nodes as client_nodes
from minihpc.client.session import open_store
from minihpc.core import dependency as dependencies
from minihpc.core.arrays import parse_job_ref, parse_job_refs
from minihpc.core.config import Settings
from minihpc.core.errors import MinihpcError, NotFound, UsageError
from minihpc.core.models import Job, JobState
from minihpc.core.node_formats import is_node_update, node_lines, parse_node_update, partition_lines, reasons
from minihpc.core.outcome import format_exit
from minihpc.core.output_names import Names, shown
from minihpc.core.parsing import compress_hostlist, expand_hostlist, format_elapsed
from minihpc.core.partitions import Partitions
from minihpc.state.events import INCIDENTS_KEPT

SHOW_ENTITIES = ("job", "jobs", "node", "nodes", "partition", "partitions", "hostnames", "hostname", "hostlist")
INDENT = "   "


def _print_records(records: list[list[str]], oneliner: bool) -> None:
    """scontrol's records: ``Key=Value`` lines indented under the first, a blank line after
    each; with ``-o`` one line each."""
    for lines in records:
        print(" ".join(lines) if oneliner else f"\n{INDENT}".join(lines))
        if not oneliner:
            print()


def _show_nodes(args, settings: Settings) -> int:
    """show node [LIST]: every node, or those of the host list (Slurm: "Node x not found")."""
    if len(args.args) > 1:
        raise UsageError("show node takes one node name or host list")
    names = expand_hostlist(args.args[0]) if args.args else None
    store = open_store(settings)
    nodes = {n.name: n for n in store.node_statuses()}
    for name in names or []:
        if name not in nodes:
            raise NotFound(f"Node {name} not found")
    partitions = Partitions.from_record(store.cluster_info())
    why = {item["node"]: item for item in reasons(list(nodes.values()), store.incidents(INCIDENTS_KEPT))}
    shown = [nodes[name] for name in names] if names else list(nodes.values())
    _print_records([node_lines(n, partitions, why.get(n.name), timestamp) for n in shown], args.oneliner)
    return 0


def _show_partitions(args, settings: Settings) -> int:
    """show partition [NAME]: every partition, or the one named (Slurm: "Partition x not found")."""
    if len(args.args) > 1:
        raise UsageError("show partition takes one partition name")
    store = open_store(settings)
    partitions = Partitions.from_record(store.cluster_info())
    if args.args and not partitions.has(args.args[0]):
        raise NotFound(f"Partition {args.args[0]} not found")
    nodes = store.node_statuses()
    names = args.args or partitions.names
    _print_records([partition_lines(name, partitions, nodes) for name in names], args.oneliner)
    return 0


def cmd_show(args, settings: Settings) -> int:
    entity = args.entity
    if entity in ("hostnames", "hostname"):  # no cluster needed: it runs inside jobs too
        if len(args.args) > 1:
            raise UsageError("show hostnames takes one host list (comma-separated)")
        # One write: ``| head -n 1`` (every DDP sbatch script's idiom) must not see a second
        # write hit the closed pipe (exit 141 under ``set -o pipefail``), as C's stdio would not.
        sys.stdout.write("".join(f"{h}\n" for h in control.hostnames(args.args[0] if args.args else None)))
        sys.stdout.flush()
        return 0
    if entity == "hostlist":
        print(control.hostlist(args.args or [None]))
        return 0
    if entity in ("node", "nodes"):
        return _show_nodes(args, settings)
    if entity in ("partition", "partitions"):
        return _show_partitions(args, settings)
    if len(args.args) > 1:
        raise UsageError("show job takes one job id")
    if args.args:
        parse_job_ref(args.args[0])  # a malformed id is refused before the cluster is asked
    store = open_store(settings)
    # an array's id shows every task, as scontrol does; 12_3 one task
    jobs = arrays.named_jobs(store, args.args[0]) if args.args else client_jobs.queue(store, include_ended=True)
    now = time.time()
    _print_records([job_lines(job, now, *_files(job, str(logs.log_dir(store, job.id)))) for job in jobs],
                   args.oneliner)
    return 0


def _files(job: Job, log_dir: str) -> tuple[str, str]:
    """StdOut and StdErr: the ``-o``/``-e`` files of the batch script, else a log per node."""
    names = Names(job.id, job.name, job.user, job.nodes[0] if job.nodes else "%N",
                  array_job_id=job.array_job_id, array_task_id=job.array_task_id)
    stdout = shown(job.output, log_dir, names) if job.output else f"{log_dir}/%N.log"
    return stdout, shown(job.error, log_dir, names) if job.error else stdout


def job_lines(job: Job, now: float, stdout: str, stderr: str | None = None) -> list[str]:
    """The job in scontrol's ``Key=Value`` layout, one list item per output line."""
    pending = job.state is JobState.PENDING
    got = 0 if pending else len(job.nodes)  # the nodes it has or had (a pending one: none yet)
    end = job.ended_at
    if end is None and job.state is JobState.RUNNING and job.time_limit is not None and job.started_at:
        end = job.started_at + job.time_limit  # as Slurm: when its limit ends it
    dependency = dependencies.to_text(job.dependency)
    rows = [
        [("JobId", job.id), *([] if job.array_job_id is None else [
            ("ArrayJobId", job.array_job_id), ("ArrayTaskId", job.array_task_id)]), ("JobName", job.name)],
        [("UserId", user_id(job.user))],
        [("Priority", job.priority.value)],
        [("JobState", job.state.value), ("Reason", job.reason), ("Dependency", dependency)],
        [("Requeue", 1), ("Restarts", max(job.queue_attempts - (0 if pending else 1), 0)), ("BatchFlag", 1),
         ("ExitCode", "0:0" if job.exit_code is None else format_exit(job.exit_code, job.signal))],
        [("RunTime", format_elapsed(client_jobs.elapsed(job, now))), ("TimeLimit", time_limit(job.time_limit))],
        [("SubmitTime", timestamp(job.submitted_at))],
        [("StartTime", timestamp(job.started_at)), ("EndTime", timestamp(end))],
        [("NodeList", "(null)" if pending else compress_hostlist(job.nodes) or "(null)")],
        [("NumNodes", got or job.node_range), ("NumTasks", (got or job.nodes_requested) * job.tasks_per_node),
         ("NtasksPerN:B:S:C", f"{job.tasks_per_node}:0:*:*")],
        [("Command", " ".join([job.script_source, *job.args]))],
        [("WorkDir", job.workdir)],
        [("StdErr", stderr or stdout)],
        [("StdOut", stdout)],
    ]
    return [" ".join(f"{key}={value}" for key, value in row) for row in rows]


def time_limit(seconds: float | None) -> str:
    """scontrol's TimeLimit: [days-]hours:minutes:seconds, or UNLIMITED."""
    return "UNLIMITED" if seconds is None else format_elapsed(seconds)


def user_id(user: str) -> str:
    """``alice(1000)`` as scontrol prints it, or the bare name for a user this host does not
    know (one named by an API token)."""
    try:
        return f"{user}({pwd.getpwnam(user).pw_uid})"
    except KeyError:
        return user


def cmd_change(args, settings: Settings) -> int:
    """hold / release / requeue / requeuehold, each job on its own: one line per failure."""
    refs = [r for text in args.ids for r in parse_job_refs(text, "")]  # 12, 12_3, 12_[1-3]
    store = open_store(settings)
    who = access.for_cli(store)
    # an array's id: each task (hold and release: those still pending or running)
    ids, unknown = arrays.resolve(store, refs, live_only=args.action in ("hold", "release"))
    change = {
        "hold": control.hold,
        "release": control.release,
        "requeue": control.requeue,
        "requeuehold": lambda s, j, w: control.requeue(s, j, w, hold=True),
    }[args.action]
    failures = len(unknown)
    for exc in unknown:
        print(f"minihpc scontrol {args.action}: error: {exc}", file=sys.stderr)
    for job_id in ids:
        try:
            change(store, job_id, who)
        except MinihpcError as exc:
            print(f"minihpc scontrol {args.action}: error: {exc}", file=sys.stderr)
            failures += 1
    return 1 if failures else 0


def cmd_update(args, settings: Settings) -> int:
    if is_node_update(args.words):
        nodes = parse_node_update(args.words)  # a bad word is refused before Redis is asked
        store = open_store(settings)
        client_nodes.set_state(store, nodes.names, nodes.state, nodes.reason, access.for_cli(store))
        return 0
    request = control.parse_update(args.words)  # a bad word is refused before Redis is asked
    store = open_store(settings)
    control.update(store, request, access.for_cli(store))
    return 0


def add_parsers(sub) -> None:
    p = sub.add_parser("scontrol",
                       help="Slurm's scontrol: show job/node/partition/hostnames, hold, release, requeue, update")
    p.add_argument("-o", "--oneliner", action="store_true", help="show each job, node or partition on one line")
    actions = p.add_subparsers(dest="action", required=True, parser_class=type(p))
    s = actions.add_parser("show", help="show job [ID] | node [LIST] | partition [NAME] | hostnames [LIST] | "
                                        "hostlist LIST")
    s.add_argument("entity", type=str.lower, choices=SHOW_ENTITIES)
    s.add_argument("args", nargs="*", metavar="ID|LIST",
                   help="a job id; a node's name or a host list; a partition; a host list (default "
                        "$SLURM_JOB_NODELIST, for hostnames)")
    s.set_defaults(func=cmd_show)
    helps = {
        "hold": "keep pending jobs from starting (Reason=JobHeldUser)",
        "release": "let held jobs start again",
        "requeue": "send running or ended jobs back to the queue (a new attempt)",
        "requeuehold": "requeue, and hold",
    }
    for action, text in helps.items():
        a = actions.add_parser(action, help=text)
        a.add_argument("ids", nargs="+", metavar="ID", help="job ids, space- or comma-separated")
        a.set_defaults(func=cmd_change)
    u = actions.add_parser("update", help="JobId=ID [TimeLimit=T] [Priority=low|normal|high] [NumNodes=N|MIN-MAX] | "
                                          "NodeName=LIST State=DRAIN|RESUME|UNDRAIN [Reason=TEXT]")
    u.add_argument("words", nargs="+", metavar="KEY=VALUE")
    u.set_defaults(func=cmd_update)
