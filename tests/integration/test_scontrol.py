"""``minihpc scontrol`` on the real local cluster (scontrol(1)): show hostnames with no cluster
and inside a job, show job, hold / release, requeue of a running and of an ended job, update
of a time limit, a priority and a node count -- and the store's atomic steps under them."""


import psutil
import pytest

from minihpc.core.models import JobState
from minihpc.core.outcome import NodeResult
from minihpc.state import keys

from tests.conftest import wait_until
from tests.integration.conftest import JOBS, add_pending

pytestmark = pytest.mark.integration

NO_CLUSTER = "redis://127.0.0.1:1/0"

ATTEMPTS = """\
import os, sys, time
attempt, rank = int(os.environ["MINIHPC_ATTEMPT"]), os.environ["RANK"]
with open(os.path.join(sys.argv[1], f"attempt{attempt}-rank{rank}-{os.environ['MINIHPC_NODE']}.pid"), "w") as fh:
    fh.write(str(os.getpid()))
print(f"attempt {attempt} on {os.environ['MINIHPC_NODE']}", flush=True)
time.sleep(300 if attempt == 1 else 0.5)
"""
"""A job whose first attempt sleeps (until requeued) and whose later attempts end at once."""

HOSTNAMES = """\
import os, subprocess, sys
env = dict(os.environ, MINIHPC_REDIS_URL="%s")  # no cluster reachable from here
out = subprocess.run([sys.executable, "-m", "minihpc.cli", "scontrol", "show", "hostnames"],
                     capture_output=True, text=True, env=env)
print("HOSTS", ",".join(out.stdout.split()), "rc", out.returncode, out.stderr.strip(), flush=True)
""" % NO_CLUSTER


def scontrol(c, *args, check=True, env=None):
    return c.cli("scontrol", *args, check=check, env=env)


def fields(text: str) -> dict[str, str]:
    """``Key=Value`` words of scontrol's output (values without spaces)."""
    return dict(w.split("=", 1) for w in text.split() if "=" in w)


def queue_row(c, job_id) -> list[str]:
    rows = [line.split() for line in c.cli("queue").stdout.splitlines()[1:]]
    return next(r for r in rows if r[0] == str(job_id))


def token(c, user: str) -> dict:
    """The environment of a non-admin CLI user named by an API token."""
    value = c.cli("token", "create", user).stdout.strip()
    return dict(c.env, MINIHPC_TOKEN=value)


def fill(c, tmp_path, nodes=3) -> tuple[int, object]:
    """A job holding ``nodes`` nodes until the returned gate file is made."""
    gate = tmp_path / "gate"
    job_id = c.submit("-N", nodes, JOBS / "gate.py", gate)
    wait_until(lambda: c.show(job_id)["state"] == "RUNNING", timeout=60, message="the filler running")
    return job_id, gate


# -- show hostnames -----------------------------------------------------------------------------

def test_show_hostnames_expands_a_hostlist_with_no_cluster_at_all(cluster, tmp_path):
    env = {k: v for k, v in cluster.env.items() if not k.startswith(("MINIHPC_", "SLURM_"))}
    env.update(MINIHPC_REDIS_URL=NO_CLUSTER, MINIHPC_STATE_DIR=str(tmp_path))
    out = scontrol(cluster, "show", "hostnames", "worker-node-[1-2],master-node,n[01-03],a[1,3-4]b", env=env)
    assert out.stdout.split() == ["worker-node-1", "worker-node-2", "master-node", "n01", "n02", "n03",
                                  "a1b", "a3b", "a4b"]
    out = scontrol(cluster, "show", "hostnames", env=dict(env, SLURM_JOB_NODELIST="worker-node-[1-2]"))
    assert out.stdout.split() == ["worker-node-1", "worker-node-2"]
    bad = scontrol(cluster, "show", "hostnames", "n[3-1]", env=env, check=False)
    assert bad.returncode != 0 and bad.stdout == ""
    assert bad.stderr.strip().count("\n") == 0 and "n[3-1]" in bad.stderr
    out = scontrol(cluster, "show", "hostlist", "n3,n1,n2", env=env)
    assert out.stdout.strip() == "n[1-3]"


