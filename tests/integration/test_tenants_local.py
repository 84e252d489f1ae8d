"""The attack suite's local-mode twin (issue 33): a local cluster started as root with
MINIHPC_JOB_USER=%u runs alice's and bob's jobs under uids of their own, bob's job can neither
list, read nor write alice's checkpoint, spooled script or logs, the re-forking daemon it leaves
is gone when its job has ended, and one user's jobs are capped -- with real processes, a real
Redis and the REST API, as on Compose (tests/e2e/test_security.py)."""

import json
import os
import pwd
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from minihpc.core import tenants as tenants_module
from minihpc.machine import files
from minihpc.node import sweep
from tests.attacks import TENANT_ATTACKS
from tests.conftest import wait_until
from tests.integration.api_client import Api
from tests.integration.conftest import start_cluster, stop_cluster

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root, to run jobs as other users")]

ROOT = Path(__file__).resolve().parents[2]
TENANT = (ROOT / "tests/e2e/jobs/tenant.py").read_text()
CAP = 3
CHECKPOINT_CAP = 3 << 20


@pytest.fixture(scope="module")
def reachable():
    """The jobs' users must reach this Python and minihpc, as a site's users must: a clone in a
    0700 temporary folder (a CI's) is opened to them (o+x: passing through, no listing) for the
    test, and closed again after."""
    opened = []
    for needed in (sys.prefix, os.path.realpath(sys.executable), sys.base_prefix, ROOT / "src"):
        while (closed := files.closed_to_others(needed)) is not None and os.path.isdir(closed):
            mode = stat.S_IMODE(os.stat(closed).st_mode)
            os.chmod(closed, mode | stat.S_IXOTH)
            opened.append((closed, mode))
    yield
    for path, mode in reversed(opened):
        os.chmod(path, mode)


@pytest.fixture(scope="module")
def tenants(reachable):
    state = Path(tempfile.mkdtemp(prefix="minihpc-tenants-"))  # not under pytest's 0700 folder
    before = {entry.pw_uid for entry in pwd.getpwall()}
    cluster = start_cluster(state, MINIHPC_JOB_USER="%u", MINIHPC_MAX_JOBS_PER_USER=str(CAP),
                            MINIHPC_MAX_CHECKPOINT_BYTES_PER_USER=str(CHECKPOINT_CAP))
    try:
        yield Api(cluster)
    finally:
        stop_cluster(cluster)
        shutil.rmtree(state, ignore_errors=True)
        # The accounts the nodes added for the cluster's uids are this machine's: take them back.
        for entry in pwd.getpwall():
            if entry.pw_uid >= tenants_module.ALLOCATED_UID_BASE and entry.pw_uid not in before:
                subprocess.run(["userdel", entry.pw_name], capture_output=True, check=False)
                shutil.rmtree(entry.pw_dir, ignore_errors=True)


def test_local_mode_as_root_runs_each_users_jobs_as_that_user_and_bob_cannot_touch_alices(tenants):
    api, cluster = tenants, tenants.cluster
    alice_token, bob_token = api.token("alice"), api.token("bob")
    alice = api.submit(alice_token, TENANT, script_name="tenant.py", args=["keep", "15"], nodes=2)
    wait_until(lambda: cluster.show(alice)["state"] == "RUNNING", timeout=60, interval=0.3,
               message="alice's job running")
    bob = api.submit(bob_token, TENANT, script_name="tenant.py", args=["attack", str(alice)], nodes=1)
    bobs = cluster.wait(bob, timeout=90)
    ended = time.monotonic()
    bob_logs = cluster.cli("logs", bob).stdout
    bob_uid = int(re.search(r"tenant uid (\d+) gid (\d+) groups \[\]", bob_logs)[1])
    alive = sweep.of_uid(bob_uid)  # on the whole machine, not only below an agent
    print(bob_logs, f"{len(alive)} process(es) of bob's uid {time.monotonic() - ended:.2f} s after his job ended")
    assert bobs["state"] == "COMPLETED", bob_logs
    assert "left a re-forking daemon behind" in bob_logs and not alive, bob_logs
    assert "ATTACK read their log: refused (PermissionError)" in bob_logs, bob_logs
    assert dict(re.findall(r"ATTACK (.+?): (\w+)", bob_logs)) == {a: "refused" for a in TENANT_ATTACKS}, bob_logs

    # One user's flood is capped (MINIHPC_MAX_JOBS_PER_USER, here 3): bob's ended job counts no more.
    held = [api.submit(bob_token, "print('later')\n", begin="2099-01-01") for _ in range(CAP)]
    refused = api.call("POST", "/jobs", bob_token, json={"script": "print('one too many')\n"})
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"] == (f"user bob has {CAP} job(s) pending or running and may have at most {CAP} "
                                       "(MINIHPC_MAX_JOBS_PER_USER); this submit adds 1"), refused.text
    assert api.call("POST", "/jobs", alice_token, json={"script": "print('alice is not bob')\n",
                                                       "begin": "2099-01-01"}).status_code == 201
    cluster.cli("cancel", *held)

    done = cluster.wait(alice, timeout=90)
    alice_logs = cluster.cli("logs", alice).stdout
    assert done["state"] == "COMPLETED", alice_logs
    assert alice_logs.count("KEPT") == 2, alice_logs
    (alice_uid, home), = set(re.findall(r"tenant uid (\d+) gid \1 groups \[\] home (\S+)", alice_logs))
    assert int(alice_uid) >= 200_000 and bob_uid >= 200_000 and int(alice_uid) != bob_uid, (alice_uid, bob_uid)
    assert home == f"/var/lib/minihpc-homes/{alice_uid}"
    assert re.search(rf"checkpoint dir mode 0o750 uid {alice_uid}", alice_logs), alice_logs
    assert re.search(r"^tenant name alice$", alice_logs, re.M), alice_logs


