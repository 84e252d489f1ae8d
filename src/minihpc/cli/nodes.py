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
from minihpc.client import jobs as client_jobs
from minihpc.client import nodes as client_nodes
from minihpc.client.session import open_store
from minihpc.core import training
from minihpc.core.config import Settings
from minihpc.core.models import JobState, NodeStatus, node_state_changes
from minihpc.core.partitions import Partitions
from minihpc.core.parsing import compress_hostlist
from minihpc.state.events import INCIDENTS_KEPT
from minihpc.state.store import Store

REASON_HEADERS = ["REASON", "USER", "TIMESTAMP", "NODELIST"]
NOT_RESPONDING = "Not responding"
"""sinfo's reason for a node that is DOWN without having been drained."""


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


def _last(incidents: list[dict], node: str, kind: str, undone_by: str) -> dict | None:
    """The newest ``kind`` incident of ``node`` (incidents come newest first), unless an
    ``undone_by`` incident came after it (a "drained" from before the last "resumed")."""
    for item in incidents:
        if item.get("node") == node and item.get("kind") in (kind, undone_by):
            return item if item["kind"] == kind else None
    return None


def reasons(nodes: list[NodeStatus], incidents: list[dict]) -> list[dict]:
    """Drained and DOWN nodes with why, who and since when, as ``sinfo -R`` lists them.

    Only the reason is stored with a drain; its time is that of its "drained" incident while
    the incident log still holds it, and who drained it is known only if that incident names
    a ``user``. A DOWN node that is not drained is "Not responding" since its "down"
    incident, or else since its last heartbeat."""
    out = []
    for n in nodes:
        if n.drain_reason is not None:
            reason, seen = n.drain_reason, _last(incidents, n.name, "drained", "resumed")
            since = seen["at"] if seen else None
        elif not n.alive:
            reason, seen = NOT_RESPONDING, _last(incidents, n.name, "down", "back")
            since = seen["at"] if seen else n.last_heartbeat
        else:
            continue
        out.append({"node": n.name, "state": n.state.value, "reason": reason,
                    "user": (seen or {}).get("user"), "since": since})
    return out


def reason_rows(items: list[dict]) -> list[list[str]]:
    """One row per (reason, user, timestamp), its nodes as one compact NODELIST, as sinfo does."""
    groups: dict[tuple[str, str, str], list[str]] = {}
    for item in items:
        key = (item["reason"], item["user"] or "Unknown", timestamp(item["since"]))
        groups.setdefault(key, []).append(item["node"])
    return [[*key, compress_hostlist(names)] for key, names in groups.items()]


def cmd_nodes(args, settings: Settings) -> int:
    store = open_store(settings)
    if args.watch:
        return _watch_nodes(store, args.interval)
    if args.forget:
        client_nodes.forget(store, args.forget, access.for_cli(store), done=lambda name: print(f"forgot node {name}"))
        return 0
    if args.drain or args.resume:
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
    nodes = store.node_statuses()
    if args.list_reasons:
        items = reasons(nodes, store.incidents(INCIDENTS_KEPT))
        if args.json:
            print_json(items)
        else:
            print(render(REASON_HEADERS, reason_rows(items)))
        return 0
    if args.check:
        state = {n.name: n for n in nodes}.get(args.check)
        if state is None or not state.alive:
            why = "is not registered" if state is None else "is DOWN (no heartbeat)"
            print(f"minihpc nodes: node {args.check} {why}", file=sys.stderr)
            return 1
        print(f"{args.check} {state.state.value}")
        return 0
    partitions = Partitions.from_record(store.cluster_info())
    if args.json:
        print_json([
            {"name": n.name, "state": n.state.value, "addr": n.addr, "cpus": n.cpus, "memory_bytes": n.memory_bytes,
             "gpus": n.gpus, "partitions": partitions.of_node(n.name),
             "job": n.job, "drain_reason": n.drain_reason, "last_heartbeat": n.last_heartbeat, "metrics": n.metrics,
             "cpu_model": n.cpu_model, "cpu_limit": n.cpu_limit, "gpu_model": n.gpu_model, "gflops": n.gflops,
             "allreduce_gbps": n.allreduce_gbps}
            for n in nodes
        ])
        return 0
    if args.long:
        print(render(LONG_HEADERS, long_rows(nodes)))
        return 0
    print(nodes_table(nodes, time.time(), partitions))
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

    p = sub.add_parser("nodes", help="the nodes and their state (like sinfo -N)")
    p.add_argument("--json", action="store_true")
    p.add_argument("-R", "--list-reasons", action="store_true",
                   help="drained and DOWN nodes with the reason, as sinfo -R (who drained: not recorded)")
    p.add_argument("-N", "--Node", action="store_true", help="accepted for sinfo -N: the list is one line per node already")
    p.add_argument("-l", "--long", action="store_true",
                   help="what each node is made of and was measured to do: CPU limit, GFLOP/s, all-reduce GB/s, "
                        "CPU and GPU models")
    p.add_argument("--check", metavar="NODE", default=None, help="exit 0 only if NODE is up (healthchecks)")
    p.add_argument("--watch", action="store_true", help="print every node state change until Ctrl-C")
    p.add_argument("--forget", nargs="+", metavar="NODE", default=None, help="remove DOWN nodes from the registry")
    p.add_argument("--drain", nargs="+", metavar="NODE", default=None,
                   help="take no new jobs on NODE (a running job ends normally)")
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
