"""On the local cluster: ``nodes -R`` (sinfo -R) lists a drained node with its reason until it
is resumed, and the venv's installed Slurm aliases (``.venv/bin/sbatch``, ``sinfo``, ``sacct``)
run a job end to end."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
"""The venv's bin/, where pyproject's [project.scripts] put minihpc and the aliases."""


def alias(cluster, name: str, *args, check=True) -> subprocess.CompletedProcess:
    path = BIN / name
    if not path.exists():
        pytest.fail(f"{path} is not installed: reinstall the package's entry points "
                    "(scripts/venv.sh, or .venv/bin/pip install --no-index --no-deps --no-build-isolation -e .)")
    proc = subprocess.run([path, *map(str, args)], env=cluster.env, capture_output=True, text=True, timeout=120)
    if check:
        assert proc.returncode == 0, f"{name} {args} exited {proc.returncode}: {proc.stderr}"
    return proc


def test_a_drained_node_is_listed_with_its_reason_until_resumed(idle_cluster):
    c = idle_cluster
    assert c.cli("nodes", "-R").stdout.split() == ["REASON", "USER", "TIMESTAMP", "NODELIST"]
    c.cli("nodes", "--drain", "worker-node-2", "--reason", "disk check")
    try:
        lines = c.cli("nodes", "-R").stdout.splitlines()
        assert re.fullmatch(r"REASON\s+USER\s+TIMESTAMP\s+NODELIST", lines[0]), lines
        assert re.fullmatch(r"disk check\s+Unknown\s+\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\s+worker-node-2", lines[1]), lines
        assert len(lines) == 2, lines
        [item] = json.loads(c.cli("nodes", "--list-reasons", "--json").stdout)
        assert (item["node"], item["state"], item["reason"], item["user"]) == ("worker-node-2", "drain", "disk check", None)
        assert alias(c, "sinfo", "-R").stdout.splitlines() == lines  # the installed alias, the same view
    finally:
        c.cli("nodes", "--resume", "worker-node-2")
    assert c.cli("nodes", "-R").stdout.split() == ["REASON", "USER", "TIMESTAMP", "NODELIST"]


def test_the_installed_sbatch_runs_a_job_to_completion(idle_cluster, tmp_path):
    c = idle_cluster
    script = tmp_path / "hello_alias.py"
    script.write_text("#SBATCH --nodes=2\nimport os\nprint('hello from', os.environ['MINIHPC_NODE'], 'rank', os.environ['RANK'])\n")
    out = alias(c, "sbatch", "-J", "via-sbatch", script)
    job_id = int(re.fullmatch(r"Submitted batch job (\d+)\n", out.stdout).group(1))
    job = c.wait(job_id)
    assert (job["state"], job["name"], len(job["nodes"])) == ("COMPLETED", "via-sbatch", 2), job
    assert c.cli("logs", job_id).stdout.count("hello from") == 2
    ended = alias(c, "sacct").stdout.splitlines()
    assert any(line.split()[0] == str(job_id) and "COMPLETED" in line.split() for line in ended[1:]), ended
    usage = alias(c, "sbatch", "--no-such-option", script, check=False)
    assert (usage.returncode, usage.stderr) == (1, "sbatch: error: unrecognized arguments: --no-such-option\n")  # as Slurm