def test_show_hostnames_inside_a_job_reads_its_nodelist(idle_cluster):
    c = idle_cluster
    job_id = int(c.cli("submit", "--parsable", "-N", 3, "--script-name", "hosts.py", "-", input=HOSTNAMES)
                 .stdout.strip())
    job = c.wait(job_id)
    logs = c.cli("logs", job_id).stdout
    assert job["state"] == "COMPLETED", logs
    printed = [line.split()[1:4] for line in logs.splitlines() if "HOSTS " in line]
    assert len(printed) == 3, logs  # one rank on each node
    assert all(sorted(p[0].split(",")) == sorted(job["nodes"]) and p[1:] == ["rc", "0"] for p in printed), logs


# -- show job -----------------------------------------------------------------------------------

def test_show_job_prints_slurms_fields(idle_cluster, tmp_path):
    c = idle_cluster
    job_id = c.submit("-N", 2, "-t", "5", "-J", "showme", JOBS / "sleeper.py", tmp_path / "s", 0)
    job = c.wait(job_id)
    out = scontrol(c, "show", "job", job_id).stdout
    lines = out.rstrip("\n").splitlines()
    assert lines[0] == f"JobId={job_id} JobName=showme" and all(line.startswith("   ") for line in lines[1:])
    f = fields(out)
    for key in ("JobId", "JobName", "UserId", "JobState", "Reason", "Priority", "NumNodes", "NumTasks", "NodeList",
                "TimeLimit", "SubmitTime", "StartTime", "EndTime", "ExitCode", "Command", "WorkDir", "StdOut"):
        assert key in f, (key, out)
    assert (f["JobState"], f["ExitCode"], f["NumNodes"], f["TimeLimit"]) == ("COMPLETED", "0:0", "2", "00:05:00")
    assert f["UserId"].startswith(job["user"]) and f["Priority"] == "normal"
    assert f["StdOut"].endswith(f"job-{job_id}/%N.log") and f["Command"].endswith("sleeper.py")
    assert scontrol(c, "-o", "show", "job", job_id).stdout.count("\n") == 1  # --oneliner
    missing = scontrol(c, "show", "job", 999999, check=False)
    assert missing.returncode != 0 and "job 999999 does not exist" in missing.stderr


# -- hold / release -----------------------------------------------------------------------------

def test_a_held_job_never_starts_while_others_do_and_runs_once_released(idle_cluster, tmp_path):
    c = idle_cluster
    order = tmp_path / "order"
    filler, gate = fill(c, tmp_path)
    held = c.submit("-N", 1, JOBS / "record_start.py", order)  # the cluster is full: it stays pending
    scontrol(c, "hold", held)
    behind = c.submit("-N", 1, JOBS / "record_start.py", order)
    assert c.show(held)["state"] == "PENDING" and c.show(held)["held"] is True
    row = queue_row(c, held)
    assert "PD" in row and "(JobHeldUser)" in row, row
    assert fields(scontrol(c, "show", "job", held).stdout)["Reason"] == "JobHeldUser"
    gate.touch()
    assert c.wait(filler)["state"] == "COMPLETED"
    # The job behind it in line ran on the freed nodes; the held one stayed put.
    assert c.wait(behind)["state"] == "COMPLETED"
    job = c.show(held)
    assert (job["state"], job["attempts"], job["reason"]) == ("PENDING", 0, "JobHeldUser"), job
    scontrol(c, "release", held)
    assert c.wait(held)["state"] == "COMPLETED"
    ran = [int(line.split()[0]) for line in order.read_text().splitlines()]
    assert ran == [behind, held]


