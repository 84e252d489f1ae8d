"""Issue 11, "integrity and bounds", on a real local cluster:

- a queued job's spooled script rewritten after submit is not run: the job ends FAILED with the
  sha256 mismatch as its reason (in ``show`` and its log), on its first attempt, its node is
  freed, and an honest job submitted after it completes;
- ``--ntasks-per-node`` over the largest node's CPUs, or over MINIHPC_MAX_TASKS_PER_NODE, is
  refused at submit with one line naming the value and the limit, by the CLI and the API alike.
"""

import os
import stat
from pathlib import Path

import pytest

from minihpc.state.connect import connect
from minihpc.state.store import Store
from tests.conftest import wait_until
from tests.integration.api_client import Api
from tests.integration.conftest import JOBS

pytestmark = pytest.mark.integration

WRITES_ITS_NAME = "import sys\nopen(sys.argv[1], 'w').write({!r})\n"
"""A job script that writes a word into the file its argument names."""


def store_of(c) -> Store:
    return Store(connect((c.state_dir / "redis_url").read_text().strip()))


def test_a_spooled_script_rewritten_after_submit_fails_its_job_unrun(idle_cluster, tmp_path):
    c = idle_cluster
    gate = tmp_path / "open"
    blocker = c.submit("-N", 3, "-J", "blocker", JOBS / "gate.py", gate)
    wait_until(lambda: c.show(blocker)["state"] == "RUNNING", timeout=30, message=f"job {blocker} to start")
    script = tmp_path / "victim.py"
    script.write_text(WRITES_ITS_NAME.format("honest"))
    proof = tmp_path / "victim.out"
    victim = c.submit("-J", "victim", script, proof)
    queued = c.show(victim)
    assert queued["state"] == "PENDING", queued
    spooled = Path(queued["script"])
    assert spooled.read_text() == script.read_text()
    assert stat.S_IMODE(spooled.stat().st_mode) == 0o444, "the spooled copy is read-only"
    # The attack: put another script in its place (its directory is the submitter's to write).
    forged = spooled.with_name("forged.tmp")
    forged.write_text(WRITES_ITS_NAME.format("forged"))
    os.replace(forged, spooled)
    gate.touch()
    assert c.wait(blocker)["state"] == "COMPLETED"
    done = c.wait(victim, timeout=60)
    print(f"job {victim}: {done['state']} exit {done['exit_code']} attempts {done['attempts']} "
          f"reason {done['reason']!r}")
    assert done["state"] == "FAILED" and done["attempts"] == 1 and done["exit_code"] == 1, done
    assert done["reason"].startswith("LaunchFailed ("), done["reason"]
    assert (f"script {spooled} changed after submit: sha256 " in done["reason"]
            and f" != recorded {queued['script_sha256'][:12]}" in done["reason"]), done["reason"]
    assert not proof.exists(), "the forged script ran"
    assert f"script {spooled} changed after submit" in c.cli("logs", victim).stdout
    wait_until(c.idle, timeout=30, message="its node freed")
    honest = c.submit("-J", "honest", script, tmp_path / "honest.out")
    assert c.wait(honest, timeout=60)["state"] == "COMPLETED"
    assert (tmp_path / "honest.out").read_text() == "honest"


def test_ntasks_per_node_over_the_largest_nodes_cpus_is_refused_by_cli_and_api(idle_cluster, tmp_path):
    c = idle_cluster
    assert store_of(c).cluster_info().get("max_tasks_per_node") == "0", "up publishes the setting (unset)"
    cpus = max(n["cpus"] for n in c.nodes())
    line = f"--ntasks-per-node {cpus + 1} is over the limit of {cpus} tasks per node (the CPUs of the largest node)"
    for argv in (["--ntasks-per-node", cpus + 1], ["-N", 2, "-n", 2 * (cpus + 1)]):
        cli = c.cli("submit", *argv, JOBS / "sleeper.py", tmp_path, 0, check=False)
        print(f"minihpc submit {' '.join(map(str, argv))}: exit {cli.returncode}: {cli.stderr.strip()}")
        assert cli.returncode != 0 and line in cli.stderr and len(cli.stderr.strip().splitlines()) == 1, cli.stderr
    api = Api(c)
    r = api.call("POST", "/jobs", api.admin, json={"script": "print('x')\n", "ntasks_per_node": cpus + 1})
    print(f"POST /jobs: {r.status_code} {r.text}")
    assert r.status_code == 400 and line in r.json()["error"], r.text
    assert c.queue() == [], "nothing was queued"


def test_ntasks_per_node_over_the_published_setting_is_refused(idle_cluster, tmp_path):
    c = idle_cluster
    store = store_of(c)
    store.set_cluster_info({"max_tasks_per_node": "1"})  # as a master started with MINIHPC_MAX_TASKS_PER_NODE=1
    try:
        cli = c.cli("submit", "--ntasks-per-node", 2, JOBS / "sleeper.py", tmp_path, 0, check=False)
        print(f"exit {cli.returncode}: {cli.stderr.strip()}")
        assert cli.returncode != 0, cli.stdout
        assert "--ntasks-per-node 2 is over the limit of 1 task per node (MINIHPC_MAX_TASKS_PER_NODE)" in cli.stderr
        assert c.wait(c.submit("--ntasks-per-node", 1, JOBS / "sleeper.py", tmp_path, 0))["state"] == "COMPLETED"
    finally:
        store.set_cluster_info({"max_tasks_per_node": "0"})
