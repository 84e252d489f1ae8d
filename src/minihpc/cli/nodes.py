"""Node and cluster views: nodes (sinfo -N, sinfo -R, drain/resume/forget), incidents, monitor."""

from __future__ import annotations

import sys
import time

from minihpc.cli.display import (
    LONG_HEADERS,
    QUEUE_HEADERS,
    clock,
    incident_line,
    long_rows,
    nodes_table,
    print_json,
    queue_rows,
    render,
    timestamp,
)
from minihpc.client import access
from minihpc.client import alerts as client_alerts
from minihpc.client import jobs as client_jobs
from minihpc.client import nodes as client_nodes
from minihpc.client.session import open_store
from minihpc.core import node_formats, training
from minihpc.core.config import Settings
from minihpc.core.models import JobState, NodeStatus, node_state_changes
from minihpc.core.node_formats import reasons
from minihpc.core.partitions import Partitions
from minihpc.core.parsing import compress_hostlist
from minihpc.core.sinfo_format import parse_format, sinfo_lines
from minihpc.core.sinfo_layout import default_format, node_filter, partition_list
from minihpc.state.events import INCIDENTS_KEPT
from minihpc.state.store import Store

REASON_HEADERS = ["REASON", "USER", "TIMESTAMP", "NODELIST"]
NOT_RESPONDING = node_formats.NOT_RESPONDING
"""sinfo's reason for a node that is DOWN without having been drained."""

SINFO = "sinfo"
"""The name under which ``nodes`` prints Slurm's layout by default; ``minihpc nodes`` keeps
its own table unless ``-o`` or ``-s`` asks for sinfo's."""


def _watch_nodes(store: Store, interval: float) -> int:
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
                print(f"{clock(time.time())} {name:<16} {was:>6} -> {now}{beat}", flush=True)
            before = after
            time.sleep(interval)
    except KeyboardInterrupt:
        return 0


def reason_rows(items: list[dict]) -> list[list[str]]:
    """One row per (reason, user, timestamp), its nodes as one compact NODELIST, as sinfo does."""
    groups: dict[tuple[str, str, str], list[str]] = {}
    for item in items:
        key = (item["reason"], item["user"] or "Unknown", timestamp(item["since"]))
        groups.setdefault(key, []).append(item["node"])
    return [[*key, compress_hostlist(names)] for key, names in groups.items()]


def _drain_or_resume(store: Store, args) -> int:
    client_nodes.known(store, (args.drain or []) + (args.resume or []))
    who = access.for_cli(store)
    if args.drain:
        client_nodes.drain(store, args.drain, args.reason, who)
    if args.resume:
        client_nodes.resume(store, args.resume, who)
    for name in args.drain or []:
        print(f"drained {name}: it takes no new jobs ({args.reason})")
    for name in args.resume or []:
        print(f"resumed {name}: it takes jobs again; its restart history is cleared")
    return 0


def _check(nodes: list[NodeStatus], name: str) -> int:
    state = {n.name: n for n in nodes}.get(name)
    if state is None or not state.alive:
        why = "is not registered" if state is None else "is DOWN (no heartbeat)"
        print(f"minihpc nodes: node {name} {why}", file=sys.stderr)
        return 1
    print(f"{name} {state.state.value}")
    return 0


def _node_json(n: NodeStatus, partitions: Partitions) -> dict:
    return {"name": n.name, "state": n.state.value, "addr": n.addr, "cpus": n.cpus, "memory_bytes": n.memory_bytes,
            "gpus": n.gpus, "gpu_devices": n.gpu_devices, "partitions": partitions.of_node(n.name),
            "job": n.job, "drain_reason": n.drain_reason, "last_heartbeat": n.last_heartbeat, "metrics": n.metrics,
            "cpu_model": n.cpu_model, "cpu_limit": n.cpu_limit, "gpu_model": n.gpu_model, "gflops": n.gflops,
            "allreduce_gbps": n.allreduce_gbps, "simulated": n.simulated}


def _selected(nodes: list[NodeStatus], partitions: Partitions, wanted, only: list[str] | None) -> list[NodeStatus]:
    """The nodes ``-n``/``-t`` (``wanted``) and ``-p`` (``only``) leave, for minihpc's own
    views; sinfo's layout filters as it groups."""
    return [n for n in nodes if wanted(n) and (only is None or set(only) & set(partitions.of_node(n.name)))]