SRUN_FLOOD = """#!/bin/bash
srun -n 15000000 true
echo "srun -n 15000000 exit $?"
"""

FIFO_TRAP = """import os, time
path = os.environ["MINIHPC_PROGRESS_FILE"]  # where the agent reads this job's progress
if os.path.exists(path):
    os.unlink(path)
os.mkfifo(path)
print("planted a FIFO at the progress file", flush=True)
time.sleep(2)
"""


def test_bobs_floods_and_traps_are_refused_or_contained_and_alices_next_job_runs(tenants):
    api, cluster = tenants, tenants.cluster
    bob = api.token("bob")
    before = len(cluster.queue())
    # A 1 MB args array of 1000 tasks: refused whole, nothing recorded.
    flood = api.call("POST", "/jobs", bob, json={"script": "print(1)\n", "args": ["x" * 100_000] * 10,
                                                 "array": "0-999"})
    assert flood.status_code in (400, 413) and "error" in flood.json(), flood.text
    assert len(cluster.queue()) == before
    # The front of the queue is the admins' to give.
    high = api.call("POST", "/jobs", bob, json={"script": "print(1)\n", "priority": "high"})
    assert high.status_code == 403, high.text
    # srun -n 15,000,000 in a batch job: the step is refused at once, the job goes on.
    batch = api.submit(bob, SRUN_FLOOD, script_name="flood.sh")
    done = cluster.wait(batch, timeout=60)
    out = cluster.cli("logs", batch).stdout
    assert done["state"] == "COMPLETED", out
    assert re.search(r"srun -n 15000000 exit [1-9]", out) and "MaxTasksPerNode" in out, out
    # A FIFO where the agent reads the job's progress: the agent never blocks on it.
    trap = api.submit(bob, FIFO_TRAP, script_name="trap.py", nodes=3)
    trapped = cluster.wait(trap, timeout=60)
    assert trapped["state"] == "COMPLETED", cluster.cli("logs", trap).stdout
    alice = api.token("alice")
    after = api.submit(alice, "print('after the trap')\n", script_name="after.py", nodes=3)
    assert cluster.wait(after, timeout=60)["state"] == "COMPLETED"
    assert cluster.cli("logs", after).stdout.count("after the trap") == 3


WRITE = """import os, sys
with open(os.path.join(os.environ["MINIHPC_CHECKPOINT_DIR"], "ckpt.bin"), "wb") as fh:
    fh.write(os.urandom(int(sys.argv[1]) << 20))
print("wrote", sys.argv[1], "MiB", flush=True)
"""


def test_a_users_checkpoints_past_the_cap_go_from_its_oldest_ended_jobs_and_no_one_elses(tenants):
    api, cluster = tenants, tenants.cluster
    models = cluster.state_dir / "shared" / "models"
    carol, dave = api.token("carol"), api.token("dave")

    def run(token, mib):
        job = api.submit(token, WRITE, script_name="write.py", args=[str(mib)])
        assert cluster.wait(job, timeout=60)["state"] == "COMPLETED", cluster.cli("logs", job).stdout
        return job

    first, second, daves = run(carol, 2), run(carol, 2), run(dave, 2)
    assert all((models / f"job-{j}" / "ckpt.bin").exists() for j in (first, second, daves))
    third = run(carol, 1)  # carol keeps 4 MiB past her 3 MiB: her oldest ended job's go
    logs = cluster.cli("logs", third).stdout
    print(logs)
    assert not (models / f"job-{first}").exists(), logs
    assert all((models / f"job-{j}" / "ckpt.bin").exists() for j in (second, daves, third))
    assert f"removed those of ended job(s) {first} (2.0MiB)" in logs and "carol's checkpoints took" in logs, logs
    pruned = [i for i in json.loads(cluster.cli("incidents", "--json", "--limit", 50).stdout)
              if i["kind"] == "checkpoints_pruned"]
    assert [(i["user"], i["jobs"], i["job"]) for i in pruned] == [("carol", [first], third)], pruned
    assert pruned[0]["freed_bytes"] == 2 << 20
