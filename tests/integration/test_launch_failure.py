"""The fault matrix's "launch failure on one node": a 4-node job lands on three good nodes and
on ``bad-node``, a real extra agent that joined the session's cluster misconfigured, so that its
share of the job cannot start while the others' do. The job must end in bounded time with a
reason that names the node, the good nodes' launchers must be torn down (nothing of the job
left running), every node must be free, and the cluster must go on running jobs.

What happens (the product's decision, pinned here): the job ends FAILED, it is not requeued.
No rank of it ever runs anywhere: the good nodes' torchruns wait in the static rendezvous for
all four nodes, and are torn down there once the job has ended. The product does not drain the
bad node by itself: a job placed on it again fails the same way, so the tests drain it, as the
operator who reads the reason would, before the honest job that shows the cluster goes on.
"""

import os
import pwd
import re
import shutil
import subprocess
import time

import psutil
import pytest

from minihpc.machine.local_state import LocalState
from minihpc.machine.processes import process_tree, terminate

from tests.conftest import wait_until
from tests.integration.conftest import JOBS

pytestmark = pytest.mark.integration

BAD = "bad-node"
GOOD = ["master-node", "worker-node-1", "worker-node-2"]
ENDS_WITHIN = 60.0
"""Seconds from submit within which the job must have ended: a hang would run for minutes
(the job's ranks sleep 300 s; torchrun's own rendezvous timeout is longer still)."""
FREED_WITHIN = 30.0
"""Seconds after the job's end within which every node must be idle and its processes gone
(a teardown takes at most the kill wait, 3 s, plus a report)."""


class ExtraAgent:
    """One more node agent, started as ``up --local`` starts the session's (a copy of
    worker-node-1's command and environment under another name), with extra settings."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.proc: subprocess.Popen | None = None

    def start(self, **settings: str) -> None:
        c = self.cluster
        spec = LocalState(c.state_dir).node_commands()["worker-node-1"]
        argv = [BAD if arg == "worker-node-1" else arg for arg in spec["argv"]]
        env = dict(c.env, **spec["env"], **settings)
        with open(c.state_dir / "run" / f"{BAD}.log", "ab") as out:
            self.proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        wait_until(lambda: self.proc.poll() is not None or any(
            n["name"] == BAD and n["state"] == "idle" for n in c.nodes()), timeout=30, message=f"{BAD} registered")
        assert self.proc.poll() is None, (c.state_dir / "run" / f"{BAD}.log").read_text()

    def stop_and_forget(self) -> None:
        """Stop the agent (and anything it started) and remove the node from the registry, so
        the session's other tests see their three nodes."""
        if self.proc is not None:
            terminate(process_tree(self.proc.pid), 5.0)
            self.proc.wait(timeout=10)
        # Once its alive key is gone (at once on a clean stop; a node timeout after a kill).
        wait_until(lambda: self.cluster.cli("nodes", "--forget", BAD, check=False).returncode == 0
                   or BAD not in {n["name"] for n in self.cluster.nodes()}, timeout=30, message=f"{BAD} forgotten")


@pytest.fixture
def bad_node(idle_cluster):
    agent = ExtraAgent(idle_cluster)
    try:
        yield agent
    finally:
        agent.stop_and_forget()


@pytest.fixture
def vanishing_user():
    """A job user that exists when the bad node's agent starts (it checks then) and is gone
    by the time the job launches; deleted in any case."""
    if os.geteuid() != 0 or shutil.which("useradd") is None:
        pytest.skip("needs root and useradd: a node agent becomes the job user only as root")
    name = f"minihpc-gone-{os.getpid()}"
    subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True)
    try:
        yield name
    finally:
        if _exists(name):
            subprocess.run(["userdel", name], check=False)


def _exists(user: str) -> bool:
    try:
        pwd.getpwnam(user)
        return True
    except KeyError:
        return False


