"""Local mode: a whole cluster as processes on this machine (``minihpc up --local``).

It starts a password-protected redis-server bound to 127.0.0.1, the master, and one node
agent per node (``master-node`` plus ``worker-node-1..N``), all sharing one directory tree
that stands in for the shared volumes. ``minihpc down`` stops them; the data stays.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import redis

from . import files
from .config import shared_layout
from .resources import process_tree
from .errors import UsageError
from .store import Store

MASTER_NODE = "master-node"
WORKER_NODE = "worker-node-{0}"
START_TIMEOUT = 60.0
"""Seconds ``up`` waits for every node to register before it gives up."""


def node_names(workers: int) -> list[str]:
    return [MASTER_NODE] + [WORKER_NODE.format(i) for i in range(1, workers + 1)]


def _port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _spawn(argv: list[str], log_path: Path, env: dict[str, str]) -> int:
    with open(log_path, "ab") as out:
        proc = subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
    return proc.pid


def running_pids(state_dir: Path) -> dict[str, int]:
    """The processes of a local cluster started from ``state_dir`` that are still alive."""
    path = state_dir / "pids.json"
    if not path.exists():
        return {}
    pids = json.loads(path.read_text())
    return {name: pid for name, pid in pids.items() if psutil.pid_exists(pid)}


def _redis_conf(state_dir: Path, port: int, password: str) -> Path:
    conf = state_dir / "redis.conf"
    conf.write_text(
        "\n".join(
            [
                "bind 127.0.0.1",
                f"port {port}",
                "protected-mode yes",
                f"requirepass {password}",
                f"dir {state_dir / 'redis'}",
                "appendonly yes",
                "appendfsync always",  # see README: a submitted job survives a crash
                'save ""',
                "daemonize no",
                "loglevel warning",
                "",
            ]
        )
    )
    conf.chmod(0o600)
    return conf


def up(state_dir: Path, workers: int, port: int, log=print) -> str:
    """Start the local cluster and return its Redis URL (with the generated password)."""
    if workers < 0:
        raise UsageError(f"--workers must be 0 or more, got {workers}")
    alive = running_pids(state_dir)
    if alive:
        raise UsageError(
            f"a local cluster is already running from {state_dir} "
            f"({len(alive)} processes); run 'minihpc down' first"
        )
    server = shutil.which("redis-server")
    if server is None:
        raise UsageError("redis-server not found on PATH; install it (apt-get install redis-server)")
    if _port_in_use(port):
        raise UsageError(f"port {port} on 127.0.0.1 is already in use; choose another with --port")

    shared = state_dir / "shared"
    layout = shared_layout(shared, "local")
    for sub in ("redis", "run"):
        (state_dir / sub).mkdir(parents=True, exist_ok=True)
    for key in ("spool_dir", "log_dir", "checkpoint_dir", "data_dir"):
        Path(layout[key]).mkdir(parents=True, exist_ok=True)
    state_dir.chmod(0o700)
    password = secrets.token_urlsafe(24)
    url = f"redis://:{password}@127.0.0.1:{port}/0"
    env = dict(os.environ, MINIHPC_REDIS_URL=url)
    run_dir = state_dir / "run"

    pids: dict[str, int] = {}
    pids["redis"] = _spawn([server, str(_redis_conf(state_dir, port, password))], run_dir / "redis.log", env)
    client = redis.Redis.from_url(url)
    deadline = time.time() + 15
    while True:
        try:
            client.ping()
            break
        except redis.ConnectionError:
            if time.time() > deadline or not psutil.pid_exists(pids["redis"]):
                _stop(pids)
                raise UsageError(f"redis-server did not start; see {run_dir / 'redis.log'}") from None
            time.sleep(0.05)
    store = Store(client)
    store.set_cluster_info(dict(layout, created_at=str(time.time())))
    python = [sys.executable, "-m", "minihpc.cli"]
    names = node_names(workers)
    # Each node's command line, so the health monitor can respawn a node that died.
    agents = {
        name: {
            "argv": python + ["agent", "--name", name, "--addr", "127.0.0.1", "--metrics-port", "0"],
            "log": str(run_dir / f"{name}.log"),
            "env": {"MINIHPC_REDIS_URL": url},
        }
        for name in names
    }
    (run_dir / "nodes.json").write_text(json.dumps(agents))
    (run_dir / "nodes.json").chmod(0o600)
    # The master serves the cluster's metrics and keeps Prometheus's file-SD targets (every
    # node's exporter and its own) in prometheus/targets.json for a Prometheus the user runs.
    pids["master"] = _spawn(
        python + ["master", "--restarter", f"local:{state_dir}", "--metrics-port", "0", "--addr", "127.0.0.1",
                  "--prometheus-sd-file", str(state_dir / "prometheus" / "targets.json")],
        run_dir / "master.log", env,
    )
    for name in names:
        pids[name] = _spawn(agents[name]["argv"], Path(agents[name]["log"]), env)
    (state_dir / "pids.json").write_text(json.dumps(pids))
    url_file = state_dir / "redis_url"
    url_file.write_text(url + "\n")
    url_file.chmod(0o600)

    deadline = time.time() + START_TIMEOUT
    while True:
        up_nodes = {n.name for n in store.node_statuses() if n.alive}
        if set(names) <= up_nodes:
            break
        dead = [n for n, pid in pids.items() if not psutil.pid_exists(pid)]
        if dead or time.time() > deadline:
            down(state_dir)
            why = f"{dead[0]} exited" if dead else "nodes did not register in time"
            raise UsageError(f"local cluster failed to start: {why}; see {run_dir}")
        time.sleep(0.1)
    log(f"local cluster up: {len(names)} nodes ({', '.join(names)}), state in {state_dir}")
    return url


def restart_redis(state_dir: Path) -> None:
    """Crash the local cluster's Redis (SIGKILL) and start it again on its data (a drill, a test)."""
    pids_file = state_dir / "pids.json"
    pids = json.loads(pids_file.read_text())
    old = pids["redis"]
    try:
        proc = psutil.Process(old)
        proc.kill()
        proc.wait(timeout=10)
    except psutil.NoSuchProcess:
        pass
    server = shutil.which("redis-server") or "redis-server"
    pids["redis"] = _spawn([server, str(state_dir / "redis.conf")], state_dir / "run" / "redis.log", dict(os.environ))
    files.replace(pids_file, json.dumps(pids).encode())


