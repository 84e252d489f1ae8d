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

from minihpc.core.config import Settings, local_state_dir, published_settings, shared_layout
from minihpc.core.errors import UsageError

API_PORT = 8080
"""The REST API's and web page's port unless MINIHPC_API_PORT or --port/--api-port says."""


def cmd_up(args, settings: Settings) -> int:
    from minihpc.ops import local

    if not args.local:
        raise UsageError("'minihpc up' without --local starts nothing; use 'make up' for the Compose cluster")
    url = local.up(Path(args.state_dir), args.workers, args.port, log=lambda m: print(m, file=sys.stderr),
                   api_port=args.api_port, published=published_settings(settings), simulated=args.simulated)
    print(f"export MINIHPC_REDIS_URL={url}")
    return 0


def cmd_down(args, settings: Settings) -> int:
    from minihpc.ops import local

    local.down(Path(args.state_dir))
    return 0


def cmd_master(args, settings: Settings) -> int:
    if args.check:
        return _master_check(settings)
    from minihpc.master.loop import Master
    from minihpc.restart.spec import from_spec

    env = dict(os.environ, MINIHPC_RESTART_TOKEN_FILE=args.restart_token_file) if args.restart_token_file else None
    master = Master(settings, restarter=from_spec(args.restarter, env))
    sd_file = None
    if args.shared_dir:
        # A cluster on shared volumes (the containers, or hosts with a shared mount): the master
        # publishes the layout every node and the CLI use, and Prometheus's targets beside it.
        master.store.set_cluster_info(dict(shared_layout(args.shared_dir, args.mode), **published_settings(settings),
                                           created_at=str(time.time())))
        sd_file = os.path.join(args.shared_dir, "prometheus", "targets.json")
    master.sd_file = args.prometheus_sd_file or sd_file
    if args.metrics_port is not None:
        from minihpc.metrics.cluster import ClusterCollector
        from minihpc.metrics.http import serve

        port = serve(args.metrics_port, ClusterCollector(master.store), extra=(master.pass_seconds,))
        master.cluster_metrics = f"{args.addr or socket.gethostname()}:{port}"
    signal.signal(signal.SIGTERM, lambda *_: master.stop.set())
    try:
        master.run()
    except KeyboardInterrupt:
        pass
    return 0


def _master_check(settings: Settings) -> int:
    """A healthcheck: 0 while the master's heartbeat key is in Redis (its loop runs)."""
    from minihpc.state.connect import connect
    from minihpc.state.store import Store

    if Store(connect(settings.redis_url)).master_alive():
        print("master: alive")
        return 0
    print("minihpc master: no heartbeat from the master (its loop is not running)", file=sys.stderr)
    return 1


def cmd_api(args, settings: Settings) -> int:
    from minihpc.api.server import serve

    serve(settings, args.host, args.port, wait_redis=args.wait_redis)
    return 0


def cmd_agent(args, settings: Settings) -> int:
    from minihpc.node.agent import NodeAgent

    NodeAgent(settings, args.name, args.addr, args.metrics_port).run()
    return 0


def cmd_simulate(args, settings: Settings) -> int:
    from minihpc.core import simulation
    from minihpc.node import simulated

    if args.count < 1:
        raise UsageError(f"simulate: COUNT must be at least 1, not {args.count}")
    if args.cpus < 1 or args.seconds < 0:
        raise UsageError("simulate: --cpus must be at least 1 and --seconds at least 0")
    overrides = {"poll_interval": args.poll} if args.poll else {}
    return simulated.host(settings.with_overrides(**overrides), simulation.node_names(args.count, args.prefix),
                          args.cpus, args.seconds)


def cmd_node_exited(args, settings: Settings) -> int:
    """A node unit's ExecStopPost: report how its agent ended to the master, at once (a clean
    stop reports nothing: the agent left itself)."""
    import time

    from minihpc.core.crashes import Crash, systemd_phrase
    from minihpc.state.connect import connect
    from minihpc.state.store import Store

    cause = systemd_phrase(*(os.environ.get(k, "") for k in ("SERVICE_RESULT", "EXIT_CODE", "EXIT_STATUS")))
    if cause is not None:
        Store(connect(settings.redis_url)).report_crash(Crash(args.name, time.time(), cause))
    return 0


