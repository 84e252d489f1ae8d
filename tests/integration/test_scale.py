"""Issue 38: 200 simulated nodes and 5,000 jobs of mixed sizes, priorities, arrays and a
dependency, through the real master, queues, records and health checks, all COMPLETED with
no node left allocated. Simulated nodes (core.simulation) run each share as a timer; a real job
never lands on one."""

import collections
import json
import time

import pytest

from tests.conftest import free_port, wait_until
from tests.integration.conftest import Cluster

NODES = 200
SIM = ("-C", "simulated")


@pytest.fixture
def big(tmp_path):
    for _ in range(3):
        c = Cluster(tmp_path / "state", free_port())
        out = c.cli("up", "--local", "--workers", 0, "--simulated", NODES, "--port", c.port, "--state-dir",
                    c.state_dir, "--api-port", 0, check=False, timeout=180)
        if out.returncode == 0:
            break
        assert "is already in use" in out.stderr, out.stderr
    yield c
    c.cli("down", "--state-dir", c.state_dir, check=False)


def test_200_simulated_nodes_run_5000_jobs_to_completion_and_end_with_every_node_idle(big, tmp_path):
    script = tmp_path / "sim.py"
    script.write_text("print('a simulated node never runs this: it times the share')\n")
    nodes = big.nodes()
    assert len(nodes) == NODES + 1 and sum(n["simulated"] for n in nodes) == NODES, nodes[:3]
    real = big.cli("submit", "-N", 2, script, check=False)  # master-node is the one real node
    assert real.returncode == 1 and "job needs 2 nodes; partition 'main' has 1" in real.stderr, real.stderr

    started = time.monotonic()
    first = big.submit(*SIM, script, "--sim-seconds", "1")
    sizes = {  # MaxArraySize is 1001, as Slurm's
        **{big.submit(*SIM, "--array=0-999", script, "--sim-seconds", "0.05"): 1 for _ in range(3)},
        big.submit(*SIM, "--array=0-999", "-N", 2, "--priority", "high", script, "--sim-seconds", "0.1"): 2,
        big.submit(*SIM, "--array=0-499", "-N", 4, "--priority", "low", script, "--sim-seconds", "0.2"): 4,
        big.submit(*SIM, "--array=0-498", "-N", 8, f"--dependency=afterok:{first}", script, "--sim-seconds", "0.1"): 8,
    }
    submitted = time.monotonic() - started
    wait_until(lambda: not big.queue(), timeout=600, interval=2, message="every job ended")
    ended = time.monotonic() - started

    jobs = json.loads(big.cli("history", "--json", "--limit", 10_000).stdout)
    print(f"5000 jobs on {NODES} simulated nodes: submitted in {submitted:.1f}s, all ended {ended:.1f}s after the "
          f"first submit ({5000 / ended:.0f} jobs/s)")
    assert collections.Counter(j["state"] for j in jobs) == {"COMPLETED": 5000}
    assert collections.Counter(sizes.get(j["array_job_id"], 1) for j in jobs) == {1: 3001, 2: 1000, 4: 500, 8: 499}
    assert all(len(j["nodes"]) == sizes.get(j["array_job_id"], 1) and all(n.startswith("sim-") for n in j["nodes"])
               for j in jobs)
    after = min(j["started_at"] for j in jobs if sizes.get(j["array_job_id"]) == 8)
    assert after >= next(j["ended_at"] for j in jobs if j["id"] == first)  # afterok held them
    highs = sorted(j["started_at"] for j in jobs if sizes.get(j["array_job_id"]) == 2)
    lows = sorted(j["started_at"] for j in jobs if sizes.get(j["array_job_id"]) == 4)
    assert highs[len(highs) // 2] < lows[len(lows) // 2]  # the high ones mostly went first
    nodes = big.nodes()
    assert {n["state"] for n in nodes} == {"idle"} and all(n["job"] is None for n in nodes), \
        [n for n in nodes if n["state"] != "idle"][:5]


def test_simulated_nodes_beat_from_their_own_process_only_while_their_host_runs(redis_port):
    """A host of simulated nodes hands their heartbeats to a child (a thousand busy worker
    threads starved a heartbeat thread among them): the nodes still fall silent when the host
    is stopped, come back when it continues, and are down for good when it is killed."""
    import os
    import signal
    import subprocess
    import sys

    import redis

    from minihpc.state import keys

    r = redis.Redis(port=redis_port)
    env = dict(os.environ, MINIHPC_REDIS_URL=f"redis://127.0.0.1:{redis_port}/0",
               MINIHPC_HEARTBEAT_INTERVAL="0.1", MINIHPC_NODE_TIMEOUT="0.5")
    host = subprocess.Popen([sys.executable, "-c", "import os, subprocess, sys, time; subprocess.Popen([sys.executable, "
                             "'-m', 'minihpc.node.sim_beats', str(os.getpid()), 'sim-1', 'sim-2']); time.sleep(120)"],
                            env=env)
    try:
        def alive():
            return r.exists(keys.node_alive("sim-1")) and r.exists(keys.node_alive("sim-2"))

        wait_until(alive, timeout=20, message="the beats to begin")
        host.send_signal(signal.SIGSTOP)
        wait_until(lambda: not r.exists(keys.node_alive("sim-1")), timeout=5, message="silence while stopped")
        host.send_signal(signal.SIGCONT)
        wait_until(alive, timeout=5, message="the beats to come back")
        host.kill()
        host.wait()
        wait_until(lambda: not r.exists(keys.node_alive("sim-1")), timeout=5, message="down once the host died")
        time.sleep(1.0)
        assert not r.exists(keys.node_alive("sim-1")), "the beats outlived their host"
    finally:
        host.kill()
        host.wait()
