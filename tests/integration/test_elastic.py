"""Elastic jobs on a real local cluster (issue 36): ``--elastic -N 2-3`` goes on with the nodes
left when one is killed or drained, grows back when the node returns, and is a node failure,
requeued as before, when fewer than its minimum are left."""

import json
import re
import time

import pytest

from tests.conftest import wait_until
from tests.integration.conftest import JOBS
from tests.integration.test_requeue import kill_node

pytestmark = pytest.mark.integration

ALL = ["master-node", "worker-node-1", "worker-node-2"]


def incidents(c, job_id: int, since: float) -> list[dict]:
    return [i for i in reversed(json.loads(c.cli("incidents", "--json").stdout))
            if i.get("job") == job_id and i["at"] >= since]


def running_on(c, job_id: int, count: int) -> dict:
    job = c.show(job_id)
    return job if job["state"] == "RUNNING" and len(job["nodes"]) == count else None


def started(c, job_id: int, count: int, line: str = "starts at step 0") -> None:
    """Wait until the job runs on ``count`` nodes and its log has ``line`` (its ranks began)."""
    wait_until(lambda: running_on(c, job_id, count) and line in c.cli("logs", job_id).stdout, timeout=60,
               message=f"job {job_id} running on {count} nodes, its log saying {line!r}")


def test_a_killed_node_leaves_the_job_running_on_the_others_and_it_grows_back_when_the_node_returns(idle_cluster):
    c = idle_cluster
    job_id = c.submit("--elastic", "-N", "2-3", JOBS / "steps.py", 60, 0.25)
    logs = lambda: c.cli("logs", job_id).stdout  # noqa: E731
    started(c, job_id, 3, "rank 0 attempt 1 starts at step 0")
    time.sleep(2)  # some steps, each checkpointed
    killed_at = time.time()
    kill_node(c, "worker-node-2")
    shrunk = wait_until(lambda: running_on(c, job_id, 2), timeout=30, message="the job on the two nodes left")
    assert shrunk["attempts"] == 1 and shrunk["requeues"] == 0 and shrunk["resizes"] >= 1, shrunk
    assert "worker-node-2" not in shrunk["nodes"]
    # The health monitor restarts the node; the job takes it back (MINIHPC_ELASTIC_GROW_EVERY: 2 s here).
    job = c.wait(job_id, timeout=120)
    assert job["state"] == "COMPLETED", logs()
    assert (job["attempts"], job["requeues"], job["resizes"]) == (1, 0, 2), job
    assert sorted(job["nodes"]) == ALL  # grown back to three
    launched = [(int(a), int(s)) for a, s in re.findall(r"rank 0 attempt (\d+) starts at step (\d+)", logs())]
    assert [a for a, _ in launched] == [1, 2, 3], launched  # MINIHPC_ATTEMPT counts launches (the checkpoint fence)
    assert 0 < launched[1][1] <= launched[2][1], launched  # each launch went on from the checkpoint, none from 0
    assert "rank 0 done at step 60" in logs()
    kinds = [(i["kind"], i["nodes"], i["was"]) for i in incidents(c, job_id, killed_at) if i["kind"] == "resized"]
    assert kinds == [("resized", 2, 3), ("resized", 3, 2)], kinds
    assert not [i for i in incidents(c, job_id, killed_at) if i["kind"] == "requeued"]
    assert re.search(r"job \d+ attempt 1 on master-node \(node rank 0 of 2, elastic 2-3, resize 1, ", logs()), logs()


def test_a_drained_node_leaves_the_elastic_job_which_completes_while_a_fixed_size_job_waits(idle_cluster):
    c = idle_cluster
    job_id = c.submit("--elastic", "-N", "2-3", JOBS / "steps.py", 40, 0.25)
    logs = lambda: c.cli("logs", job_id).stdout  # noqa: E731
    started(c, job_id, 3)
    c.cli("nodes", "--drain", "worker-node-1", "--reason", "never back")
    try:
        fixed = c.submit("-N", 3, JOBS / "barrier_sleep.py", 0)
        job = c.wait(job_id, timeout=120)
        assert job["state"] == "COMPLETED", logs()
        assert sorted(job["nodes"]) == ["master-node", "worker-node-2"] and job["requeues"] == 0, job
        waiting = c.show(fixed)
        assert waiting["state"] == "PENDING", waiting  # three nodes it needs, two it could have
        node = next(n for n in c.nodes() if n["name"] == "worker-node-1")
        assert node["job"] is None, node  # the drained node was let go once its ranks ended
    finally:
        c.cli("nodes", "--resume", "worker-node-1")
    assert c.wait(fixed, timeout=90)["state"] == "COMPLETED"


