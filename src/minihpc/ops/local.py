"""Local mode: a whole cluster as processes on this machine (``minihpc up --local``).

It starts a redis-server bound to 127.0.0.1 with one ACL user per role (minihpc.state.acl:
the master, the agents and the CLI each connect as their own, with generated passwords), the
master, and one node agent per node (``master-node`` plus ``worker-node-1..N``), all sharing one directory tree
that stands in for the shared volumes. ``minihpc down`` stops them; the data stays. The state
directory's files are owned by :class:`minihpc.machine.local_state.LocalState`.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil
import redis

from minihpc.client.access import USER_NAME, create_token, login_name, revoke
from minihpc.core import gpus, simulation
from minihpc.core.config import shared_layout
from minihpc.core.errors import UsageError
from minihpc.machine import files, ports
from minihpc.machine.local_state import LocalState
from minihpc.machine.resources import gpu_count
from minihpc.machine.processes import process_tree, terminate
from minihpc.state import acl
from minihpc.state.connect import REDIS_ERRORS
from minihpc.state.store import Store

MASTER_NODE = "master-node"
WORKER_NODE = "worker-node-{0}"
START_TIMEOUT = 60.0
"""Seconds ``up`` waits for every node to register before it gives up."""
STOP_TIMEOUT = 5.0
"""Seconds each of the cluster's processes gets to stop before it is killed."""
CLI = [sys.executable, "-m", "minihpc.cli"]


def node_names(workers: int) -> list[str]:
    return [MASTER_NODE] + [WORKER_NODE.format(i) for i in range(1, workers + 1)]


def _spawn(argv: list[str], log_path: Path, env: dict[str, str]) -> int:
    with open(log_path, "ab") as out:
        proc = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
            start_new_session=True,
        )
    return proc.pid


def redis_conf(state: LocalState, port: int) -> str:
    return "\n".join([
        "bind 127.0.0.1",
        f"port {port}",
        "protected-mode yes",
        f"aclfile {state.redis_acl}",
        f"dir {state.redis_dir}",
        "appendonly yes",
        "appendfsync always",  # see README: a submitted job survives a crash
        'save ""',
        "maxmemory 1gb",  # writes refused past it (reads and deletes go on), never evicted
        "maxmemory-policy noeviction",
        # A job record (about 50 fields, its --export environment one of them) kept compact:
        # past 64 bytes a field made it a hash table, twice the bytes (docs/scale.md).
        "hash-max-listpack-value 4096",
        "daemonize no",
        "loglevel warning",
        "",
    ])


def find_redis_server(log=print) -> str:
    """redis-server's path; installed from Debian's packages when missing and we may (root
    with apt-get), else one line naming the command that installs it."""
    server = shutil.which("redis-server")
    if server is None and os.geteuid() == 0 and shutil.which("apt-get"):
        log("redis-server is not installed; installing it from Debian's packages")
        _apt_install("redis-server")
        server = shutil.which("redis-server")
    if server is None:
        raise UsageError("redis-server is not installed; install it with: sudo apt-get install -y redis-server")
    return server


POLICY_RC = Path("/usr/sbin/policy-rc.d")
"""Debian's hook that lets an install start services or not."""


def _apt_install(package: str) -> None:
    """Install a Debian package without starting its system service (Debian's redis-server
    would take port 6379, the local cluster's default)."""
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    ours = not POLICY_RC.exists()
    if ours:
        POLICY_RC.write_text("#!/bin/sh\nexit 101\n")
        POLICY_RC.chmod(0o755)
    try:
        for step in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "--no-install-recommends", package]):
            subprocess.run(step, env=env, stdout=subprocess.DEVNULL, check=False)
    finally:
        if ours:
            POLICY_RC.unlink(missing_ok=True)


