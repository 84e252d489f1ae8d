"""Node failures in the Compose cluster: the health monitor restarts the container through the
restart proxy, and the interrupted MNIST job is requeued and resumes from its checkpoint."""

import json
import re
import subprocess
import time

from tests.conftest import wait_until


def container(cluster, service) -> str:
    return cluster.docker_compose("ps", "-q", service).stdout.strip()


def start_training_and_wait_for_a_checkpoint(cluster) -> int:
    cluster.make("prepare-data")
    job_id = cluster.submit("jobs/train_mnist_distributed.py", nodes=3, args="--epochs 12 --checkpoint-every 5")
    wait_until(lambda: cluster.in_master("test", "-f", f"/shared/models/job-{job_id}/LATEST", check=False).returncode == 0,
               timeout=180, interval=0.5, message="a first checkpoint")
    return job_id


def incidents_since(cluster, since: float, node: str) -> list[dict]:
    items = json.loads(cluster.minihpc("incidents", "--json", "-n", 200).stdout)
    return sorted((i for i in items if i["at"] >= since and i["node"] == node), key=lambda i: i["at"])


def check_recovery(cluster, job_id: int, node: str, since: float) -> None:
    job = cluster.wait(job_id, timeout=600)
    logs = cluster.make("logs", f"ID={job_id}").stdout
    assert job["state"] == "COMPLETED", logs[-3000:]
    assert (job["attempts"], job["requeues"]) == (2, 1), job
    assert re.search(r"resumed from /shared/models/job-\d+/ckpt-\d+\.pt at step [1-9]\d*", logs), logs[-3000:]
    kinds = [i["kind"] for i in incidents_since(cluster, since, node)]
    # A graceful stop lets the agent report NODE_FAIL itself, so "requeued" may come first.
    assert {"down", "restart", "requeued", "back"} <= set(kinds), kinds
    assert kinds.index("down") < kinds.index("restart") < kinds.index("back"), kinds


def test_a_killed_worker_is_restarted_and_the_job_resumes(idle):
    job_id = start_training_and_wait_for_a_checkpoint(idle)
    since = time.time()
    subprocess.run(["docker", "kill", container(idle, "worker-node-1")], check=True, capture_output=True)
    check_recovery(idle, job_id, "worker-node-1", since)


def test_a_stopped_worker_is_started_again_and_the_job_resumes(idle):
    job_id = start_training_and_wait_for_a_checkpoint(idle)
    since = time.time()
    subprocess.run(["docker", "stop", container(idle, "worker-node-2")], check=True, capture_output=True)
    check_recovery(idle, job_id, "worker-node-2", since)
