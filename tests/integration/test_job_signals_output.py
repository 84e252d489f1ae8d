"""sbatch's -o/-e files, --signal before the time limit, and scancel --signal, on the local
cluster: each as man sbatch / man scancel say, checked by what the job's processes wrote."""

from pathlib import Path

import pytest

from tests.conftest import wait_until

pytestmark = pytest.mark.integration


def _script(workdir, name: str, *lines: str):
    path = workdir / name
    path.write_text("\n".join(lines) + "\n")
    return path


def _workdir(tmp_path):
    workdir = tmp_path / "work"
    workdir.mkdir()
    return workdir


def test_output_and_error_files_hold_the_script_and_its_tasks(idle_cluster, tmp_path):
    """man sbatch, -o/--output=<filename_pattern>, -e/--error: the batch script's stdout and
    stderr go to the files, named by the pattern (%j job id, %x job name, %N the node's short
    name); srun's tasks write where srun's output goes (through srun, to the batch script's
    files, whichever node runs them); without -e, stderr would join stdout. A relative name is in the job's output
    directory on the logs volume (Slurm: the working directory; see node.job_output), an
    absolute one as given; ``scontrol show job`` says where (StdOut=, StdErr=). minihpc's own
    lines stay in the node log, with where the output went."""
    workdir = _workdir(tmp_path)
    script = _script(workdir, "files.sh",
        "#!/bin/bash",
        "#SBATCH -N 2",
        "#SBATCH -J sigout",
        "#SBATCH -o out-%j-%x-%N.txt",
        f"#SBATCH -e {workdir}/logs/err-%j.txt",
        'echo "script on $SLURMD_NODENAME"',
        'echo "script complains" >&2',
        "srun bash -c 'echo \"task $SLURM_PROCID on $SLURMD_NODENAME\"; echo \"task $SLURM_PROCID complains\" >&2'",
        'echo "script done"',
    )
    job = idle_cluster.submit(script)
    info = idle_cluster.wait(job)
    assert info["state"] == "COMPLETED", idle_cluster.cli("logs", job).stdout
    shown = dict(w.split("=", 1) for w in idle_cluster.cli("scontrol", "-o", "show", "job", job).stdout.split()
                 if w.startswith(("StdOut=", "StdErr=")))
    stdout = Path(shown["StdOut"])
    assert stdout.name == f"out-{job}-sigout-master-node.txt" and stdout.parent.name == "output"
    assert shown["StdErr"] == f"{workdir}/logs/err-{job}.txt"
    first = stdout.read_text().splitlines()
    assert first[0] == "script on master-node" and first[-1] == "script done"
    assert "task 0 on master-node" in first and "task 1 on worker-node-1" in first
    assert not (stdout.parent / f"out-{job}-sigout-worker-node-1.txt").exists()
    errors = (workdir / "logs" / f"err-{job}.txt").read_text().splitlines()  # logs/ was made for it
    assert sorted(errors) == ["script complains", "task 0 complains", "task 1 complains"]
    log = idle_cluster.cli("logs", job).stdout
    assert f"output goes to {stdout}" in log
    assert "complains" not in log and "script on" not in log and "exit code 0" in log


def test_signal_reaches_the_batch_shell_secs_before_the_limit(idle_cluster, tmp_path):
    """man sbatch, --signal=[B:]<sig_num>[@sig_time]: "When a job is within sig_time seconds of
    its end time, send it the signal sig_num"; B: "signal only the batch shell". The issue's
    test: --signal=USR1@5 reaches the job 5 s before its limit."""
    workdir = _workdir(tmp_path)
    script = _script(workdir, "warned.sh",
        "#!/bin/bash",
        "trap 'echo \"$SECONDS $EPOCHREALTIME\" > warned' USR1",
        "while true; do sleep 0.1; done",
    )
    job = idle_cluster.submit("-D", workdir, "--time", "0:12", "--signal", "B:USR1@5", script)
    info = idle_cluster.wait(job, timeout=60)
    assert info["state"] == "TIMEOUT", info
    # When it arrived, against when the record says the limit ends (bash's $SECONDS counts whole
    # clock seconds, so it is off by up to one: $EPOCHREALTIME is what counts): never early,
    # and within the nodes' polling and a loaded machine's delay after.
    at = float((workdir / "warned").read_text().split()[1])
    assert 0.0 <= at - (info["started_at"] + 12 - 5) < 1.5, at - info["started_at"]
    assert "SIGUSR1 sent to 1 process(es)" in idle_cluster.cli("logs", job).stdout


