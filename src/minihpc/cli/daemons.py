"""Cluster daemons and local mode: up, down (local mode), master, agent, node, restart-proxy.

These start the layers below the client (the master's loop, a node's agent and supervisor,
the restart proxy); each is imported only when its command runs."""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from pathlib import Path

from minihpc.core.config import Settings, local_state_dir, shared_layout
from minihpc.core.errors import UsageError

API_PORT = 8080
"""The REST API's and web page's port unless MINIHPC_API_PORT or --port/--api-port says."""


def cmd_up(args, settings: Settings) -> int:
    from minihpc.ops import local

    if not args.local:
        raise UsageError("'minihpc up' without --local starts nothing; use 'make up' for the Compose cluster")
    url = local.up(Path(args.state_dir), args.workers, args.port, log=lambda m: print(m, file=sys.stderr),
                   api_port=args.api_port)
    print(f"export MINIHPC_REDIS_URL={url}")
    return 0


def cmd_down(args, settings: Settings) -> int:
    from minihpc.ops import local

    local.down(Path(args.state_dir))
    return 0


def cmd_master(args, settings: Settings) -> int:
    from minihpc.master.loop import Master
    from minihpc.restart.spec import from_spec

    master = Master(settings, restarter=from_spec(args.restarter))
    sd_file = None
    if args.shared_dir:
        # A cluster on shared volumes (the containers, or hosts with a shared mount): the master
        # publishes the layout every node and the CLI use, and Prometheus's targets beside it.
        master.store.set_cluster_info(dict(shared_layout(args.shared_dir, args.mode), created_at=str(time.time())))
        sd_file = os.path.join(args.shared_dir, "prometheus", "targets.json")
    master.sd_file = args.prometheus_sd_file or sd_file
    if args.metrics_port is not None:
        from minihpc.metrics.cluster import ClusterCollector
        from minihpc.metrics.http import serve

        port = serve(args.metrics_port, ClusterCollector(master.store))
        master.cluster_metrics = f"{args.addr or socket.gethostname()}:{port}"
    signal.signal(signal.SIGTERM, lambda *_: master.stop.set())
    try:
        master.run()
    except KeyboardInterrupt:
        pass
    return 0


def cmd_api(args, settings: Settings) -> int:
    from minihpc.api.server import serve

    serve(settings, args.host, args.port, wait_redis=args.wait_redis)
    return 0


def cmd_agent(args, settings: Settings) -> int:
    from minihpc.node.agent import NodeAgent

    NodeAgent(settings, args.name, args.addr, args.metrics_port).run()
    return 0


def cmd_node(args, settings: Settings) -> int:
    from minihpc.node.supervisor import commands, supervise

    return supervise(commands(args.name, args.master, args.shared_dir, args.metrics_port, args.addr,
                              args.restarter, args.cluster_metrics_port))


def cmd_restart_proxy(args, settings: Settings) -> int:
    from minihpc.restart.proxy import serve

    serve(args.port, args.docker_socket)
    return 0


def add_parsers(sub) -> None:
    state_default = str(local_state_dir())
    p = sub.add_parser("up", help="start a local cluster (--local)")
    p.add_argument("--local", action="store_true", help="run every node as a local process")
    p.add_argument("--workers", type=int, default=2, help="worker nodes besides master-node")
    p.add_argument("--port", type=int, default=6379, help="port for the local redis-server")
    p.add_argument("--state-dir", default=state_default, help="where the local cluster keeps its state")
    p.add_argument("--api-port", type=int, default=int(os.environ.get("MINIHPC_API_PORT", API_PORT)),
                   help=f"serve the REST API and web page on 127.0.0.1:PORT (default {API_PORT}, "
                        "or MINIHPC_API_PORT; 0: none)")
    p.set_defaults(func=cmd_up)

    p = sub.add_parser("down", help="stop the local cluster")
    p.add_argument("--state-dir", default=state_default)
    p.set_defaults(func=cmd_down)

    p = sub.add_parser("master", help="run the scheduler (a cluster daemon)")
    p.add_argument("--shared-dir", default=None, help="publish this shared tree as the cluster's layout")
    p.add_argument("--mode", default="compose", help="the cluster's mode as shown to users (with --shared-dir)")
    p.add_argument("--prometheus-sd-file", default=None, help="keep Prometheus file-SD targets here")
    p.add_argument("--restarter", default=None, help="how DOWN nodes are restarted: local:STATE_DIR, docker:URL or none")
    p.add_argument("--metrics-port", type=int, default=None,
                   help="serve the cluster's metrics (nodes, queue, jobs, training) on this port (0: any free one)")
    p.add_argument("--addr", default=None, help="address Prometheus reaches the metrics at (default: hostname)")
    p.set_defaults(func=cmd_master)

    p = sub.add_parser("agent", help="run a node agent (a cluster daemon)")
    p.add_argument("--name", required=True, help="the node's name")
    p.add_argument("--addr", default=None, help="address peers reach this node at (default: hostname)")
    p.add_argument("--metrics-port", type=int, default=None, help="serve Prometheus metrics on this port (0: any free one)")
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

    p = sub.add_parser("api", help="serve the REST API and the web page (a cluster daemon)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0 inside a container)")
    p.add_argument("--port", type=int, default=int(os.environ.get("MINIHPC_API_PORT", API_PORT)))
    p.add_argument("--wait-redis", type=float, default=float(os.environ.get("MINIHPC_WAIT_REDIS", 0)),
                   help="seconds to wait for Redis to answer first (a starting container)")
    p.set_defaults(func=cmd_api)

    p = sub.add_parser("restart-proxy", help="restart this Compose project's node containers on request")
    p.add_argument("--port", type=int, default=8700)
    p.add_argument("--docker-socket", default="/var/run/docker.sock")
    p.set_defaults(func=cmd_restart_proxy)