def test_below_its_minimum_an_elastic_job_is_requeued_as_a_fixed_size_one(idle_cluster, tmp_path):
    c = idle_cluster
    blocker = c.submit("-w", "master-node", JOBS / "sleeper.py", tmp_path, 300)
    wait_until(lambda: c.show(blocker)["state"] == "RUNNING", timeout=60, message="the blocker running")
    job_id = c.submit("--elastic", "-N", "2-3", JOBS / "steps.py", 400, 0.25)
    started(c, job_id, 2)
    killed_at = time.time()
    kill_node(c, "worker-node-1")
    requeued = wait_until(lambda: c.show(job_id)["requeues"] == 1 and c.show(job_id), timeout=60,
                          message="the job requeued")
    assert requeued["resizes"] == 0, requeued
    kinds = {i["kind"] for i in incidents(c, job_id, killed_at)}
    assert "requeued" in kinds and "resized" not in kinds, kinds
    c.cli("cancel", job_id, blocker)


def test_the_mnist_jobs_losses_through_a_shrink_and_a_growth_are_one_processs_on_the_same_batches(idle_cluster,
                                                                                                  tmp_path):
    """--elastic keeps the global batch (4 x 3 ranks) whatever the size: a run drained to two
    nodes and grown back to three trains every step once (the drain and the growth end each
    launch with SIGTERM: the ranks agree on a step and save it, so nothing is trained twice),
    and in float64 its losses are one process's on batches of 12 to rounding (float32 rounds
    differently when the batch is summed in other pieces: test_balanced_ddp)."""
    import subprocess
    import sys

    from tests.integration.test_balanced_ddp import PREPARE, TRAIN, logged, torchrun

    c = idle_cluster
    subprocess.run([sys.executable, str(PREPARE), "--root", str(tmp_path / "data"), "--source", "digits"],
                   check=True, capture_output=True)
    common = ["--elastic", "--double", "--epochs", 4, "--data-root", tmp_path / "data", "--checkpoint-every", 100000]
    job_id = c.submit("--elastic", "-N", "2-3", TRAIN, *common, "--batch-size", 4, "--loss-log", "loss.txt")
    log = c.state_dir / "shared" / "models" / f"job-{job_id}" / "loss.txt"
    trained = lambda: len(log.read_text().splitlines()) if log.exists() else 0  # noqa: E731
    wait_until(lambda: running_on(c, job_id, 3) and trained() >= 40, timeout=120, message="40 steps on three nodes")
    c.cli("nodes", "--drain", "worker-node-2", "--reason", "elastic test")
    try:
        at = trained()
        wait_until(lambda: running_on(c, job_id, 2) and trained() >= at + 40, timeout=60,
                   message="40 more steps on two nodes")
    finally:
        c.cli("nodes", "--resume", "worker-node-2")
    wait_until(lambda: running_on(c, job_id, 3), timeout=60, message="the job grown back to three nodes")
    job = c.wait(job_id, timeout=180)
    assert job["state"] == "COMPLETED" and job["resizes"] == 2 and job["attempts"] == 1, \
        (job, c.cli("logs", job_id).stdout[-3000:])
    lines = [line.split() for line in log.read_text().splitlines()]
    steps = [int(step) for _, step, _ in lines]
    assert steps == list(range(1, len(steps) + 1)), "a step trained twice or skipped"
    assert len({launch for launch, _, _ in lines}) == 3  # three launches: 3 nodes, 2, 3 again
    one = torchrun(1, *common, "--batch-size", 12, "--checkpoint-dir", tmp_path / "ck1",
                   "--loss-log", tmp_path / "one.txt", cwd=tmp_path)
    assert one.returncode == 0, one.stdout + one.stderr
    elastic_run, whole = logged(log), logged(tmp_path / "one.txt")
    assert sorted(elastic_run) == sorted(whole)
    worst = max(abs(elastic_run[s] - whole[s]) for s in whole)
    print(f"\nelastic MNIST, float64, through a shrink and a growth: max loss difference from one process {worst:.2e}")
    assert worst <= 1e-9, worst


def test_a_job_that_comes_later_gets_the_nodes_an_elastic_job_grew_onto(idle_cluster):
    """Growth never outranks a pending job, whichever came first: an elastic job on all three
    nodes (-N 1-3) gives two back to a 2-node job submitted after it, goes on on one, and grows
    back once that job is done."""
    c = idle_cluster
    job_id = c.submit("--elastic", "-N", "1-3", JOBS / "steps.py", 120, 0.1)
    started(c, job_id, 3)
    since = time.time()
    later = c.submit("-N", 2, JOBS / "barrier_sleep.py", 1)
    assert c.wait(later, timeout=60)["state"] == "COMPLETED"
    job = c.wait(job_id, timeout=120)
    assert job["state"] == "COMPLETED" and job["requeues"] == 0 and job["resizes"] >= 2, job
    resized = [i for i in incidents(c, job_id, since) if i["kind"] == "resized"]
    assert (resized[0]["nodes"], resized[0]["was"]) == (1, 3), resized
    assert resized[0]["reason"].endswith(f"(given back for job {later})"), resized
    assert any(i["grew"] for i in resized[1:]), resized  # and it took them back