def test_signal_reaches_the_ranks_of_a_torchrun_job(idle_cluster, tmp_path):
    """man sbatch, --signal=USR1@5 without B: every task of the job gets it -- in torchrun mode
    each rank (torchrun itself, whose default action on SIGUSR1 is to die, does not); a job
    that handles it goes on and ends by itself."""
    workdir = _workdir(tmp_path)
    script = _script(workdir, "warned.py",
        "import os, signal, time",
        "got = []",
        "signal.signal(signal.SIGUSR1, lambda *_: got.append(time.time()))",
        "while not got:",
        "    time.sleep(0.05)",
        "with open(f\"warned-{os.environ['RANK']}\", 'w') as fh:",
        "    fh.write(str(got[0]))",
    )
    job = idle_cluster.submit("-D", workdir, "--ntasks-per-node", 2, "--time", "0:20", "--signal", "USR1@5", script)
    info = idle_cluster.wait(job, timeout=60)
    assert info["state"] == "COMPLETED", idle_cluster.cli("logs", job).stdout
    assert info["launch"] != "batch"
    for rank in (0, 1):
        at = float((workdir / f"warned-{rank}").read_text())
        assert 0.0 <= at - (info["started_at"] + 20 - 5) < 1.5, at - info["started_at"]


def test_scancel_signal_reaches_the_tasks_and_the_job_goes_on(idle_cluster, tmp_path):
    """man scancel, -s/--signal: "The name or number of the signal to send" (the job is not
    cancelled); by default the steps' tasks get it, not the batch shell; -b/--batch: only the
    batch step (the shell script). A pending job cannot be signalled."""
    workdir = _workdir(tmp_path)
    script = _script(workdir, "signalled.sh",
        "#!/bin/bash",
        "#SBATCH -N 2",
        "trap 'touch shell-usr1' USR1",
        "trap 'touch shell-usr2' USR2",
        "srun bash -c '"
        "trap \"touch task-usr1-$SLURM_PROCID\" USR1; touch started-$SLURM_PROCID; "
        "while [ ! -e stop ]; do sleep 0.1; done'",
        "while [ ! -e shell-usr2 ]; do sleep 0.1; done",
    )
    job = idle_cluster.submit("-D", workdir, script)
    wait_until(lambda: len(list(workdir.glob("started-*"))) == 2, timeout=60, message="both tasks started")
    idle_cluster.cli("cancel", "--signal", "USR1", job)
    wait_until(lambda: len(list(workdir.glob("task-usr1-*"))) == 2, timeout=10, message="USR1 in both tasks")
    assert not (workdir / "shell-usr1").exists()
    assert idle_cluster.show(job)["state"] == "RUNNING"

    pending = idle_cluster.submit("-N", 3, "--wrap", "true")  # waits for the nodes the first job holds
    refused = idle_cluster.cli("cancel", "-s", "USR1", pending, check=False)
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1, refused.stderr
    assert f"job {pending} is pending execution" in refused.stderr
    idle_cluster.cli("cancel", pending)

    (workdir / "stop").touch()  # the step ends; the shell then waits for USR2 (bash runs a trap once srun returns)
    idle_cluster.cli("cancel", "-s", "USR2", "-b", job)
    info = idle_cluster.wait(job, timeout=30)
    assert info["state"] == "COMPLETED", idle_cluster.cli("logs", job).stdout
