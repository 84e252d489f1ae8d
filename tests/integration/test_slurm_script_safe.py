"""Slurm's commands as scripts use them, under their own names (issue 37): sbatch -W/--wait,
-H/--hold, -Q/--quiet, --test-only, -t 0; squeue -h (--noheader), --me, -p, -w; scancel silent;
-w/--nodelist and -x/--exclude placing the job; an option minihpc cannot honour refused, an
advisory one accepted; usage mistakes exit 1."""

import subprocess
import sys

import pytest

from tests.conftest import wait_until
from tests.integration.conftest import JOBS

pytestmark = pytest.mark.integration


def slurm(c, alias: str, *args, timeout: float = 120) -> subprocess.CompletedProcess:
    """``alias ARGS`` as a script runs it (the console script's code: minihpc.cli.slurm)."""
    return subprocess.run([sys.executable, "-m", "minihpc.cli.slurm", alias, *map(str, args)], env=c.env,
                          capture_output=True, text=True, timeout=timeout)


def test_sbatch_wait_hold_quiet_test_only_and_no_time_limit(idle_cluster):
    """man sbatch: -W "exit with the same exit code as the submitted job"; -H "submitted in a
    held state"; -Q suppresses informational messages; --test-only "does not actually submit
    the job"; -t 0 "requests that no time limit be imposed"."""
    c = idle_cluster
    failed = slurm(c, "sbatch", "-W", "--wrap", "exit 3")
    assert failed.returncode == 3 and failed.stdout.startswith("Submitted batch job "), failed
    done = slurm(c, "sbatch", "--wait", "-t", "0", "--wrap", "true")
    assert done.returncode == 0, done
    assert c.show(int(done.stdout.split()[-1]))["time_limit"] is None

    held = slurm(c, "sbatch", "-H", "-Q", "--wrap", "true")
    assert held.returncode == 0 and held.stdout == "" and held.stderr == "", held
    [job] = slurm(c, "squeue", "--me", "-h", "-o", "%i %t %r").stdout.splitlines()
    job_id, state, reason = job.split()
    assert (state, reason) == ("PD", "JobHeldUser")
    c.cli("scontrol", "release", job_id)
    assert c.wait(int(job_id))["state"] == "COMPLETED"

    probe = slurm(c, "sbatch", "--test-only", "-N", 2, "--ntasks-per-node", 2, "--wrap", "true")
    assert probe.returncode == 0 and probe.stdout == "", probe
    assert probe.stderr.startswith("sbatch: Job to start at ") and \
        probe.stderr.rstrip().endswith("using 4 processors on nodes master-node,worker-node-1 in partition main"), probe
    assert slurm(c, "squeue", "-h").stdout == ""  # nothing was queued


def test_squeue_filters_scancel_and_placement_by_node_names(idle_cluster, tmp_path):
    """man sbatch -w/--nodelist, -x/--exclude; man squeue -h/--noheader, --me, -p, -w; man
    scancel: silent when it worked."""
    c, gate = idle_cluster, tmp_path / "open"
    pinned = c.submit("-w", "worker-node-2", "-J", "pinned", JOBS / "gate.py", gate)
    wait_until(lambda: c.show(pinned)["state"] == "RUNNING", timeout=60, message="the pinned job running")
    assert c.show(pinned)["nodes"] == ["worker-node-2"]
    assert slurm(c, "squeue", "-h", "-o", "%i", "-w", "worker-node-[1-2]").stdout.split() == [str(pinned)]
    assert slurm(c, "squeue", "-h", "-w", "master-node").stdout == ""
    assert slurm(c, "squeue", "-h", "-o", "%i", "-p", "main", "--me").stdout.split() == [str(pinned)]
    assert slurm(c, "squeue", "-h", "-p", "other").stdout == ""
    header = slurm(c, "squeue", "-o", "%i").stdout.splitlines()
    assert header == ["JOBID", str(pinned)]  # without -h, a header (and --help is help)
    assert "usage: squeue" in slurm(c, "squeue", "--help").stdout

    spread = c.submit("-N", 2, "-x", "master-node", "--wrap", "scontrol show hostnames")
    wait_until(lambda: c.show(spread)["reason"] != "None", timeout=30, message="the spread job's verdict")
    assert c.show(spread)["state"] == "PENDING"  # worker-node-2 is taken and master-node excluded: it waits
    cancel = slurm(c, "scancel", pinned)
    assert (cancel.returncode, cancel.stdout, cancel.stderr) == (0, "", "")
    info = c.wait(spread)
    assert info["state"] == "COMPLETED" and sorted(info["nodes"]) == ["worker-node-1", "worker-node-2"], info


def test_options_minihpc_cannot_honour_are_refused_and_advisory_ones_accepted(idle_cluster, tmp_path):
    c = idle_cluster
    script = tmp_path / "mail.sh"
    script.write_text("#!/bin/bash\n#SBATCH --mail-type=END --mail-user=me@example.org\n#SBATCH -A research\n"
                      "echo mailed\n")
    assert c.wait(c.submit(script))["state"] == "COMPLETED"
    qos = tmp_path / "qos.sh"
    qos.write_text("#!/bin/bash\n#SBATCH --qos=high\necho never\n")
    refused = slurm(c, "sbatch", qos)
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1 and "--qos=high" in refused.stderr, refused
    unknown = slurm(c, "sbatch", "-w", "no-such-node", "--wrap", "true")
    assert unknown.returncode == 1 and "invalid node name specified: no-such-node" in unknown.stderr, unknown
    usage = slurm(c, "squeue", "--no-such-flag")
    assert usage.returncode == 1 and usage.stderr.startswith("squeue: error:"), usage
    assert slurm(c, "squeue", "-h").stdout == ""