def who_runs_jobs(job_user: str, euid: int) -> str:
    """The line ``up`` says about whose uid the jobs' ranks run under (docs/security.md)."""
    if job_user == "%u":
        return ("jobs run as their owners (MINIHPC_JOB_USER=%u): each user's own account, or a uid the "
                "cluster gives it; they must be able to read this Python and the jobs' working directories")
    if job_user:
        return f"every job runs as {job_user} (MINIHPC_JOB_USER)"
    if euid == 0:
        return ("jobs run as root, as the agents do (a local cluster runs your own jobs); "
                "MINIHPC_JOB_USER=%u runs each user's jobs as that user, MINIHPC_JOB_USER=NAME all as NAME")
    return "jobs run as you, as any program you start would: one user's cluster"


def runs_as_others(job_user: str, euid: int) -> bool:
    """Whether the jobs' ranks run as other users than the cluster's own (root's, with
    MINIHPC_JOB_USER set), who must then reach the job files in the state directory."""
    return euid == 0 and bool(job_user)


def check_reachable(prefix: str) -> None:
    """UsageError when the jobs' users could not run this Python or import minihpc (``prefix``:
    the environment, the package): a folder on the way is closed to them."""
    closed = files.closed_to_others(prefix)
    if closed is not None:
        raise UsageError(f"MINIHPC_JOB_USER runs jobs as other users, who cannot pass through {closed} "
                         f"(mode {os.stat(closed).st_mode & 0o7777:04o}) to {prefix}; install minihpc "
                         "where they can read it (chmod o+x on that folder), or unset MINIHPC_JOB_USER")


def open_to_jobs(state: LocalState, layout: dict[str, str], others: bool) -> None:
    """The state directory is its owner's alone (0700). When jobs run as other users they may
    pass through it to the shared folders (0711: no listing), whose job folders the agents hand
    to each job's user (node.identity); Redis's data and the daemons' logs and commands stay
    private, and the data folder is everyone's to read."""
    state.root.chmod(0o711 if others else 0o700)
    for path in (state.redis_dir, state.run_dir):
        path.chmod(0o700)
    if others:
        state.shared.chmod(0o711)
        for path in (Path(layout["spool_dir"]).parent, *(Path(layout[k]) for k in ("spool_dir", "log_dir", "checkpoint_dir"))):
            path.chmod(0o711)
        Path(layout["data_dir"]).chmod(0o755)


def _check_free(state: LocalState, workers: int, port: int, api_port: int | None) -> None:
    """UsageError when ``up`` cannot start: a bad count, a cluster already running from the
    state directory, or a port taken."""
    if workers < 0:
        raise UsageError(f"--workers must be 0 or more, got {workers}")
    alive = state.running_pids()
    if alive:
        raise UsageError(
            f"a local cluster is already running from {state.root} ({len(alive)} processes); run 'minihpc down' first"
        )
    if ports.in_use(port):
        raise UsageError(f"port {port} on 127.0.0.1 is already in use; choose another with --port")
    if api_port and ports.in_use(api_port):
        raise UsageError(f"port {api_port} on 127.0.0.1 is already in use; choose another with --api-port (0: no API)")