def cmd_node(args, settings: Settings) -> int:
    from minihpc.node.supervisor import commands, supervise

    return supervise(commands(args.name, args.master, args.shared_dir, args.metrics_port, args.addr,
                              args.restarter, args.cluster_metrics_port))


def cmd_restart_proxy(args, settings: Settings) -> int:
    from minihpc.restart.engine import Engine
    from minihpc.restart.proxy import serve
    from minihpc.restart.rules import RateLimits
    from minihpc.restart.token import load_token
    from minihpc.restart.watchdog import WatchPolicy

    token = load_token(os.environ, args.token_file)  # none: one line and exit 1, before serving
    limits = RateLimits(args.node_interval, args.max_restarts, args.window)
    watched = [s.strip() for s in args.watch.split(",") if s.strip()]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # PID 1 in its container: stop at once
    serve(args.host, args.port, Engine(args.docker_socket), token, settings.redis_url, limits,
          WatchPolicy(interval=args.watch_interval), watched)
    return 0


def _positive(kind):
    def parse(value: str):
        number = kind(value)
        if number <= 0:
            raise ValueError(value)
        return number

    parse.__name__ = f"positive {kind.__name__}"
    return parse


def _add_restart_proxy_parser(sub) -> None:
    from minihpc.restart import rules

    env = os.environ.get
    p = sub.add_parser("restart-proxy", help="restart this Compose project's DOWN node containers on request, "
                                             "and bring its Redis back (a cluster daemon)")
    p.add_argument("--host", default="0.0.0.0", help="address to listen on (default 0.0.0.0, in a container)")
    p.add_argument("--port", type=int, default=8700)
    p.add_argument("--docker-socket", default="/var/run/docker.sock")
    p.add_argument("--token-file", default=None,
                   help="file holding the restart token (also MINIHPC_RESTART_TOKEN_FILE; else MINIHPC_RESTART_TOKEN)")
    p.add_argument("--node-interval", type=_positive(float), default=env("MINIHPC_PROXY_NODE_INTERVAL", str(rules.NODE_INTERVAL)),
                   help=f"seconds between two restarts of one node, at least (default {rules.NODE_INTERVAL:g}, "
                        "or MINIHPC_PROXY_NODE_INTERVAL)")
    p.add_argument("--max-restarts", type=_positive(int), default=env("MINIHPC_PROXY_MAX_RESTARTS", str(rules.MAX_RESTARTS)),
                   help=f"restarts of all nodes per --window, at most (default {rules.MAX_RESTARTS}, or MINIHPC_PROXY_MAX_RESTARTS)")
    p.add_argument("--window", type=_positive(float), default=env("MINIHPC_PROXY_WINDOW", str(rules.RESTART_WINDOW)),
                   help=f"seconds (default {rules.RESTART_WINDOW:g}, or MINIHPC_PROXY_WINDOW)")
    p.add_argument("--watch", default=env("MINIHPC_PROXY_WATCH", "redis"),
                   help="services of this project to start again when killed or crashed, comma-separated "
                        "(default redis, or MINIHPC_PROXY_WATCH; '': none)")
    p.add_argument("--watch-interval", type=_positive(float), default=env("MINIHPC_PROXY_WATCH_INTERVAL", "1"),
                   help="seconds between two checks of each watched service (default 1, or MINIHPC_PROXY_WATCH_INTERVAL)")
    p.set_defaults(func=cmd_restart_proxy)


