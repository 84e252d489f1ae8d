"""srun's I/O on the local cluster, as Slurm's (man srun, IO Redirection): a heredoc on srun's
stdin reaches every task (the issue's silent false success: each ``python3 -`` ran an empty
program), every task's output comes back through srun's own stdout and stderr (pipes,
``$(srun ...)``, ``2> file``), ``--input``, ``-l``, ``-o`` patterns, and a reader that closes the
pipe ends srun and its tasks."""

import os
import re
import sys

import psutil
import pytest

from tests.conftest import wait_until
from tests.integration.conftest import JOBS

pytestmark = pytest.mark.integration

NODES = ["master-node", "worker-node-1", "worker-node-2"]


def test_sruns_stdin_output_and_redirections_are_slurms(idle_cluster, tmp_path):
    """The issue's heredoc on 3 nodes (``srun python3 - <<'PY'``, an all-reduce over gloo), and
    Slurm's I/O forms around it. ``python3`` is this suite's, with torch: the job is given its
    PATH by name (--export=ALL leaves the submitting machine's PATH out)."""
    path = f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ['PATH']}"
    job = idle_cluster.submit("-D", tmp_path, f"--export=ALL,PATH={path}", JOBS / "srun_io.sh")
    info = idle_cluster.wait(job, timeout=120)
    log = idle_cluster.cli("logs", job).stdout
    assert info["state"] == "COMPLETED", log
    heredoc = sorted(re.findall(r"heredoc task (\d) of 3 on (\S+): all-reduce sum (\d+)", log))
    assert heredoc == [(str(r), NODES[r], "6") for r in range(3)], log
    assert "captured: master-node worker-node-1 worker-node-2" in log
    assert log.count("through a pipe: piped in") == 2
    assert "input task 1: only for one" in log and "input task 0: \n" in log + "\n"
    assert re.search(r"^0: labelled 0\n1: labelled 1\n2: labelled 2$", log, re.M), log
    assert "stderr file: to stderr 0 to stderr 1" in log and "to stderr 0\n" not in log
    assert "file of task 0\nfile of task 1" in log
    assert re.search(r"^first of yes: y$", log, re.M) and "srun after its reader went: 141" in log
    assert "batch done" in log
    wait_until(lambda: not [p for p in psutil.process_iter(["name"]) if p.info["name"] == "yes"], timeout=15,
               message="srun's tasks killed once its reader went")


def test_run_gives_its_stdin_to_every_task(idle_cluster):
    """man srun, outside an allocation too: stdin goes to all tasks (`echo hi | srun -N 3 cat`);
    without stdin (here /dev/null) each task reads an end at once."""
    out = idle_cluster.cli("run", "-N", 3, "bash", "-c", 'echo "$SLURMD_NODENAME read $(cat)"', input="hello\n",
                           timeout=120)
    assert sorted(out.stdout.splitlines()) == [f"{n} read hello" for n in NODES], out
    empty = idle_cluster.cli("run", "-N", 2, "bash", "-c", 'echo "read [$(cat)]"', timeout=120)
    assert empty.stdout.splitlines() == ["read []"] * 2, empty
    one = idle_cluster.cli("run", "-l", "-n", 2, "-i", "1", "bash", "-c", 'echo "read [$(cat)]"', input="x\n",
                           timeout=120)  # srun's -l and --input, given to run
    assert sorted(one.stdout.splitlines()) == ["0: read []", "1: read [x]"], one