def up(state_dir: Path, workers: int, port: int, log=print, api_port: int | None = None,
       published: dict[str, str] | None = None, simulated: int = 0) -> str:
    """Start the local cluster and return the CLI's Redis URL (user ``cli``, generated password); with
    ``api_port``, also the REST API and web page on 127.0.0.1 (see :func:`start_api`).
    ``published``: settings for the cluster record beside the layout (config.published_settings);
    ``simulated``: that many simulated nodes besides (core.simulation), in one process."""
    state = LocalState(state_dir)
    _check_free(state, workers, port, api_port)
    server = find_redis_server(log)
    layout = shared_layout(state.shared, "local")
    for path in (state.redis_dir, state.run_dir, *(Path(layout[k]) for k in ("spool_dir", "log_dir", "checkpoint_dir", "data_dir"))):
        path.mkdir(parents=True, exist_ok=True)
    job_user = os.environ.get("MINIHPC_JOB_USER", "")
    others = runs_as_others(job_user, os.geteuid())
    if others:
        for needed in (sys.prefix, os.path.realpath(sys.executable), sys.base_prefix,
                       os.path.dirname(os.path.dirname(os.path.abspath(__file__)))):
            check_reachable(needed)
    open_to_jobs(state, layout, others)
    passwords = {role: secrets.token_urlsafe(24) for role in acl.ROLES}
    urls = {role: acl.url(role, passwords[role], "127.0.0.1", port) for role in acl.ROLES}
    url = urls["cli"]
    # Each daemon connects as its role; safe path: no imports from the cwd.
    daemon_env = {role: {"MINIHPC_REDIS_URL": urls[role], "PYTHONSAFEPATH": "1"} for role in ("master", "node", "cli", "api")}
    daemon_env["node"]["MINIHPC_NODE_OWNS_HOST"] = "0"  # one machine, many nodes, and you (node.sweep)
    env = {role: dict(os.environ, **extra) for role, extra in daemon_env.items()}
    state.save_redis_acl(acl.acl_file(passwords))
    state.save_redis_conf(redis_conf(state, port))
    pids = {"redis": _spawn([server, str(state.redis_conf)], state.log("redis"), env["cli"])}
    store = Store(_wait_for_redis(url, pids, state))
    store.set_cluster_info(dict(layout, **(published or {}), created_at=str(time.time())))
    names = node_names(workers)
    # Each node's command line (the health monitor respawns a node that died), its own GPUs.
    shares = gpus.local_node_env(os.environ, gpu_count(), len(names))
    agents = {
        name: {"argv": CLI + ["agent", "--name", name, "--addr", "127.0.0.1", "--metrics-port", "0"],
               "log": str(state.log(name)), "env": dict(daemon_env["node"], **share)}
        for name, share in zip(names, shares)
    }
    state.save_node_commands(agents)
    # The master serves the cluster's metrics and keeps Prometheus's file-SD targets (every
    # node's exporter and its own) in prometheus/targets.json for a Prometheus the user runs.
    master = {"argv": CLI + ["master", "--restarter", f"local:{state.root}", "--metrics-port", "0", "--addr",
                             "127.0.0.1", "--prometheus-sd-file", str(state.root / "prometheus" / "targets.json")],
              "log": str(state.log("master")), "env": daemon_env["master"]}
    state.save_master_command(master)  # to start it again as the master's Redis user, not the CLI's
    pids["master"] = _spawn(master["argv"], state.log("master"), env["master"])
    pids.update(_spawn_nodes(agents, env["node"], state, simulated))
    alert_token = secrets.token_urlsafe(24)  # what an Alertmanager posts to the API's /alerts with
    if api_port:
        pids["api"] = _spawn(CLI + ["api", "--host", "127.0.0.1", "--port", str(api_port)], state.log("api"),
                             dict(env["api"], MINIHPC_ALERT_TOKEN=alert_token))
    state.save_pids(pids)
    state.save_url(url)
    _wait_for_nodes(store, names + simulation.node_names(simulated), state)
    log(f"local cluster up: {len(names)} nodes ({', '.join(names)}){f' and {simulated} simulated' * bool(simulated)}, state in {state_dir}")
    log(who_runs_jobs(job_user, os.geteuid()))
    if api_port:
        start_api(store, state, api_port, log, alert_token)
    return url


LOCAL_TOKEN = "minihpc up --local"
"""The note on the admin token `up` makes; the next `up` revokes it."""
API_START = 30.0
"""Seconds ``up`` waits for the API to answer."""