def test_hold_is_for_pending_jobs_of_ones_own(idle_cluster, tmp_path):
    c = idle_cluster
    filler, gate = fill(c, tmp_path)
    pending = c.submit("-N", 1, JOBS / "sleeper.py", tmp_path / "p", 0)
    refused = scontrol(c, "hold", filler, check=False)  # running: not pending
    assert refused.returncode == 1 and f"job {filler} is RUNNING; only a pending job can be held" in refused.stderr
    other = scontrol(c, "hold", pending, env=token(c, "mallory"), check=False)
    assert other.returncode == 1 and "mallory may not change it" in other.stderr
    assert c.show(pending)["held"] is False
    both = scontrol(c, "hold", f"{pending},999999", check=False)  # one line for the bad one only
    assert both.returncode == 1 and both.stderr.count("\n") == 1 and "job 999999 does not exist" in both.stderr
    assert c.show(pending)["held"] is True
    gate.touch()


# -- requeue ------------------------------------------------------------------------------------

def test_requeue_a_running_job_runs_it_again_and_then_an_ended_one(idle_cluster, tmp_path):
    c = idle_cluster
    job_id = int(c.cli("submit", "--parsable", "-N", 2, "--script-name", "attempts.py", "-", str(tmp_path),
                       input=ATTEMPTS).stdout.strip())
    first = lambda: sorted(tmp_path.glob("attempt1-*.pid"))  # noqa: E731
    wait_until(lambda: len(first()) == 2, timeout=60, message="both ranks of attempt 1 running")
    pids = [int(p.read_text()) for p in first()]
    scontrol(c, "requeue", job_id)
    job = c.wait(job_id, timeout=90)
    assert (job["state"], job["attempts"], job["requeues"]) == ("COMPLETED", 2, 0), job
    wait_until(lambda: not any(psutil.pid_exists(p) for p in pids), timeout=30,
               message="attempt 1's ranks torn down")
    logs = c.cli("logs", job_id).stdout
    printed = [line.split(" on ")[0] for line in logs.splitlines() if line.startswith("attempt ")]
    assert sorted(printed) == ["attempt 1", "attempt 1", "attempt 2", "attempt 2"], logs
    # An ended job is requeued too, as a new attempt.
    scontrol(c, "requeue", job_id)
    job = c.wait(job_id, timeout=90)
    assert (job["state"], job["attempts"], job["requeues"]) == ("COMPLETED", 3, 0), job
    assert fields(scontrol(c, "show", "job", job_id).stdout)["Restarts"] == "2"
    wait_until(lambda: all(n["state"] == "idle" for n in c.nodes()), timeout=30, message="every node freed")


def test_requeuehold_and_a_pending_job_is_not_requeued(idle_cluster, tmp_path):
    c = idle_cluster
    job_id = c.submit("-N", 1, JOBS / "sleeper.py", tmp_path / "r", 0)
    assert c.wait(job_id)["state"] == "COMPLETED"
    scontrol(c, "requeuehold", job_id)
    job = c.show(job_id)
    assert (job["state"], job["held"], job["reason"]) == ("PENDING", True, "JobHeldUser")
    refused = scontrol(c, "requeue", job_id, check=False)
    assert refused.returncode == 1 and f"job {job_id} is already PENDING" in refused.stderr
    scontrol(c, "release", job_id)
    assert (c.wait(job_id)["state"], c.show(job_id)["attempts"]) == ("COMPLETED", 2)


# -- update -------------------------------------------------------------------------------------

def test_update_the_time_limit_of_a_running_job_ends_it_timeout(idle_cluster, tmp_path):
    c = idle_cluster
    job_id = c.submit("-N", 1, "-t", "10", JOBS / "sleeper.py", tmp_path / "t", 300)
    wait_until(lambda: c.show(job_id)["state"] == "RUNNING", timeout=60, message="the job running")
    owner = token(c, c.show(job_id)["user"])  # the owner, not an admin
    raised = scontrol(c, "update", f"JobId={job_id}", "TimeLimit=20", env=owner, check=False)
    assert raised.returncode == 1 and "only an admin may raise it" in raised.stderr
    scontrol(c, "update", f"jobid={job_id}", "timelimit=0:02", env=owner)
    job = c.wait(job_id, timeout=60)
    assert (job["state"], job["reason"], job["time_limit"]) == ("TIMEOUT", "TimeLimit", 2.0), job


