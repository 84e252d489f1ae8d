"""`minihpc drill` against a real local cluster training MNIST with DDP on three nodes: the
fault goes in, and the figures it reports are the cluster's own records of the recovery."""

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import wait_until
from tests.integration.conftest import JOBS

pytestmark = pytest.mark.integration

TRAIN = Path(__file__).resolve().parents[2] / "jobs" / "train_mnist_distributed.py"
PREPARE = TRAIN.with_name("prepare_mnist.py")


@pytest.fixture
def training(idle_cluster):
    """Start a 3-node MNIST run and return (cluster, job id) once it has checkpointed."""
    c = idle_cluster
    subprocess.run([sys.executable, str(PREPARE), "--root", str(c.state_dir / "shared" / "data"), "--source", "digits"],
                   check=True, capture_output=True)
    job_id = c.submit("-N", 3, TRAIN, "--epochs", "30", "--checkpoint-every", "5")
    latest = c.state_dir / "shared" / "models" / f"job-{job_id}" / "LATEST"
    wait_until(latest.exists, timeout=120, interval=0.1, message="a first checkpoint")
    return c, job_id


def drill(c, *args) -> dict:
    out = c.cli("drill", *args, "--state-dir", c.state_dir, "--json", "--timeout", 120, timeout=300)
    return json.loads(out.stdout)


def test_a_graceful_stop_checkpoints_the_step_it_stopped_at_and_loses_nothing(training):
    c, job_id = training
    d = drill(c, "stop", "--node", "worker-node-2")
    assert d["job"] == job_id and d["attempt"] == 1
    assert d["detected"] is not None and d["back"] is not None and d["resumed"] is not None, d
    logs = c.cli("logs", job_id).stdout
    (c.state_dir / "stop-drill.log").write_text(json.dumps(d) + "\n" + logs)
    assert f"stopping at step {d['resumed_from']}: SIGTERM; checkpoint saved" in logs, c.state_dir
    assert d["steps_lost"] == 0 and d["resumed_from"] == d["last_step"], d
    job = c.wait(job_id, timeout=300)
    assert (job["state"], job["attempts"], job["requeues"]) == ("COMPLETED", 2, 1)


def test_a_killed_node_is_timed_from_detection_to_the_first_resumed_step(training):
    c, job_id = training
    d = drill(c, "kill", "--node", "worker-node-1")
    assert 0 < d["detected"] < d["back"], d
    assert d["detected"] <= 3 + 1.5  # node timeout, plus a master pass and slack for a loaded machine
    assert d["resumed"] > d["back"], d  # the gang waits for all three nodes
    assert 0 <= d["steps_lost"] < 5, d  # at most the steps since the last checkpoint
    job = c.wait(job_id, timeout=300)
    assert (job["state"], job["attempts"]) == ("COMPLETED", 2)


def test_a_paused_node_is_restarted_and_the_late_unpause_finds_it_replaced(training):
    c, job_id = training
    d = drill(c, "pause", "--node", "worker-node-2", "--duration", 8)
    assert d["detected"] is not None and d["back"] is not None and d["resumed"] is not None, d
    assert any("no longer paused" in n for n in d["notes"]), d
    job = c.wait(job_id, timeout=300)
    assert (job["state"], job["attempts"]) == ("COMPLETED", 2)


def test_a_redis_restart_does_not_interrupt_training(training):
    c, job_id = training
    d = drill(c, "redis-restart")
    assert d["redis_back"] is not None and d["kept_running"] and d["steps_lost"] == 0, d
    job = c.wait(job_id, timeout=300)
    assert (job["state"], job["attempts"]) == ("COMPLETED", 1)


def test_a_killed_node_under_a_job_that_reports_no_progress_resumes_at_the_next_attempts_start(idle_cluster):
    c = idle_cluster
    job_id = c.submit("-N", 3, JOBS / "barrier_sleep.py", 90)
    wait_until(lambda: c.cli("logs", job_id).stdout.count("attempt 1 past the barrier") == 3, timeout=120,
               interval=0.2, message="all three ranks past the first barrier")
    started = time.monotonic()
    out = c.cli("drill", "kill", "--node", "worker-node-1", "--job", job_id, "--state-dir", c.state_dir,
                "--timeout", 120, timeout=300)
    took = time.monotonic() - started
    c.cli("cancel", job_id, check=False)  # ended already if the drill waited it out
    resumed = re.search(r"job resumed +(\d+\.\d+)s +\(job \d+: attempt 2 started; attempt 1 reported no progress\)",
                        out.stdout)
    assert resumed, out.stdout
    # The drill returns once attempt 2 has started, not when its timeout (or the 90 s job) ends.
    assert float(resumed.group(1)) < 30 and took < 45, (took, out.stdout)


def test_drills_refuse_what_they_cannot_do(idle_cluster):
    c = idle_cluster
    for args, message in [
        (["reboot", "--node", "worker-node-1"], "unknown drill 'reboot'"),
        (["kill"], "drill kill needs --node NAME"),
        (["kill", "--node", "nope"], "no node named 'nope'"),
        (["disconnect", "--node", "worker-node-1"], "drill disconnect needs the Compose cluster"),
    ]:
        out = c.cli("drill", *args, "--state-dir", c.state_dir, check=False)
        assert out.returncode == 1 and message in out.stderr, (args, out.stderr)
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert all(n["state"] == "idle" for n in c.nodes())
