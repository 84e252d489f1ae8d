"""The warm launcher (minihpc.node.warm): a job's torchrun is forked from a process that has
imported torch, yet its ranks see what a cold start gives them, exit codes are the real ones,
``--cold`` and what the launcher cannot serve start cold with the reason in the job's log, and
a launcher that dies is replaced."""

import json
import os
import signal

import psutil
import pytest

from minihpc.machine.local_state import LocalState
from tests.conftest import wait_until
from tests.integration.conftest import JOBS

pytestmark = pytest.mark.integration

SCRIPT = str(JOBS / "where_am_i.py")
WARM = "minihpc.node.warm_server"


def seen(cluster, job_id) -> list[dict]:
    out = cluster.cli("logs", job_id).stdout
    return sorted((json.loads(line.split("WHERE ", 1)[1]) for line in out.splitlines() if "WHERE {" in line),
                  key=lambda r: r["rank"])


def warm_servers(cluster) -> dict[str, psutil.Process]:
    """Each node agent's warm launcher, by node."""
    found = {}
    for node, pid in LocalState(cluster.state_dir).pids().items():
        for child in psutil.Process(pid).children():
            if WARM in " ".join(child.cmdline()):
                found[node] = child
    return found


def test_a_job_is_forked_warm_and_sees_what_a_cold_start_would(idle_cluster):
    c = idle_cluster
    env = dict(c.env, WHERE_MARK="exported")
    out = c.cli("submit", "--parsable", "-N", 2, "-D", str(JOBS), SCRIPT, "3", env=env).stdout
    job = c.wait(int(out.strip()))
    assert (job["state"], job["exit_code"]) == ("FAILED", 3), c.cli("logs", job["id"]).stdout  # rank 1's own status, through the fork
    ranks = seen(c, job["id"])
    assert [r["rank"] for r in ranks] == [0, 1], c.cli("logs", job["id"]).stdout
    for r in ranks:
        assert any(WARM in line for line in r["ancestry"]), r["ancestry"]  # forked, not a new interpreter
        assert r["cmdline"][1:3] == ["-m", "minihpc.node.rank"], r["cmdline"]  # one task a node: no torchrun
        assert r["cmdline"][-2:] == [job["script"], "3"], r["cmdline"]  # the spooled copy, its argument
        assert r["env"] == r["proc_env"] == "exported"  # --export's, in os.environ and in /proc
        assert r["cwd"] == str(JOBS) and r["helper"] == "imported from beside the script"
        assert r["sigterm_default"] and r["uid"] == os.getuid()
    assert "cold start" not in c.cli("logs", job["id"]).stdout


def test_cold_and_what_the_launcher_cannot_serve_start_cold_and_say_why(idle_cluster):
    c = idle_cluster
    cold = c.wait(c.submit("--cold", "-D", str(JOBS), SCRIPT))
    log = c.cli("logs", cold["id"]).stdout
    assert cold["state"] == "COMPLETED" and "cold start: the job asked for a cold start (--cold)" in log, log
    assert not any(WARM in line for r in seen(c, cold["id"]) for line in r["ancestry"])

    env = dict(c.env, OMP_NUM_THREADS="1")  # read by the thread library when torch loads: fixed in the launcher
    out = c.cli("submit", "--parsable", "-D", str(JOBS), SCRIPT, env=env).stdout
    job = c.wait(int(out.strip()))
    log = c.cli("logs", job["id"]).stdout
    assert job["state"] == "COMPLETED", log
    assert "cold start: its environment sets OMP_NUM_THREADS differently" in log, log


def test_a_jobs_exit_handlers_run_warm_as_cold(idle_cluster):
    """The warm launcher skips torch's own operator unregistering at a rank's exit (it costs
    every forked rank 30-40 ms); the job's atexit handlers and finalizers still run."""
    c = idle_cluster
    script = str(JOBS / "exit_handlers.py")
    for how in ((), ("--cold",)):
        job = c.wait(c.submit(*how, "-D", str(JOBS), script))
        log = c.cli("logs", job["id"]).stdout
        assert job["state"] == "COMPLETED", log
        lines = [line.split("EXIT ", 1)[1] for line in log.splitlines() if "EXIT " in line]
        assert lines[0] == "script done" and sorted(lines[1:]) == ["atexit handler ran", "finalizer ran"], (how, log)


def test_a_dead_warm_launcher_is_replaced(idle_cluster):
    c = idle_cluster
    servers = warm_servers(c)
    assert set(servers) == {"master-node", "worker-node-1", "worker-node-2"}, servers
    for server in servers.values():
        server.send_signal(signal.SIGKILL)
    job = c.wait(c.submit("-N", 3, "-D", str(JOBS), SCRIPT))
    assert job["state"] == "COMPLETED", c.cli("logs", job["id"]).stdout
    again = warm_servers(c)
    assert set(again) == set(servers) and all(again[n].pid != servers[n].pid for n in servers)
    assert all(any(WARM in line for line in r["ancestry"]) for r in seen(c, job["id"]))