def test_update_priority_and_num_nodes_of_a_pending_job(idle_cluster, tmp_path):
    c = idle_cluster
    filler, gate = fill(c, tmp_path)
    job_id = c.submit("-N", 1, JOBS / "sleeper.py", tmp_path / "u", 0)
    scontrol(c, "update", f"JobId={job_id}", "Priority=high", "NumNodes=2", "TimeLimit=5")
    job = c.show(job_id)
    assert (job["priority"], job["nodes_requested"], job["time_limit"]) == ("high", 2, 300.0)
    for words, says in [
        (["Priority=100"], "priorities are names, not numbers: high, normal, low"),
        (["NumNodes=4"], "the cluster has 3"),
        (["Color=red"], "unknown update key 'Color'"),
    ]:
        out = scontrol(c, "update", f"JobId={job_id}", *words, check=False)
        assert out.returncode == 1 and says in out.stderr and out.stderr.count("\n") == 1, out.stderr
    running = scontrol(c, "update", f"JobId={filler}", "NumNodes=1", check=False)
    assert running.returncode == 1 and "only a pending job can be given another NumNodes" in running.stderr
    gate.touch()
    job = c.wait(job_id)
    assert (job["state"], len(job["nodes"])) == ("COMPLETED", 2)


# -- the store's steps under them, on a Redis of the test's own ---------------------------------

def test_a_job_held_after_the_plan_was_made_is_still_not_started(store):
    add_pending(store, 1)
    store.hold(1, "u")
    assert store.start(1, ["a", "b"], lambda pipe, job: None) is None  # the plan read it unheld
    assert not store.r.exists(keys.node_alloc("a"))
    store.set_reasons({1: "Resources"})  # nor does a stale plan's reason replace the hold's
    assert store.get_job(1).reason == "JobHeldUser"
    store.release(1)
    assert store.start(1, ["a", "b"], lambda pipe, job: None).state is JobState.RUNNING


def test_requeue_frees_the_nodes_that_reported_and_the_rest_by_their_report(store):
    add_pending(store, 1)
    store.start(1, ["a", "b"], lambda pipe, job: None)
    store.record_result(1, 1, "a", NodeResult(0))  # a's ranks are done; b's still run
    assert store.r.get(keys.node_alloc("a")) == b"1"
    job = store.requeue_job(1)
    assert job.state is JobState.PENDING and store.get_job(1).state is JobState.PENDING
    assert not store.r.exists(keys.node_alloc("a")) and store.r.get(keys.node_alloc("b")) == b"1"
    assert store.r.smembers(keys.JOBS_PENDING) == {b"1"} and not store.r.smembers(keys.JOBS_ACTIVE)
    store.record_result(1, 1, "b", NodeResult(143, "SIGTERM"))  # b's agent tore the attempt down
    assert not store.r.exists(keys.node_alloc("b"))
    assert store.get_job(1).state is JobState.PENDING  # a torn-down attempt decides nothing
    assert store.start(1, ["a", "b"], lambda pipe, job: None).attempts == 2


def test_requeue_an_ended_job_takes_it_out_of_the_ended_set(store):
    add_pending(store, 1, nodes=1)
    store.start(1, ["a"], lambda pipe, job: None)
    store.record_result(1, 1, "a", NodeResult(0))
    assert store.get_job(1).state is JobState.COMPLETED
    store.requeue_job(1)
    assert not store.r.zrange(keys.JOBS_ENDED, 0, -1) and store.r.smembers(keys.JOBS_PENDING) == {b"1"}
    assert store.reconcile() == {}  # every set agrees with the state
    assert store.get_job(1).to_json()["held"] is False