def job_processes(cluster, job: dict) -> list[tuple[str | None, int, str]]:
    """This cluster's processes of the job, on any node, as (node, pid, command line): its
    launchers and ranks (their command line names the spooled script) and anything else with
    its environment (a rank's child). Other clusters on this machine have jobs with the same
    ids, never the same paths."""
    spool = os.path.dirname(job["script"]) + os.sep
    checkpoints = str(cluster.state_dir / "shared" / "models" / f"job-{job['id']}")
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            cmdline = " ".join(proc.info["cmdline"] or [])
            env = proc.environ()
            if (spool in cmdline or env.get("MINIHPC_CHECKPOINT_DIR") == checkpoints) \
                    and proc.status() != psutil.STATUS_ZOMBIE:
                found.append((env.get("MINIHPC_NODE"), proc.info["pid"], cmdline[:200]))
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def log_sections(text: str) -> dict[str, str]:
    """``minihpc logs JOB``'s output split by node."""
    parts = re.split(r"^==> (\S+) <==$", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def run_failing_job(c, tmp_path) -> tuple[dict, set[str]]:
    """A 4-node job that needs the bad node: it must end within ENDS_WITHIN. The job as it
    ended, and the nodes on which a process of it was seen running meanwhile."""
    pids = tmp_path / "ranks"
    job_id = c.submit("-N", 4, JOBS / "sleeper.py", pids, 300)
    job = c.show(job_id)
    seen: set[str] = set()
    while job["state"] in ("PENDING", "RUNNING") and time.time() < job["submitted_at"] + ENDS_WITHIN:
        seen |= {node for node, _, _ in job_processes(c, job)}
        job = c.show(job_id)
    assert job["state"] not in ("PENDING", "RUNNING"), \
        f"job {job_id} still {job['state']} after {ENDS_WITHIN:g}s\n{c.cli('logs', job_id).stdout}"
    assert job["ended_at"] - job["submitted_at"] < ENDS_WITHIN, job
    assert sorted(job["nodes"]) == sorted([BAD, *GOOD]), job
    assert not pids.exists() or not list(pids.iterdir())  # no rank ran anywhere: the gang never formed
    return job, seen


def settle(c, job: dict) -> tuple[dict, str]:
    """Every node (the bad one too) must be idle again and nothing of the job left running,
    within FREED_WITHIN of its end. The job and its logs then: every node has reported and
    written its last line."""
    deadline = time.time() + FREED_WITHIN
    while True:
        busy = [f"{n['name']} {n['state']} (job {n['job']})" for n in c.nodes() if n["state"] != "idle"]
        left = job_processes(c, job)
        if (not busy and not left) or time.time() > deadline:
            break
        time.sleep(0.2)
    assert not busy and not left, (f"{FREED_WITHIN:g}s after job {job['id']} ended {job['state']}: nodes not "
                                   f"freed {busy}; its processes still running (node, pid, command) {left}")
    job = c.show(job["id"])
    assert sorted(job["results"]) == sorted([BAD, *GOOD]), job  # every node reported: that freed it
    return job, c.cli("logs", job["id"]).stdout


def assert_torn_down(job: dict, logs: str, launched: list[str]) -> None:
    """Each node in ``launched`` started its launcher and tore it down when the job ended."""
    sections = log_sections(logs)
    for node in launched:
        teardown = rf"job {job['id']} on {node}: exit code [^\n]*\(job ended\) ==="
        assert re.search(teardown, sections.get(node, "")), logs


def assert_the_cluster_goes_on(c) -> None:
    """With the bad node drained (the reason named it), an honest 3-node gang job completes."""
    c.cli("nodes", "--drain", BAD, "--reason", "launch failure")
    honest = c.wait(c.submit("-N", 3, JOBS / "barrier_sleep.py", 0), timeout=90)
    assert honest["state"] == "COMPLETED", (honest, c.cli("logs", honest["id"]).stdout)
    assert sorted(honest["nodes"]) == GOOD


def test_a_node_that_lost_the_job_user_fails_the_job_at_launch_naming_itself_and_frees_every_node(
        idle_cluster, vanishing_user, bad_node, tmp_path):
    """The node's user database lost the job user (an sssd/LDAP outage on that node, an account
    removed by configuration drift): a common misconfigured node in a real cluster, and the
    one thing a node checks per launch that its peers cannot see. A user missing from the
    start is no launch failure (the agent refuses to start: identity.resolve at registration),
    so the user exists when bad-node's agent starts and is deleted before the job comes. The
    share fails before torchrun (share.ShareFailed path): the job is FAILED at once with a
    LaunchFailed reason, and the good nodes see it ended and tear their launchers down."""
    c = idle_cluster
    bad_node.start(MINIHPC_JOB_USER=vanishing_user)
    subprocess.run(["userdel", vanishing_user], check=True)

    job, _ = run_failing_job(c, tmp_path)

    assert job["state"] == "FAILED" and job["requeues"] == 0, job
    assert job["failed_node"] == BAD and job["exit_code"] == 1, job
    assert job["reason"] == (f"LaunchFailed ({BAD}: UsageError: MINIHPC_JOB_USER={vanishing_user!r}: "
                             f"no such user on this node)"), job
    job, logs = settle(c, job)
    assert job["reason"] in log_sections(logs)[BAD]  # the node's log says why too
    # The job ends within moments of the bad node's report; a peer slower than that may not
    # have started its launcher at all (it sees the job over). Node rank 0 always has: the bad
    # node took the master port from it before it failed.
    launched = [n for n in GOOD if f"job {job['id']} attempt 1 on {n}" in logs]
    assert job["nodes"][0] in launched, logs
    assert_torn_down(job, logs, launched)
    assert_the_cluster_goes_on(c)


def test_a_node_whose_torch_is_broken_fails_the_job_and_its_peers_leave_the_rendezvous(
        idle_cluster, bad_node, tmp_path):
    """The node's Python environment is broken (a torch upgrade half done, a library missing):
    the agent, which never imports torch, runs and takes jobs, but its torchrun dies on import.
    Its peers' torchruns are up and waiting in the rendezvous meanwhile, which is where a gang
    would hang: the product treats the launcher's exit 1 as any rank failure, holds it (node
    timeout + 2 heartbeats, to tell it from a node failure), then fails the job and the good
    nodes tear their launchers down. The reason is Slurm's NonZeroExitCode; the node is the
    job's failed node and its log has the cause."""
    c = idle_cluster
    broken = tmp_path / "broken-site" / "torch"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text(
        'raise ImportError("libtorch_cpu.so: cannot open shared object file: No such file or directory")\n')
    bad_node.start(PYTHONPATH=os.pathsep.join(filter(None, [str(broken.parent), c.env.get("PYTHONPATH")])))

    job, seen = run_failing_job(c, tmp_path)

    assert set(GOOD) <= seen, seen  # the good nodes' launchers ran (in the rendezvous) while the job failed
    assert job["state"] == "FAILED" and job["requeues"] == 0, job
    assert job["failed_node"] == BAD and job["exit_code"] == 1 and job["reason"] == "NonZeroExitCode", job
    job, logs = settle(c, job)
    assert "ImportError: libtorch_cpu.so: cannot open shared object file" in log_sections(logs)[BAD], logs
    assert_torn_down(job, logs, GOOD)  # held for seconds: every good node had launched
    assert_the_cluster_goes_on(c)
