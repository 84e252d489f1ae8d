"""A node whose agent heartbeats but takes no work (issue 33: a stuck worker) is found, its job
requeued, the node drained, restarted and given jobs again -- with a real local cluster. The
agent is made stuck from outside, as a hung call would leave it: its worker (the main thread)
is stopped with ptrace while its heartbeat thread beats on (tests.conftest.freeze_main_thread)."""

import json
import os
import time

import pytest

from tests.conftest import freeze_main_thread, wait_until
from tests.integration.conftest import start_cluster, stop_cluster

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root, to ptrace an agent")]


def _incidents(c, since: float) -> list[dict]:
    return [i for i in json.loads(c.cli("incidents", "--json", "--limit", 200).stdout) if i["at"] >= since]


def test_a_node_that_heartbeats_but_takes_no_work_is_restarted_and_its_job_requeued(tmp_path):
    c = start_cluster(tmp_path / "state", MINIHPC_LAUNCH_TIMEOUT="3", MINIHPC_KILL_WAIT="1")
    freezer = None
    try:
        script = tmp_path / "hello.py"
        script.write_text("import os\nprint('hello from', os.environ['SLURMD_NODENAME'], flush=True)\n")
        pid = json.loads((c.state_dir / "pids.json").read_text())["worker-node-2"]
        since = time.time()
        freezer = freeze_main_thread(pid)
        time.sleep(1.5)  # beats on: still up, so the scheduler gives it the job
        assert next(n for n in c.nodes() if n["name"] == "worker-node-2")["state"] == "idle"

        job = c.submit("-N", "3", script)
        done = c.wait(job, timeout=120)
        logs = c.cli("logs", job).stdout
        seen = _incidents(c, since)
        kinds = [(i["kind"], i["node"]) for i in seen]
        print(json.dumps(seen, indent=1), logs)
        assert done["state"] == "COMPLETED" and done["attempts"] == 2, (done, kinds)
        stuck = next(i for i in seen if i["kind"] == "stuck")
        assert stuck["node"] == "worker-node-2" and stuck["job"] == job and stuck["waited_for"] >= 3, stuck
        assert ("restart", "worker-node-2") in kinds and ("unstuck", "worker-node-2") in kinds, kinds
        assert ("requeued", "worker-node-2") in kinds, kinds
        assert logs.count("hello from") == 3 and "hello from worker-node-2" in logs, logs
        assert json.loads((c.state_dir / "pids.json").read_text())["worker-node-2"] != pid  # a new agent
        wait_until(lambda: {n["state"] for n in c.nodes()} == {"idle"}, timeout=30,
                   message="every node idle and none drained")
    finally:
        if freezer is not None:
            freezer.kill()
        stop_cluster(c)
