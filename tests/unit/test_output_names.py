"""sbatch's -o/-e file name patterns (core.output_names) and where each of a job's processes
writes (node.job_output), per man sbatch, "filename pattern"."""

import subprocess

import pytest

from minihpc.core.errors import UsageError
from minihpc.core.launch_spec import LaunchSpec
from minihpc.core.output_names import NO_VAL, Names, check_pattern, expand
from minihpc.node import job_output

NAMES = Names(job_id=42, name="train", user="alice", node="worker-node-1.cluster", node_id=1, task=3, step="0")


@pytest.mark.parametrize("pattern, expected", [
    ("slurm-%j.out", "slurm-42.out"),  # %j: jobid of the running job
    ("%x-%j.out", "train-42.out"),  # %x: job name
    ("%u/%N.log", "alice/worker-node-1.log"),  # %u: user name; %N: short hostname
    ("n%n-t%t-s%s", "n1-t3-s0"),  # %n: node id relative to the job; %t: task id; %s: step id
    ("%J", "42.0"),  # %J: jobid.stepid
    ("100%%-%j", "100%-42"),  # %%: the character "%"
    ("%5j", "00042"),  # a number between % and the letter zero-pads
    ("%q-%j", "%q-42"),  # a letter Slurm does not define stays as typed
    ("out\\\\-%j", "out-%j"),  # \\ anywhere: no expansion at all
])
def test_patterns_expand_as_man_sbatch_says(pattern, expected):
    """man sbatch, "filename pattern": %% %A %a %J %j %N %n %s %t %u %x, and a number for padding."""
    assert expand(pattern, NAMES) == expected


def test_array_patterns():
    """man sbatch: %A the array's master job id, %a the task id (4294967294 outside an array);
    %3a pads the task id to three digits, as Slurm's docs show for ``-o %A_%3a``."""
    task = Names(job_id=50, name="a", user="u", node="n", array_job_id=45, array_task_id=7)
    assert expand("%A_%a.out", task) == "45_7.out"
    assert expand("%A_%3a.out", task) == "45_007.out"
    assert expand("%b", task) == "7"  # %b: the task id modulo 10
    plain = Names(job_id=50, name="a", user="u", node="n")
    assert expand("%A_%a", plain) == f"50_{NO_VAL}"


@pytest.mark.parametrize("bad", ["", "   ", "a\0b"])
def test_a_pattern_that_cannot_name_a_file_is_refused(bad):
    with pytest.raises(UsageError):
        check_pattern(bad, "--output")


def spec(**kw) -> LaunchSpec:
    base = dict(job_id=7, attempt=1, name="job", node="n1", node_rank=1, nodes=["n0", "n1"], master_addr="n0",
                tasks_per_node=2, script="s", workdir="/work", user="u", output="out-%j-%N-%t.txt",
                log_path="/logs/job-7/n1.log")
    return LaunchSpec(**{**base, **kw})


def test_each_process_expands_with_its_own_numbers():
    """man sbatch: relative names are the job's working directory's (-D) -- here the job's
    output directory on the logs volume (node.job_output says why); the batch script is
    task 0 on the first node (srun's tasks write through srun, to the batch script's files); a
    torchrun node's output is named for its first rank."""
    batch = spec(launch="batch")
    assert job_output.batch_script(spec(launch="batch", node_rank=0, node="n0")).output == "/logs/job-7/output/out-7-n0-0.txt"
    assert job_output.for_launch(batch) is None  # not the first node: it only runs srun tasks
    torchrun = job_output.for_launch(spec())
    assert torchrun.output == "/logs/job-7/output/out-7-n1-2.txt" and torchrun.error == "" and torchrun.truncate
    assert job_output.for_launch(spec(output="/abs/o-%j")).output == "/abs/o-7"
    assert job_output.for_launch(spec(output="", error="")) is None


def test_only_a_file_with_one_writer_is_truncated():
    """Slurm truncates at the start (--open-mode=truncate) and appends on a requeue; a file two
    nodes share is appended to by both, as neither can truncate it without racing the other."""
    assert not job_output.for_launch(spec(output="same.txt")).truncate
    assert not job_output.for_launch(spec(attempt=2)).truncate
    assert job_output.batch_script(spec(launch="batch", node_rank=0, node="n0", output="o")).truncate


def run_wrapped(where: job_output.Output, script: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(where.wrap(["sh", "-c", script]), cwd=cwd, capture_output=True, text=True)


def test_the_wrapper_sends_stdout_and_stderr_where_asked(tmp_path):
    """Without -e, stderr goes with stdout (man sbatch); missing directories are created."""
    out, err = tmp_path / "new" / "dir" / "out.txt", tmp_path / "err.txt"
    run_wrapped(job_output.Output(str(out)), "echo one; echo two >&2", tmp_path)
    assert out.read_text() == "one\ntwo\n"
    run_wrapped(job_output.Output(str(out), str(err)), "echo three; echo four >&2", tmp_path)
    assert out.read_text() == "one\ntwo\nthree\n" and err.read_text() == "four\n"  # appended
    run_wrapped(job_output.Output(str(out), truncate=True), "echo five", tmp_path)
    assert out.read_text() == "five\n"


def test_with_only_e_stdout_stays_where_it_was(tmp_path):
    err = tmp_path / "err.txt"
    got = run_wrapped(job_output.Output("", str(err)), "echo out; echo err >&2", tmp_path)
    assert got.stdout == "out\n" and err.read_text() == "err\n"


def test_a_file_that_cannot_be_opened_ends_the_process_with_why(tmp_path):
    """The file is opened by whoever runs the wrapper (the job's user), never the agent; what
    it cannot open ends the process before the job's command runs, sh saying why."""
    (tmp_path / "plain").write_text("")
    got = run_wrapped(job_output.Output(str(tmp_path / "plain" / "out.txt")), "echo never", tmp_path)
    assert got.returncode != 0 and "plain" in got.stderr and "never" not in got.stdout
