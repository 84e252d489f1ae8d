"""What reaches the nodes with a job: its working tree (``submit --tree``, a directory brought
along, size-capped) and the submitter's variables (``sbatch --export``)."""

import io
import os
import subprocess
import sys
import tarfile

import pytest

pytestmark = pytest.mark.integration

ENV_SCRIPT = """#!/bin/bash
echo "lr=${LR-unset} epochs=${EPOCHS-unset} path=$PATH"
"""


def _project(root):
    (root / "run").mkdir(parents=True)
    (root / "conf").mkdir()
    (root / "conf" / "params.txt").write_text("lr=0.25\n")
    (root / "run" / "train.sh").write_text(
        "#!/bin/bash\n#SBATCH -N 2\n"
        "echo \"cwd=$(pwd) submit=$SLURM_SUBMIT_DIR\"\n"
        "cat conf/params.txt\n"
        "srun bash -c 'echo task $SLURM_PROCID sees $(cat conf/params.txt)'\n")
    return root


def test_a_working_tree_travels_with_the_job_and_later_edits_do_not(idle_cluster, tmp_path):
    """``minihpc submit --tree DIR SCRIPT``: the job runs in its own copy of DIR on every node,
    as it was at submit (sbatch copies only the script; a cluster's nodes share the home
    directory, which Compose containers and real hosts here need not)."""
    project = _project(tmp_path / "proj")
    job = idle_cluster.submit("--tree", project, "run/train.sh")
    (project / "conf" / "params.txt").write_text("lr=edited\n")
    info = idle_cluster.wait(job, timeout=60)
    out = idle_cluster.cli("logs", job).stdout
    assert info["state"] == "COMPLETED", out
    assert info["workdir"].endswith(f"job-{job}/tree") and info["workdir"] != str(project)
    assert f"cwd={info['workdir']} submit={info['workdir']}" in out
    assert out.count("sees lr=0.25") == 2 and "edited" not in out


def test_a_working_tree_from_standard_input_and_its_mistakes(idle_cluster, tmp_path):
    """``--tree -``: the tree as a tar archive on standard input (how ``make submit TREE=``
    sends it into the Compose cluster); a script outside it, or an archive escaping its root,
    is one line and no job."""
    project = _project(tmp_path / "proj")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(project, arcname=".")
    archive = buffer.getvalue()
    proc = subprocess.run([sys.executable, "-m", "minihpc.cli", "submit", "--parsable", "--tree", "-", "run/train.sh"],
                          input=archive, capture_output=True, env=idle_cluster.env, timeout=60, check=True)
    job = int(proc.stdout)
    assert idle_cluster.wait(job, timeout=60)["state"] == "COMPLETED"
    before = len(idle_cluster.cli("history", "--json").stdout)
    bad = idle_cluster.cli("submit", "--tree", project, "run/missing.sh", check=False)
    assert bad.returncode != 0
    assert bad.stderr.strip().splitlines()[-1].endswith(
        "script 'run/missing.sh' is not a file in the working tree (give its path inside it)")
    assert len(idle_cluster.cli("history", "--json").stdout) == before


def test_export_carries_the_submitters_variables_as_sbatch_does(idle_cluster, tmp_path):
    """sbatch(1) --export: ALL (the default) -- the job sees the variables it was submitted
    with (but minihpc keeps the node's own PATH); NONE -- none; VAR=value -- only those."""
    script = tmp_path / "env.sh"
    script.write_text(ENV_SCRIPT)
    env = dict(idle_cluster.env, LR="0.5", PATH=f"/submitter/only:{os.environ['PATH']}")
    jobs = {}
    for export in ("ALL", "NONE", "EPOCHS=3"):
        args = [] if export == "ALL" else [f"--export={export}"]
        jobs[export] = int(idle_cluster.cli("submit", "--parsable", *args, script, env=env).stdout)
    lines = {}
    for export, job in jobs.items():
        assert idle_cluster.wait(job, timeout=60)["state"] == "COMPLETED"
        lines[export] = next(line for line in idle_cluster.cli("logs", job).stdout.splitlines()
                             if line.startswith("lr="))
    assert lines["ALL"].startswith("lr=0.5 epochs=unset path=") and "/submitter/only" not in lines["ALL"]
    assert lines["NONE"].startswith("lr=unset epochs=unset")
    assert lines["EPOCHS=3"].startswith("lr=unset epochs=3")
    bad = idle_cluster.cli("submit", "--export=NONE,LR", script, check=False)
    assert bad.returncode != 0 and "NONE takes no variables" in bad.stderr
