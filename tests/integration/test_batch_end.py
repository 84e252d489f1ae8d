"""A batch job's end reaches every node: the first node tells the others that the script
ended, and a node that was not waiting on its inbox at that moment still reads it."""

import json
import signal
import time

import psutil
import pytest

from tests.conftest import wait_until
from tests.integration.conftest import start_cluster, stop_cluster

pytestmark = pytest.mark.integration


@pytest.fixture
def patient_cluster(tmp_path_factory):
    """A cluster of its own whose master waits 60 s of silence before it calls a node down:
    its test stops a node's agent for a moment."""
    c = start_cluster(tmp_path_factory.mktemp("patient"), MINIHPC_NODE_TIMEOUT="60")
    yield c
    stop_cluster(c)


def test_a_node_busy_when_the_script_ends_still_ends_its_share(patient_cluster, tmp_path):
    """The first node tells the others that the batch script ended, then cleans up. It used to
    delete every node's inbox there: a node not waiting on its inbox at that moment never read
    the END, and the job stayed RUNNING (a clean-clone CI on Compose, 12 minutes)."""
    c = patient_cluster
    gate = tmp_path / "go"
    script = tmp_path / "gate.sh"
    script.write_text("#!/bin/bash\n#SBATCH -N 2\nsrun -N 2 true\n"
                      f"while [ ! -e {gate} ]; do sleep 0.05; done\necho 'script ends'\n")
    job = c.submit("-D", tmp_path, script)
    wait_until(lambda: c.show(job)["state"] == "RUNNING", timeout=60, message="the job running")
    time.sleep(1.0)  # the step is over; both shares wait on their inboxes
    worker = psutil.Process(json.loads((c.state_dir / "pids.json").read_text())["worker-node-1"])
    worker.send_signal(signal.SIGSTOP)  # its wait on the inbox lapses: it is not waiting when the END comes
    try:
        time.sleep(2.5)
        gate.touch()
        wait_until(lambda: "script ends" in c.cli("logs", job).stdout, timeout=20, message="the script's end")
        time.sleep(1.0)  # the first node's share ends and cleans up
    finally:
        worker.send_signal(signal.SIGCONT)
    info = c.wait(job, timeout=30)
    assert info["state"] == "COMPLETED", (info, c.cli("logs", job).stdout)