def _table(args, nodes: list[NodeStatus], partitions: Partitions, wanted, only: list[str] | None) -> list[str]:
    """The lines of the node view: sinfo's layout under its name or with ``-o``/``-s``, else
    minihpc's own table (``-l``: the hardware one); ``-p``/``-n``/``-t`` filter either."""
    if args.format or args.summarize or getattr(args, "slurm", None) == SINFO:
        by_node = args.Node and not args.summarize
        fmt = args.format or default_format(args.summarize, by_node, args.long)
        lines = sinfo_lines(fmt, nodes, partitions, by_node, not args.noheader, wanted, only)
        # sinfo -l starts with the time, above its header (sinfo.c: print_date()).
        return [time.ctime(), *lines] if args.long and not args.noheader else lines
    shown = _selected(nodes, partitions, wanted, only)
    if args.long:
        return render(LONG_HEADERS, long_rows(shown)).splitlines()[1 if args.noheader else 0:]
    return nodes_table(shown, time.time(), partitions).splitlines()[1 if args.noheader else 0:]


def cmd_nodes(args, settings: Settings) -> int:
    wanted, only = node_filter(args.nodes, args.states), partition_list(args.partition)
    if args.format:
        parse_format(args.format)  # a bad format is refused before the cluster is asked
    store = open_store(settings)
    if args.watch:
        return _watch_nodes(store, args.interval)
    if args.forget:
        client_nodes.forget(store, args.forget, access.for_cli(store), done=lambda name: print(f"forgot node {name}"))
        return 0
    if args.drain or args.resume:
        return _drain_or_resume(store, args)
    nodes = store.node_statuses()
    if args.check:
        return _check(nodes, args.check)
    partitions = Partitions.from_record(store.cluster_info())
    if args.list_reasons or args.json:
        nodes = _selected(nodes, partitions, wanted, only)
    if args.list_reasons and args.json:
        print_json(reasons(nodes, store.incidents(INCIDENTS_KEPT)))
        return 0
    if args.json:
        print_json([_node_json(n, partitions) for n in nodes])
        return 0
    if args.list_reasons:
        rows = reason_rows(reasons(nodes, store.incidents(INCIDENTS_KEPT)))
        text = render(REASON_HEADERS, rows, header=not args.noheader).splitlines()
    else:
        text = _table(args, nodes, partitions, wanted, only)
    if text:  # --noheader and nothing to show: nothing, as sinfo prints
        print("\n".join(text))
    return 0


def cmd_incidents(args, settings: Settings) -> int:
    store = open_store(settings)
    items = store.incidents(args.limit)
    if args.json:
        print_json(items)
        return 0
    for item in reversed(items):
        print(incident_line(item))
    if not args.follow:
        return 0
    last = items[0]["at"] if items else 0.0
    try:
        while True:
            time.sleep(0.2)
            fresh = [i for i in store.incidents(50) if i["at"] > last]
            for item in reversed(fresh):
                print(incident_line(item), flush=True)
            if fresh:
                last = fresh[0]["at"]
    except KeyboardInterrupt:
        return 0


def cmd_alerts(args, settings: Settings) -> int:
    """What Alertmanager sent (minihpc.core.alerts): the alerts still firing, then the newest
    notifications, newest last."""
    seen = client_alerts.recent(open_store(settings), args.limit)
    if args.json:
        print_json(seen)
        return 0
    print(f"firing: {len(seen['firing'])}" + "".join(f"\n  {a['alertname']}  {a.get('severity') or '-'}  "
                                                     f"{a.get('node') or '-'}  {a.get('summary') or ''}".rstrip()
                                                     for a in seen["firing"]))
    for item in reversed(seen["alerts"]):
        print(incident_line(item))
    return 0


def monitor_frame(store: Store, now: float) -> str:
    """One screen of ``minihpc monitor``: nodes, the queue, and running jobs' training."""
    nodes = store.node_statuses()
    jobs = client_jobs.queue(store)
    up = sum(1 for n in nodes if n.alive)
    running = [j for j in jobs if j.state is JobState.RUNNING]
    reports = store.progress(j.id for j in running)
    trained = [training.row(j.id, j.name, reports.get(j.id), store.attempt_steps(j.id).get(j.attempts))
               for j in running]
    return (
        f"minihpc  {time.strftime('%H:%M:%S')}  nodes {up}/{len(nodes)} up  "
        f"jobs {len(running)} running, "
        f"{sum(j.state is JobState.PENDING for j in jobs)} pending  (Ctrl-C to stop)\n\n"
        f"{nodes_table(nodes, now, Partitions.from_record(store.cluster_info()))}\n\n{render(QUEUE_HEADERS, queue_rows(jobs, now))}\n"
        + (f"\n{render(training.HEADERS, trained)}\n" if trained else "")
    )