def _stop(pids: dict[str, int], timeout: float = 5.0) -> None:
    procs = [p for pid in pids.values() for p in process_tree(pid)]
    for p in procs:
        try:
            p.send_signal(signal.SIGTERM)
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(procs, timeout=timeout)
    for p in alive:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(alive, timeout=timeout)


def down(state_dir: Path, log=print) -> bool:
    """Stop the local cluster started from ``state_dir``: agents, master, then Redis."""
    path = state_dir / "pids.json"
    if not path.exists():
        log(f"no local cluster in {state_dir}")
        return False
    pids = json.loads(path.read_text())
    redis_pid = pids.pop("redis", None)
    master_pid = pids.pop("master", None)
    # The master first: its health monitor would restart the agents being stopped.
    if master_pid is not None:
        _stop({"master": master_pid})
    # Then the agents (reread: the monitor may have respawned one), and every job's ranks,
    # which run in sessions of their own under each agent.
    pids = {k: v for k, v in json.loads(path.read_text()).items() if k not in ("redis", "master")}
    _stop(pids)
    if redis_pid is not None:
        _stop({"redis": redis_pid})
    path.unlink()
    url_file = state_dir / "redis_url"
    if url_file.exists():
        url_file.unlink()
    log(f"local cluster in {state_dir} stopped")
    return True
