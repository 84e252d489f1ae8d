"""Issue 11: no outage or bad record stops the cluster.

- a job writing malformed progress records: every one is skipped by its node's agent, the
  master keeps scheduling (an honest 2-node job starts and completes meanwhile), and the
  poisoning job itself completes and frees its node;
- a share that cannot start its ranks (its workdir is gone) ends the job FAILED with the
  reason, and frees its nodes;
- a node allocated to a job that does not run (here: no such job) is freed after the grace;
- a task on a node's rq queue that is not the launch task (``os.system``, or the launch task
  with a callback) is refused unrun and recorded as an incident; the node goes on working;
- Redis stopped for longer than the node timeout while a 2-node job runs: no node is judged
  DOWN or restarted, and the job completes on its first attempt.
"""

import os
import signal
import time

import pytest
import redis

from rq import Callback

from minihpc.client.submit import Request, submit
from minihpc.core.launch_spec import LAUNCH_TASK
from minihpc.machine.local_state import LocalState
from minihpc.state import keys
from minihpc.state.connect import connect
from minihpc.state.queues import node_queue
from minihpc.state.store import Store
from tests.conftest import wait_until
from tests.integration.conftest import JOBS

pytestmark = pytest.mark.integration


def store_of(c) -> Store:
    return Store(connect((c.state_dir / "redis_url").read_text().strip()))


def master_log(c) -> str:
    return (c.state_dir / "run" / "master.log").read_text()


def agent_logs(c) -> str:
    return "".join(p.read_text() for p in (c.state_dir / "run").glob("*.log") if p.name != "master.log")


def state_of(c, job_id) -> str:
    return c.show(job_id)["state"]


def test_malformed_progress_records_are_skipped_and_stop_nothing(idle_cluster):
    c = idle_cluster
    failed_passes = master_log(c).count("scheduling pass failed")
    poison = c.submit("-J", "poison", JOBS / "poison_progress.py", 10)
    wait_until(lambda: state_of(c, poison) == "RUNNING", timeout=30, message=f"job {poison} to start")
    honest = c.submit("-N", 2, "-J", "honest", JOBS / "report_steps.py", 2)
    done = c.wait(honest, timeout=60)
    print(f"honest job {honest}: {done['state']} on {done['nodes']}; poison job {poison}: {state_of(c, poison)}")
    assert done["state"] == "COMPLETED", done
    poisoned = c.wait(poison, timeout=60)
    assert poisoned["state"] == "COMPLETED", poisoned
    assert done["ended_at"] < poisoned["ended_at"], "the honest job ran while the poisoning one did"
    wait_until(c.idle, timeout=30, message="every node idle")
    assert master_log(c).count("scheduling pass failed") == failed_passes
    # The agent said so once, and the job's log says how many.
    warned = [line for line in agent_logs(c).splitlines() if f"job {poison} attempt 1 on " in line]
    print(warned)
    assert len(warned) == 1 and "malformed progress record" in warned[0], warned
    log = c.cli("logs", poison).stdout
    print(log.strip().splitlines()[-1])
    assert "malformed progress record(s), the first: " in log
    # Nothing of the junk reached the cluster state: only numbers, and no impostor fields.
    report = store_of(c).progress([poison]).get(poison)
    assert report is None or (report["node"] != "evil" and "note" not in report), report


def test_a_job_whose_workdir_is_gone_fails_with_the_reason_and_frees_its_nodes(idle_cluster, tmp_path):
    c = idle_cluster
    gone = tmp_path / "gone"
    job = submit(store_of(c), Request(script=str(JOBS / "gate.py"), args=[str(tmp_path / "never")], nodes=2,
                                      name="no-workdir", workdir=str(gone))).id
    info = c.wait(job, timeout=60)
    print(f"job {job}: {info['state']} exit {info['exit_code']} reason {info['reason']!r}")
    assert info["state"] == "FAILED", info
    assert info["reason"].startswith("LaunchFailed (") and str(gone) in info["reason"], info["reason"]
    assert info["exit_code"] == 1
    assert str(gone) in c.cli("logs", job).stdout
    wait_until(c.idle, timeout=30, message="both nodes idle again")