def add_parsers(sub) -> None:
    state_default = str(local_state_dir())
    _add_local(sub, state_default)

    p = sub.add_parser("master", help="run the scheduler (a cluster daemon)")
    p.add_argument("--shared-dir", default=None, help="publish this shared tree as the cluster's layout")
    p.add_argument("--mode", default="compose", help="the cluster's mode as shown to users (with --shared-dir)")
    p.add_argument("--prometheus-sd-file", default=None, help="keep Prometheus file-SD targets here")
    p.add_argument("--restarter", default=None, help="how DOWN nodes are restarted: local:STATE_DIR, docker:URL, "
                   "ssh:CONFIG (systemd over SSH, CONFIG being the ssh config Ansible writes) or none")
    p.add_argument("--restart-token-file", default=None,
                   help="with docker:URL: file holding the restart proxy's token (also MINIHPC_RESTART_TOKEN_FILE; "
                        "else MINIHPC_RESTART_TOKEN)")
    p.add_argument("--metrics-port", type=int, default=None,
                   help="serve the cluster's metrics (nodes, queue, jobs, training) on this port (0: any free one)")
    p.add_argument("--addr", default=None, help="address Prometheus reaches the metrics at (default: hostname)")
    p.add_argument("--check", action="store_true", help="exit 0 only if the master's loop runs (healthchecks)")
    p.set_defaults(func=cmd_master)

    p = sub.add_parser("agent", help="run a node agent (a cluster daemon)")
    p.add_argument("--name", required=True, help="the node's name")
    p.add_argument("--addr", default=None, help="address peers reach this node at (default: hostname)")
    p.add_argument("--metrics-port", type=int, default=None, help="serve Prometheus metrics on this port (0: any free one)")
    p.set_defaults(func=cmd_agent)

    _add_simulate(sub)

    p = sub.add_parser("node-exited", help="report a node agent's end to the master (a systemd unit's ExecStopPost)")
    p.add_argument("--name", required=True, help="the node's name")
    p.set_defaults(func=cmd_node_exited)

    p = sub.add_parser("node", help="run a node's daemons: its agent, and the master with --master")
    p.add_argument("name", help="the node's name")
    p.add_argument("--master", action="store_true", help="also run the scheduler on this node")
    p.add_argument("--shared-dir", default=None, help="the shared tree (with --master)")
    p.add_argument("--metrics-port", type=int, default=None, help="serve Prometheus metrics on this port")
    p.add_argument("--addr", default=None, help="address peers reach this node at (default: hostname)")
    p.add_argument("--restarter", default=None, help="the master's restarter (with --master): "
                   "local:STATE_DIR, docker:URL, ssh:CONFIG or none")
    p.add_argument("--cluster-metrics-port", type=int, default=None, help="the master's cluster metrics port (with --master)")
    p.set_defaults(func=cmd_node)

    p = sub.add_parser("api", help="serve the REST API and the web page (a cluster daemon)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0 inside a container)")
    p.add_argument("--port", type=int, default=int(os.environ.get("MINIHPC_API_PORT", API_PORT)))
    p.add_argument("--wait-redis", type=float, default=float(os.environ.get("MINIHPC_WAIT_REDIS", 0)),
                   help="seconds to wait for Redis to answer first (a starting container)")
    p.set_defaults(func=cmd_api)

    _add_restart_proxy_parser(sub)


def _add_simulate(sub) -> None:
    p = sub.add_parser("simulate", help="run COUNT simulated node agents in this process (jobs that ask for them "
                       "with --constraint simulated run as timers: core.simulation)")
    p.add_argument("count", type=int, help="how many nodes")
    p.add_argument("--prefix", default="sim-", help="their names: PREFIX0001, PREFIX0002, ... (default sim-)")
    p.add_argument("--cpus", type=int, default=8, help="CPUs each says it has (default 8)")
    p.add_argument("--seconds", type=float, default=1.0,
                   help="how long a share runs unless the job's --sim-seconds says (default 1)")
    p.add_argument("--poll", type=float, default=0.0,
                   help="seconds between a running share's checks of its job (default MINIHPC_POLL_INTERVAL)")
    p.set_defaults(func=cmd_simulate)


def _add_local(sub, state_default: str) -> None:
    p = sub.add_parser("up", help="start a local cluster (--local)")
    p.add_argument("--local", action="store_true", help="run every node as a local process")
    p.add_argument("--workers", type=int, default=2, help="worker nodes besides master-node")
    p.add_argument("--port", type=int, default=6379, help="port for the local redis-server")
    p.add_argument("--simulated", type=int, default=0, help="also this many simulated nodes (minihpc simulate)")
    p.add_argument("--state-dir", default=state_default, help="where the local cluster keeps its state")
    p.add_argument("--api-port", type=int, default=int(os.environ.get("MINIHPC_API_PORT", API_PORT)),
                   help=f"serve the REST API and web page on 127.0.0.1:PORT (default {API_PORT}, "
                        "or MINIHPC_API_PORT; 0: none)")
    p.set_defaults(func=cmd_up)

    p = sub.add_parser("down", help="stop the local cluster")
    p.add_argument("--state-dir", default=state_default)
    p.set_defaults(func=cmd_down)