def cmd_monitor(args, settings: Settings) -> int:
    store = open_store(settings)
    tty = sys.stdout.isatty()
    try:
        while True:
            sys.stdout.write(("\x1b[H\x1b[2J" if tty else "\n") + monitor_frame(store, time.time()))
            sys.stdout.flush()
            if args.once:
                return 0
            time.sleep(args.interval)
    except KeyboardInterrupt:
        print()
        return 0


def add_parsers(sub) -> None:
    p = sub.add_parser("monitor", help="live view of nodes and jobs, refreshing in place")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between refreshes")
    p.add_argument("--once", action="store_true", help="print one frame and exit")
    p.set_defaults(func=cmd_monitor)

    p = sub.add_parser("nodes", help="the nodes and their state (sinfo: Slurm's layout)", add_help=False)
    p.add_argument("--help", action="help", help="show this help message and exit")
    p.add_argument("--json", action="store_true")
    p.add_argument("-h", "--noheader", action="store_true", help="no header line (sinfo's -h; help is --help)")
    p.add_argument("-o", "--format", default=None, metavar="FMT",
                   help='sinfo\'s fields, e.g. "%%P %%a %%l %%D %%t %%N" (%%.N right-justifies, %%N/%%-N left): '
                        "Slurm's layout, also under minihpc nodes")
    p.add_argument("-s", "--summarize", action="store_true",
                   help="one line per partition with its nodes allocated/idle/other/total (Slurm's layout)")
    p.add_argument("-p", "--partition", default=None, metavar="LIST", help="only these partitions (comma-separated)")
    p.add_argument("-n", "--nodes", default=None, metavar="HOSTLIST", help="only these nodes (worker-node-[1-2])")
    p.add_argument("-t", "--states", default=None, metavar="LIST",
                   help="only nodes in these states: idle, alloc, down, drain, drained, draining (drng), all ...")
    p.add_argument("-R", "--list-reasons", action="store_true",
                   help="drained and DOWN nodes with the reason, as sinfo -R (who drained: not recorded)")
    p.add_argument("-N", "--Node", action="store_true",
                   help="sinfo: one line per node (NODELIST NODES PARTITION STATE); minihpc nodes' table is one "
                        "line per node already")
    p.add_argument("-l", "--long", action="store_true",
                   help="sinfo: Slurm's long columns; minihpc nodes: what each node is made of and was measured "
                        "to do: CPU limit, GFLOP/s, all-reduce GB/s, CPU and GPU models")
    p.add_argument("--check", metavar="NODE", default=None, help="exit 0 only if NODE is up (healthchecks)")
    p.add_argument("--watch", action="store_true", help="print every node state change until Ctrl-C")
    p.add_argument("--forget", nargs="+", metavar="NODE", default=None, help="remove DOWN nodes from the registry")
    p.add_argument("--drain", nargs="+", metavar="NODE", default=None,
                   help="take no new jobs on NODE (a running job ends normally)")
    p.add_argument("--reason", default="drained by an operator", help="why (with --drain)")
    p.add_argument("--resume", nargs="+", metavar="NODE", default=None,
                   help="put drained NODEs back in service and clear their restart history (like scontrol ... state=resume)")
    p.add_argument("--interval", type=float, default=0.2, help="seconds between looks (with --watch)")
    p.set_defaults(func=cmd_nodes)  # under Slurm's name, cli.slurm adds slurm="sinfo"

    p = sub.add_parser("incidents", help="node down / restarted / back / drained, jobs requeued")
    p.add_argument("--json", action="store_true")
    p.add_argument("-n", "--limit", type=int, default=50, help="how many, newest last")
    p.add_argument("-f", "--follow", action="store_true", help="keep printing new ones until Ctrl-C")
    p.set_defaults(func=cmd_incidents)

    p = sub.add_parser("alerts", help="alerts Alertmanager sent: those still firing, then the newest notifications")
    p.add_argument("--json", action="store_true")
    p.add_argument("-n", "--limit", type=int, default=20, help="how many notifications, newest last")
    p.set_defaults(func=cmd_alerts)