def start_api(store: Store, state: LocalState, port: int, log=print, alert_token: str = "") -> None:
    """Wait for the API, make an admin token for the user who started the cluster, and say
    where the page is; the token is kept in STATE_DIR/api.json (mode 0600), with the token an
    Alertmanager posts its notifications to ``/alerts`` with."""
    deadline, pid = time.time() + API_START, state.pids()["api"]
    while not ports.listens(pid, port):
        if time.time() > deadline or not _alive(pid):
            taken = ports.in_use(port)  # by another process, which bound it between the check and the API
            down(state.root)
            if taken:
                raise UsageError(f"port {port} on 127.0.0.1 is already in use; choose another with --api-port (0: no API)")
            raise UsageError(f"the API did not start on port {port}; see {state.log('api')}")
        time.sleep(0.1)
    user = login_name()
    revoke(store, note=LOCAL_TOKEN)  # the token of an earlier `up` from this state directory
    token = create_token(store, user if USER_NAME.fullmatch(user) else "admin", admin=True, note=LOCAL_TOKEN)
    url = f"http://127.0.0.1:{port}/"
    state.save_api(url, token, alert_token)
    log(f"web page and REST API: {url} (admin token for {user} in {state.api_file}; "
        f"more with 'minihpc token create USER')")


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a child that exited stays a zombie until ``up`` ends)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _wait_for_redis(url: str, pids: dict[str, int], state: LocalState) -> redis.Redis:
    client = redis.Redis.from_url(url)
    deadline = time.time() + 15
    while True:
        try:
            client.ping()
            return client
        except REDIS_ERRORS:
            if time.time() > deadline or not psutil.pid_exists(pids["redis"]):
                _stop(pids)
                raise UsageError(f"redis-server did not start; see {state.log('redis')}") from None
            time.sleep(0.05)


def _spawn_nodes(agents: dict, env: dict, state: LocalState, simulated: int) -> dict[str, int]:
    """Start each node agent, and the process of the simulated ones if asked: name -> pid."""
    pids = {name: _spawn(a["argv"], Path(a["log"]), dict(env, **a["env"])) for name, a in agents.items()}
    if simulated:
        pids["simulated"] = _spawn(CLI + ["simulate", str(simulated)], state.log("simulated"), env)
    return pids


def _wait_for_nodes(store: Store, names: list[str], state: LocalState) -> None:
    deadline = time.time() + START_TIMEOUT
    while True:
        up_nodes = {n.name for n in store.node_statuses() if n.alive}
        if set(names) <= up_nodes:
            return
        dead = [n for n, pid in state.pids().items() if not psutil.pid_exists(pid)]
        if dead or time.time() > deadline:
            down(state.root)
            why = f"{dead[0]} exited" if dead else "nodes did not register in time"
            raise UsageError(f"local cluster failed to start: {why}; see {state.run_dir}")
        time.sleep(0.1)


def restart_redis(state_dir: Path) -> None:
    """Crash the local cluster's Redis (SIGKILL) and start it again on its data (a drill, a test)."""
    state = LocalState(state_dir)
    old = state.pids()["redis"]
    try:
        proc = psutil.Process(old)
        proc.kill()
        proc.wait(timeout=10)
    except psutil.NoSuchProcess:
        pass
    server = shutil.which("redis-server") or "redis-server"
    state.set_pid("redis", _spawn([server, str(state.redis_conf)], state.log("redis"), dict(os.environ)))


def _stop(pids: dict[str, int]) -> None:
    terminate([p for pid in pids.values() for p in process_tree(pid)], STOP_TIMEOUT)


def down(state_dir: Path, log=print) -> bool:
    """Stop the local cluster started from ``state_dir``: agents, master, then Redis."""
    state = LocalState(state_dir)
    if not state.exists():
        log(f"no local cluster in {state_dir}")
        return False
    pids = state.pids()
    # The master first: its health monitor would restart the agents being stopped.
    if "master" in pids:
        _stop({"master": pids["master"]})
    # Then the agents (reread: the monitor may have respawned one), and every job's ranks,
    # which run in sessions of their own under each agent.
    _stop({k: v for k, v in state.pids().items() if k not in ("redis", "master")})
    if "redis" in pids:
        _stop({"redis": pids["redis"]})
    state.clear()
    log(f"local cluster in {state_dir} stopped")
    return True