def test_an_allocation_no_running_job_holds_is_freed_after_the_grace(idle_cluster):
    c = idle_cluster
    store = store_of(c)
    since = time.time()
    store.r.set(keys.node_alloc("worker-node-2"), 999999)  # as if its agent died before reporting
    wait_until(lambda: store.node_job("worker-node-2") is None, timeout=30, message="the stale allocation freed")
    took = time.time() - since
    freed = [i for i in store.incidents(50) if i["kind"] == "freed_stale_allocation" and i["at"] >= since]
    print(f"freed after {took:.1f}s: {freed}")
    assert [(i["node"], i["job"]) for i in freed] == [("worker-node-2", 999999)]
    assert took >= 2 * 2.5 + 3.0  # 2 node timeouts and a kill wait: an in-flight report lands first


def test_a_node_runs_no_task_but_the_launch_task(idle_cluster, tmp_path):
    """rq imports whatever function a task names; whoever can write a node's queue must still
    not run code on the node through it."""
    c = idle_cluster
    store = store_of(c)
    since = time.time()
    proof = tmp_path / "ran"
    # The CLI's Redis user may not write rq's keys at all (minihpc.state.acl) ...
    with pytest.raises(redis.exceptions.NoPermissionError):
        node_queue(store, "worker-node-1").enqueue("os.system", f"touch {proof}")
    # ... so the attack comes with a node agent's credentials, which can.
    node_url = LocalState(c.state_dir).node_commands()["worker-node-2"]["env"]["MINIHPC_REDIS_URL"]
    queue = node_queue(Store(connect(node_url)), "worker-node-1")
    bad = queue.enqueue("os.system", f"touch {proof}")
    hooked = queue.enqueue(LAUNCH_TASK, on_failure=Callback("os.system"))
    for job in (bad, hooked):
        wait_until(lambda job=job: job.get_status(refresh=True) == "failed", timeout=20, message="refused")
    assert not proof.exists(), "os.system ran on the node"

    def refused() -> list[str]:
        return [i["reason"] for i in store.incidents(20) if i["kind"] == "task_refused" and i["at"] >= since]

    # rq marks a task failed before the agent records why: wait for both records, then look.
    reasons = wait_until(lambda: len(r := refused()) >= 2 and r, timeout=20, message="two refusals recorded")
    print("refused:", reasons)
    assert any("refused task 'os.system'" in r for r in reasons)
    assert any("with callbacks os.system" in r for r in reasons)
    honest = c.submit("-N", 3, JOBS / "sleeper.py", tmp_path / "pids", "0.1")
    assert c.wait(honest)["state"] == "COMPLETED", "the node goes on running launch tasks"


def test_redis_stopped_longer_than_the_node_timeout_fails_no_job_and_restarts_no_node(idle_cluster):
    c = idle_cluster
    store = store_of(c)
    job = c.submit("-N", 2, "-J", "outlives-outage", JOBS / "report_steps.py", 24)
    wait_until(lambda: store.progress([job]).get(job), timeout=60, message=f"job {job} to report progress")
    redis_pid = LocalState(c.state_dir).pids()["redis"]
    stopped_at = time.time()
    os.kill(redis_pid, signal.SIGSTOP)
    try:
        time.sleep(6.0)  # the outage itself: 2.4 node timeouts
    finally:
        os.kill(redis_pid, signal.SIGCONT)
    info = c.wait(job, timeout=90)
    incidents = [i for i in store.incidents(200) if i["at"] >= stopped_at]
    print(f"job {job}: {info['state']} attempts {info['attempts']}; incidents: "
          f"{[(i['kind'], i.get('node'), round(i.get('silent_for') or 0, 1)) for i in incidents]}")
    assert info["state"] == "COMPLETED" and info["attempts"] == 1, info
    assert not [i for i in incidents if i["kind"] in ("down", "restart", "requeued")], incidents
    assert any(i["kind"] == "redis_outage" and i["silent_for"] >= 5.0 for i in incidents), incidents
    wait_until(c.idle, timeout=30, message="every node idle")
